#!/usr/bin/env bash
# The next SmolLM2 head, from the committed answers: features, then training that continues from the
# committed head. Every step resumes from what is on disk (rerun the same command after a stop); the
# progress is in $OUT/feats/gen.log and $OUT/run/train.log.
#
#   tools/hs_train/smollm2_next.sh [--minutes M] [extra train.py options]
#
#   answers   models/heads/smollm2/distill/answers-*.txt.xz (hs-oracle --distill, see the README there)
#   feats     $HS_HOME/distill/smollm2-llama/feats      (taps + target top 32, the JAX target)
#   train     $HS_HOME/heads/smollm2-next               (--init models/heads/smollm2/head.gguf)
#
# It builds heterospec (for the tokenizer) and the train venv when they are missing. Nothing here is
# timed: do not benchmark while it runs (two cores).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
home="${HS_HOME:-$HOME/.cache/heterospec}"
minutes=0
if [ "${1:-}" = "--minutes" ]; then
  minutes="$2"
  shift 2
fi
model="$home/models/SmolLM2-135M-Instruct.Q4_1.gguf"
[ -f "$model" ] || bash "$repo/tools/fetch_model.sh" >&2
hs="$repo/build/heterospec"
[ -x "$hs" ] || { cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$repo/build"; }
PY="$(bash "$repo/tools/pyenv.sh" train)"
out="$home/distill/smollm2-llama"
mkdir -p "$out"
answers="$(ls "$repo"/models/heads/smollm2/distill/answers-*.txt.xz | paste -sd, -)"
shared="${HS_SHARED:-$repo/../shared}"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR"
cd "$repo/tools"
# The prompts' ids as heterospec tokenizes them (the answers name prompts by line index; feats checks
# each prompt's length against the answer's).
[ -f "$out/jobs.txt" ] || "$PY" -m hs_train.distill jobs --model "$model" --hs "$hs" \
  --prompts "$shared/data/train/prompts.jsonl" --out "$out/jobs.txt"
"$PY" -m hs_train.distill feats --model "$model" --answers "$answers" --prompt-ids "$out/jobs.txt.prompt_ids.txt" \
  --out "$out/feats"
"$PY" -m hs_train.train --model "$model" --data "$out/feats" --out "$home/heads/smollm2-next" \
  --init "$repo/models/heads/smollm2/head.gguf" --seq 512 --batch 2 --ttt 5 --epochs 1 --lr 2e-4 \
  --ckpt-min 5 --minutes "$minutes" "$@"
