#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite:
#   1. -Wall -Wextra -Werror build, every test with the Khronos validation layer on;
#   2. the same suite again with each optional feature forced off
#      (subgroup operations, fp16 + 16/8-bit storage + int dot + subgroup size
#      control, and a 64 KiB maxStorageBufferRange to force tensor splitting),
#      and with non-coherent host-visible memory emulated;
#   3. an AddressSanitizer + UndefinedBehaviorSanitizer build running the suite.
# Idempotent; exits non-zero on the first failing pass.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$here/tools/setup.sh" "$here/build"
"$here/tools/fetch_llama_src.sh"   # llama.cpp's tokenizer test vectors
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
jobs="$(nproc 2>/dev/null || echo 2)"

run_suite() { # <build-dir> <label> [VAR=value ...]
  local dir="$1" label="$2"
  shift 2
  echo "== tests: $label"
  (cd "$dir" && env "$@" ctest --output-on-failure -j "$jobs")
}

run_suite "$here/build" "default"
run_suite "$here/build" "no subgroup ops" HS_VK_DISABLE_SUBGROUP_OPS=1
run_suite "$here/build" "no fp16, 16/8-bit storage, int dot, subgroup size control" \
  HS_VK_DISABLE_F16=1 HS_VK_DISABLE_16BIT_STORAGE=1 HS_VK_DISABLE_8BIT_STORAGE=1 \
  HS_VK_DISABLE_INT8_DOT=1 HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL=1 HS_VK_DISABLE_COOPMAT=1
run_suite "$here/build" "4 MiB max buffer range (tensor splitting; op tests also force 4-64 KiB)" HS_VK_MAX_BUFFER_RANGE=4194304
run_suite "$here/build" "emulated non-coherent host-visible memory" HS_VK_FORCE_NONCOHERENT=1

echo "== build: AddressSanitizer + UndefinedBehaviorSanitizer"
cmake -S "$here" -B "$here/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DHS_WERROR=ON -DHS_SANITIZE=ON >/dev/null
ninja -C "$here/build-asan" -j "$jobs"
# Leaks inside the Vulkan driver and loader are not ours: suppress by library.
run_suite "$here/build-asan" "asan+ubsan" \
  ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$here/tools/lsan.supp" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
echo "== all test passes succeeded"
