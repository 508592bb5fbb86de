#!/usr/bin/env bash
# Side-by-side speed of heterospec and llama.cpp's Vulkan backend on the same device, llama-bench style
# (pp512: a 512-token prompt in one batch; tg128: 128 single-token decoding steps; warm-up, then REPS
# timed runs, t/s as mean ± sample standard deviation). For each model, one after the other:
#   HS_DEVICE=D heterospec bench -m MODEL -r REPS -o json
#   GGML_VK_VISIBLE_DEVICES=D hs-oracle --vulkan --bench -r REPS --json MODEL   (tools/oracle/README.md)
# and one combined markdown table
#   | model | test | heterospec t/s | llama.cpp Vulkan t/s | ratio |      (ratio = heterospec / llama.cpp)
# with the device names and the load average before and after each tool's run (the machine may be
# shared: a load above the core count slows either tool unpredictably). -o json prints instead one JSON
# object with both tools' raw results per model.
#
#   tools/bench_peer.sh [-r REPS] [-d DEVICE] [-o md|json] [--heterospec BIN] [MODEL...]
#     MODEL             GGUF files (default: <repo>/../shared/models/stories260K/stories260K.gguf and
#                       $HS_HOME/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#     -r REPS           repetitions for both tools (default 5)
#     -d DEVICE         Vulkan device index for both (default 0; lavapipe on a machine without a GPU)
#     --heterospec BIN  (default: $HS_BIN or <repo>/build/heterospec)
#
# Needs jq and hs-oracle ($HS_HOME/peer/bin/hs-oracle; tools/oracle/build.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
home="${HS_HOME:-$HOME/.cache/heterospec}"

reps=5
device=0
format=md
hs="${HS_BIN:-$repo/build/heterospec}"
models=()
while (($#)); do
  case "$1" in
    -r) reps="$2"; shift 2 ;;
    -d) device="$2"; shift 2 ;;
    -o) format="$2"; shift 2 ;;
    --heterospec) hs="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "bench_peer: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
[[ "$reps" =~ ^[0-9]+$ && "$reps" -ge 1 ]] || { echo "bench_peer: -r needs a count >= 1" >&2; exit 2; }
[[ "$device" =~ ^[0-9]+$ ]] || { echo "bench_peer: -d needs a device index" >&2; exit 2; }
[[ "$format" == md || "$format" == json ]] || { echo "bench_peer: -o takes md or json" >&2; exit 2; }
((${#models[@]})) || models=("$repo/../shared/models/stories260K/stories260K.gguf"
                             "$home/models/SmolLM2-135M-Instruct.Q4_1.gguf")

oracle="$home/peer/bin/hs-oracle"
command -v jq >/dev/null || { echo "bench_peer: 'jq' not found (tools/setup.sh installs it)" >&2; exit 1; }
[ -x "$oracle" ] || { echo "bench_peer: $oracle missing: run tools/oracle/build.sh" >&2; exit 1; }
[ -x "$hs" ] || { echo "bench_peer: heterospec binary $hs missing (--heterospec or HS_BIN)" >&2; exit 1; }
for m in "${models[@]}"; do
  [ -f "$m" ] || { echo "bench_peer: model $m not found" >&2; exit 1; }
done

work="$(mktemp -d "${TMPDIR:-/tmp}/hs-bench-peer.XXXXXX")"
trap 'rm -rf "$work"' EXIT
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# Runs both tools on every model; $work/N.json holds {model, heterospec, llama_cpp, load}.
i=0
for m in "${models[@]}"; do
  i=$((i + 1))
  name="$(basename "$m" .gguf)"
  echo "bench_peer: $name: heterospec (load $(loadavg))" >&2
  l0="$(loadavg)"
  HS_DEVICE="$device" "$hs" bench -m "$m" -r "$reps" -o json >"$work/$i.hs.json"
  l1="$(loadavg)"
  echo "bench_peer: $name: llama.cpp Vulkan (load $l1)" >&2
  GGML_VK_VISIBLE_DEVICES="$device" "$oracle" --vulkan --bench -r "$reps" --json "$m" >"$work/$i.ref.json"
  l2="$(loadavg)"
  jq -n --arg model "$name" --arg l0 "$l0" --arg l1 "$l1" --arg l2 "$l2" \
    --slurpfile h "$work/$i.hs.json" --slurpfile r "$work/$i.ref.json" \
    '{model: $model, heterospec: $h[0], llama_cpp: $r[0],
      load: {heterospec_before: $l0, heterospec_after: $l1, llama_cpp_after: $l2}}' >"$work/$i.json"
done
parts=()
for ((k = 1; k <= i; k++)); do parts+=("$work/$k.json"); done
jq -s --argjson reps "$reps" '{reps: $reps, results: .}' "${parts[@]}" >"$work/all.json"

if [ "$format" == json ]; then
  cat "$work/all.json"
  exit 0
fi
first="$work/1.json"
echo
echo "heterospec on $(jq -r '.heterospec.device' "$first"); llama.cpp $(jq -r '.llama_cpp.llama_cpp' "$first") on" \
     "$(jq -r '.llama_cpp.device' "$first") ($(jq -r '.llama_cpp.backend' "$first"), $(jq -r '.llama_cpp.n_threads' "$first")" \
     "threads, KV $(jq -r '.llama_cpp.type_kv' "$first"), flash attention $(jq -r '.llama_cpp.flash_attn' "$first")); $reps repetitions after a warm-up."
echo
echo "| model | test | heterospec t/s | llama.cpp Vulkan t/s | ratio |"
echo "| --- | ---: | ---: | ---: | ---: |"
jq -r '.results[] | .model as $m | .llama_cpp.tests as $ref | .heterospec.tests[] | . as $t
  | ($ref[] | select(.test == $t.test)) as $r
  | [$m, $t.test, $t.avg_ts, $t.stddev_ts, $r.avg_ts, $r.stddev_ts] | @tsv' "$work/all.json" |
  awk -F'\t' '{ ratio = ($5 > 0) ? sprintf("%.2fx", $3 / $5) : "-"
                 printf "| %s | %s | %.2f ± %.2f | %.2f ± %.2f | %s |\n", $1, $2, $3, $4, $5, $6, ratio }'
echo
echo "Load average (1, 5, 15 min) on $(nproc) CPUs:"
jq -r '.results[] | "- \(.model): before heterospec \(.load.heterospec_before), after it \(.load.heterospec_after), after llama.cpp \(.load.llama_cpp_after)"' "$work/all.json"
