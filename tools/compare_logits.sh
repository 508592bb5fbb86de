#!/usr/bin/env bash
# Compares heterospec's logits with llama.cpp's (the hs-oracle, tools/oracle/README.md) on the bench
# prompts: for the first N prompts of every set in DATA/*/question.jsonl (the first entry of "turns"),
# optionally wrapped in the model's chat template, the prompt is tokenized ONCE by heterospec and the same
# token ids go to both tools (so tokenizer differences cannot mix in):
#   heterospec logits -f TEXT --print-tokens -o hs.hslg   (Vulkan, one batch, all-token logits;
#                                                    with --max-tokens: tokenize, cut, then --tokens IDS)
#   hs-oracle --tokens IDS -o ref.hslg MODEL         (llama.cpp CPU backend, f32 KV, no flash attention;
#                                                    --ref vulkan: --vulkan --ubatch 1)
#   hslg_compare --tsv ref.hslg hs.hslg              (tools/oracle/hslg_compare.c)
# and prints a markdown table per set and overall: positions, top-1 agreement, max |p - q| of the softmax
# probabilities over all positions and vocabulary, mean and max KL(llama.cpp || heterospec), max |logit
# difference|, and the largest reference margin at a top-1 mismatch (how far from a tie it was).
#
#   tools/compare_logits.sh [options]
#     -m MODEL          GGUF (default: $HS_HOME/models/SmolLM2-135M-Instruct.Q4_1.gguf)
#     -n N              prompts per set (default 16)
#     --plain           no chat template (default: the model's template, user turn)
#     --max-tokens N    cut each prompt's ids to the first N (default: no cut)
#     --ref cpu|cpu-f32|vulkan
#                       llama.cpp reference (default cpu: CPU backend, 1 thread, on MODEL itself; its
#                       q4/q8 dot products round the activations to q8_1, so on a quantized model it is
#                       not exact.
#                       cpu-f32: CPU backend on MODEL's weights dequantized to f32 by llama.cpp itself
#                       (hs-oracle --dequantize, made once into $HS_HOME/peer/models/): the same weights
#                       with float activations, the exact reference for a quantized model.
#                       vulkan: every layer on Vulkan device 0, one position per batch (--ubatch 1),
#                       whose f32 mat-vec kernels keep activations in float; ~1 s/token for SmolLM2
#                       on lavapipe, so only for a few short prompts, e.g. -n 1 --max-tokens 48)
#     --data DIR        bench data (default: <repo>/../shared/data/bench)
#     --heterospec BIN  (default: $HS_BIN or <repo>/build/heterospec)
#     --keep DIR        keep the .hslg files and the ids there (default: a temporary folder, removed)
#     --kv-type f16|f32 heterospec's KV cache (default f16, as heterospec's; the reference keeps f32)
#
# Needs: jq (JSONL), cc (builds hslg_compare into $HS_HOME/peer/bin when missing or older than its
# source), awk, hs-oracle ($HS_HOME/peer/bin/hs-oracle; tools/oracle/build.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
home="${HS_HOME:-$HOME/.cache/heterospec}"

model="$home/models/SmolLM2-135M-Instruct.Q4_1.gguf"
per_set=16
chat=1
max_tokens=0
data="$repo/../shared/data/bench"
hs="${HS_BIN:-$repo/build/heterospec}"
keep=""
ref=cpu
kv=f16
while (($#)); do
  case "$1" in
    -m) model="$2"; shift 2 ;;
    -n) per_set="$2"; shift 2 ;;
    --plain) chat=0; shift ;;
    --max-tokens) max_tokens="$2"; shift 2 ;;
    --data) data="$2"; shift 2 ;;
    --heterospec) hs="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --ref) ref="$2"; shift 2 ;;
    --kv-type) kv="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare_logits: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$per_set" =~ ^[0-9]+$ && "$per_set" -ge 1 ]] || { echo "compare_logits: -n needs a count >= 1" >&2; exit 2; }
[[ "$max_tokens" =~ ^[0-9]+$ ]] || { echo "compare_logits: --max-tokens needs a count" >&2; exit 2; }
case "$ref" in
  cpu) oracle_flags=(); ref_desc="CPU backend, 1 thread, on the model itself" ;;
  cpu-f32) oracle_flags=(); ref_desc="CPU backend, 1 thread, on the model's weights dequantized to f32 by llama.cpp (hs-oracle --dequantize)" ;;
  vulkan) oracle_flags=(--vulkan --ubatch 1); ref_desc="Vulkan backend (device 0), one position per batch" ;;
  *) echo "compare_logits: --ref takes cpu, cpu-f32 or vulkan" >&2; exit 2 ;;
esac

oracle="$home/peer/bin/hs-oracle"
cmp_src="$here/oracle/hslg_compare.c"
cmp_bin="$home/peer/bin/hslg_compare"
for tool in jq cc awk; do
  command -v "$tool" >/dev/null || { echo "compare_logits: '$tool' not found (tools/setup.sh installs it)" >&2; exit 1; }
done
[ -x "$oracle" ] || { echo "compare_logits: $oracle missing: run tools/oracle/build.sh" >&2; exit 1; }
[ -x "$hs" ] || { echo "compare_logits: heterospec binary $hs missing (--heterospec or HS_BIN)" >&2; exit 1; }
[ -f "$model" ] || { echo "compare_logits: model $model not found" >&2; exit 1; }
[ -d "$data" ] || { echo "compare_logits: bench data folder $data not found (--data)" >&2; exit 1; }
ref_model="$model"
if [ "$ref" = cpu-f32 ]; then
  ref_model="$home/peer/models/$(basename "${model%.gguf}").f32.gguf"
  if [ ! -f "$ref_model" ] || [ "$model" -nt "$ref_model" ]; then
    mkdir -p "$(dirname "$ref_model")"
    echo "compare_logits: dequantizing $(basename "$model") to f32 with llama.cpp -> $ref_model" >&2
    "$oracle" --dequantize "$ref_model.tmp" "$model" || { rm -f "$ref_model.tmp"; exit 1; }
    mv "$ref_model.tmp" "$ref_model"
  fi
fi
if [ ! -x "$cmp_bin" ] || [ "$cmp_src" -nt "$cmp_bin" ]; then
  mkdir -p "$(dirname "$cmp_bin")"
  cc -O2 -std=c11 -Wall -Wextra -Werror -o "$cmp_bin" "$cmp_src" -lm
fi

if [ -n "$keep" ]; then
  work="$keep"
  mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/hs-compare.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
chat_flag=()
((chat)) && chat_flag=(--chat)

# One prompt: tokenize, evaluate with both tools, append the comparison line to $work/$set.tsv.
# Timings (seconds) go to $work/$set.time as "heterospec oracle".
run_prompt() {
  local set="$1" idx="$2" text="$3"
  local base="$work/$set.$idx"
  local ids t0 t1 t2
  t0=$(date +%s.%N)
  if ((max_tokens)); then
    # Tokenize, cut, then evaluate the cut ids.
    ids="$("$hs" logits -m "$model" -f "$text" "${chat_flag[@]}" --print-tokens)"
    ids="$(tr ',' '\n' <<<"$ids" | head -n "$max_tokens" | paste -sd, -)"
    t0=$(date +%s.%N)
    "$hs" logits -m "$model" --kv-type "$kv" --tokens "$ids" -o "$base.hs.hslg"
  else
    # One run tokenizes, prints the ids and evaluates them.
    ids="$("$hs" logits -m "$model" --kv-type "$kv" -f "$text" "${chat_flag[@]}" --print-tokens -o "$base.hs.hslg")"
  fi
  echo "$ids" >"$base.ids"
  t1=$(date +%s.%N)
  "$oracle" "${oracle_flags[@]}" --tokens "$ids" -o "$base.ref.hslg" "$ref_model" >/dev/null 2>"$base.ref.log" ||
    { cat "$base.ref.log" >&2; exit 1; }
  t2=$(date +%s.%N)
  "$cmp_bin" --tsv "$base.ref.hslg" "$base.hs.hslg" >>"$work/$set.tsv"
  awk -v a="$t0" -v b="$t1" -v c="$t2" 'BEGIN { printf "%.3f %.3f\n", b - a, c - b }' >>"$work/$set.time"
  [ -n "$keep" ] || rm -f "$base.hs.hslg" "$base.ref.hslg"
}

sets=()
for q in "$data"/*/question.jsonl; do
  [ -f "$q" ] || continue
  set="$(basename "$(dirname "$q")")"
  sets+=("$set")
  : >"$work/$set.tsv"
  : >"$work/$set.time"
  for ((i = 1; i <= per_set; i++)); do
    line="$(sed -n "${i}p" "$q")"
    [ -n "$line" ] || break
    if ! jq -e -j '.turns[0] | strings' <<<"$line" >"$work/prompt.txt"; then
      echo "compare_logits: $q line $i has no string turns[0]" >&2
      exit 1
    fi
    run_prompt "$set" "$i" "$work/prompt.txt"
  done
  echo "compare_logits: $set done ($(wc -l <"$work/$set.tsv") prompts)" >&2
done
((${#sets[@]})) || { echo "compare_logits: no */question.jsonl under $data" >&2; exit 1; }

# Columns of a .tsv line: rows agree max_dp sum_kl max_kl max_dlogit max_margin.
summarize='
  { rows += $1; agree += $2; kl += $4; n++
    if ($3 > dp) dp = $3; if ($5 > mkl) mkl = $5; if ($6 > dl) dl = $6; if ($7 > mm) mm = $7 }
  END { printf "| %s | %d | %d | %.2f%% | %.3e | %.3e | %.3e | %.3e | %.3f |\n",
               name, n, rows, rows ? 100 * agree / rows : 100, dp, rows ? kl / rows : 0, mkl, dl, mm }'
timing='{ h += $1; o += $2 } END { printf "%.1f %.1f\n", h, o }'
echo
echo "Model: $(basename "$model"), $( ((chat)) && echo "chat template" || echo "plain prompts"), first $per_set prompts per set$( ((max_tokens)) && echo ", at most $max_tokens tokens each")."
device="$("$hs" devices 2>/dev/null | sed -n '1s/^[^=]*= \([^|]*\) ([^)|]*) |.*/\1/p')"
echo "Reference: llama.cpp (hs-oracle), $ref_desc, f32 KV cache, no flash attention. Test: heterospec on ${device:-its default device} (first listed), one batch per 512 tokens."
echo "p, q: softmax of llama.cpp's and heterospec's logits; KL(p || q) in nats per position."
echo
echo "| set | prompts | positions | top-1 agree | max \|p - q\| | mean KL | max KL | max \|logit diff\| | max mismatch margin |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
for set in "${sets[@]}"; do
  awk -v name="$set" "$summarize" "$work/$set.tsv"
done
all=()
for set in "${sets[@]}"; do all+=("$work/$set.tsv"); done
cat "${all[@]}" | awk -v name="**all**" "$summarize"
times=()
for set in "${sets[@]}"; do times+=("$work/$set.time"); done
read -r th to < <(cat "${times[@]}" | awk "$timing")
echo
echo "Wall time (load + evaluation): heterospec ${th} s, hs-oracle ${to} s; load average $(cut -d' ' -f1-3 /proc/loadavg)."
