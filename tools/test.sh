#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite:
#   1. -Wall -Wextra -Werror build, every test with the Khronos validation
#      layer on (a validation message fails the test that caused it);
#   2. the same suite again in passes that force the portable path of each
#      optional feature a kernel uses (`heterospec devices` lists them; a
#      feature no kernel uses has no pass, since it would rerun the default
#      code), and one pass of the two host-side fallbacks together, a 1 MiB
#      maxStorageBufferRange (splits tensors; model and op tests also run
#      groups at smaller ranges of their own) and emulated non-coherent host
#      memory (run first, see below); the tests labelled "statistical"
#      (test_spec_sampling), whose samples depend on the logits only, which
#      every fallback leaves bitwise the same (tested per kernel), run once,
#      in that first pass, where two tests run at a time;
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build running the
#      suite but the statistics (whose host code bench_spec_smoke's
#      temperature-1 run also takes), with leak checking and no suppressions;
#      the tests labelled "host" (calib_key: host code that sets its own
#      device switches) run in this pass alone.
# On lavapipe the default pass runs with split execution (each dispatch
# divided among one logical device per CPU core, whose queue threads spin at
# barriers): one test at a time, since two tests spinning on two cores each
# would wait for each other's time slices. The other passes turn it off
# (HS_VK_DISABLE_SPLIT=1: its fallback, one device) and run tests in parallel;
# under the sanitizers a part once stalled past a barrier's bounded wait (the
# submit failed with split execution's error), so that pass runs without it.
# It fetches what the tests need first (SmolLM2-135M-Instruct, sha256-checked;
# llama.cpp's tokenizer test vectors; the EAGLE-3 converter's and the
# plotter's venvs), and runs
# with CI=true unless CI is set otherwise, so a test that skips fails instead
# of passing silently.
# Idempotent; exits non-zero on the first failing pass.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/tools/setup.sh" "$here/build"
# The EAGLE-3 converter's tests (CTest convert_eagle3*) run with the Python of this venv.
py_convert="$(bash "$here/tools/pyenv.sh" convert | tail -n 1)"
# The benchmark plotter's test (CTest plot_bench) with the Python of its venv.
py_plot="$(bash "$here/tools/pyenv.sh" plot | tail -n 1)"
cmake -S "$here" -B "$here/build" -DHS_PYTHON_CONVERT="$py_convert" -DHS_PYTHON_PLOT="$py_plot" >/dev/null
"$here/tools/fetch_llama_src.sh"       # llama.cpp's tokenizer test vectors
"$here/tools/fetch_model.sh" smollm2   # SmolLM2 tokenizer and chat-template tests
home="${HS_HOME:-$HOME/.cache/heterospec}"
# CTest points HS_HOME at the build tree; these say where the fetches went.
export HS_TEST_MODELS="$home/models" HS_LLAMA_SRC="$home/src/llama.cpp"
export CI="${CI:-true}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
jobs="$(nproc 2>/dev/null || echo 2)"

run_suite() { # <build-dir> <label> <ctest jobs> <ctest options, space-separated> [VAR=value ...]
  local dir="$1" label="$2" j="$3" opts="$4" start=$SECONDS
  shift 4
  echo "== tests: $label"
  # shellcheck disable=SC2086 # opts is a list of words
  (cd "$dir" && env "$@" ctest --output-on-failure -j "$j" $opts)
  echo "== $label: $((SECONDS - start)) s"
}

# The 512-bit runs (label wide) only in the default pass, the statistical test only in the first pass (two
# tests at a time there, where the default pass runs one at a time), the other passes without either. Tests of
# the tools' scripts (label once: report.sh, which only calls heterospec's commands the other tests cover under
# every fallback; and the Python tests, which use no device) run in the first pass alone. Tests of host code that
# set their own device switches (label host: calib_key) run in the sanitizer pass alone, where the sanitizers
# watch that code; every other pass would rerun the same checks.
fallback="-LE statistical|wide|once|host"
# First the default kernels without split execution, two tests at a time: this pass compiles them into the
# empty Mesa shader cache on both cores, where the split pass (one test at a time, every part of a dispatch
# compiling the same variant at once) would use both cores for one compile. The split pass after it finds
# them compiled (llvmpipe's cache entries are the same with and without split execution).
# Two host-side fallbacks share it: emulated non-coherent memory and a 1 MiB maxStorageBufferRange.
run_suite "$here/build" "emulated non-coherent host-visible memory, 1 MiB max buffer range (tensor and KV-cache splitting), no split execution" "$jobs" "-LE wide|host" \
  HS_VK_DISABLE_SPLIT=1 HS_VK_FORCE_NONCOHERENT=1 HS_VK_MAX_BUFFER_RANGE=1048576
# HS_VK_SPLIT: split execution whether or not another program keeps a CPU busy (a context leaves busy CPUs out).
split_n=$((jobs < 2 ? 2 : jobs))
run_suite "$here/build" "default (split execution on lavapipe)" 1 "-LE statistical|once|host" HS_VK_SPLIT="$split_n"
run_suite "$here/build" "no split execution, no subgroup operations (portable reductions and products)" "$jobs" \
  "$fallback" HS_VK_DISABLE_SPLIT=1 HS_VK_DISABLE_SUBGROUP_OPS=1
run_suite "$here/build" "no split execution, no subgroup size control, no texel buffers, storage-buffer activations" "$jobs" "$fallback" \
  HS_VK_DISABLE_SPLIT=1 HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL=1 HS_VK_DISABLE_TEXEL_BUFFER=1 HS_TUNING=ubo=0

echo "== build: AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S "$here" -B "$here/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHS_WERROR=ON -DHS_SANITIZE=ON \
  -DHS_PYTHON_CONVERT="$py_convert" -DHS_PYTHON_PLOT="$py_plot" >/dev/null
ninja -C "$here/build-asan" -j "$jobs"
run_suite "$here/build-asan" "asan+ubsan (no split execution)" "$jobs" "-LE statistical|wide|once" HS_VK_DISABLE_SPLIT=1 \
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== all test passes succeeded"
