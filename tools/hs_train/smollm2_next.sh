#!/usr/bin/env bash
# The next SmolLM2 head: more answers, then features and training that continues from the committed head.
# Each step resumes from what is on disk (rerun the same command after a stop). Nothing here is timed: do
# not benchmark while it runs (two cores).
#
#   tools/hs_train/smollm2_next.sh gen MINUTES     answers to further prompts of the training order, with
#                                                  hs-oracle --distill, into $OUT/answers.txt (seeded with the
#                                                  committed answers, so it starts at the first unanswered prompt)
#   tools/hs_train/smollm2_next.sh pack            the answers not committed yet -> models/heads/smollm2/distill/
#                                                  answers-NN.txt.xz (then commit it, with its line in the README)
#   tools/hs_train/smollm2_next.sh train [--minutes M] [train.py options]
#                                                  features of the committed answers (all, or the files named
#                                                  in $ANSWERS, comma-separated), then training from
#                                                  models/heads/smollm2/head.gguf into $HS_HOME/heads/smollm2-next
#
# answers-00 answers the prompts the committed head was trained on; continuing that head, ANSWERS can leave it
# out. Measured on the 2-core machine: gen about 190 answer tokens/s, feats about 380 tokens/s (prompt and
# answer), training about 360 rows/s.
#
# $OUT = $HS_HOME/distill/smollm2-llama. Progress: $OUT/gen.log, $OUT/feats/gen.log,
# $HS_HOME/heads/smollm2-next/train.log. Builds heterospec (for the tokenizer), hs-oracle and the train venv
# when they are missing.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
home="${HS_HOME:-$HOME/.cache/heterospec}"
dist="$repo/models/heads/smollm2/distill"
out="$home/distill/smollm2-llama"
model="$home/models/SmolLM2-135M-Instruct.Q4_1.gguf"
shared="${HS_SHARED:-$repo/../shared}"
step="${1:?usage: smollm2_next.sh gen MINUTES | pack | train [--minutes M] [train.py options]}"
shift

[ -f "$model" ] || bash "$repo/tools/fetch_model.sh" >&2
hs="$repo/build/heterospec"
[ -x "$hs" ] || { cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$repo/build"; }
PY="$(bash "$repo/tools/pyenv.sh" train)"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" "$out"
committed() { ls "$dist"/answers-*.txt.xz 2>/dev/null; }
# The prompts' ids as heterospec tokenizes them, in the order gen uses (prompts of 1..256 tokens).
[ -f "$out/jobs.txt" ] || (cd "$repo/tools" && "$PY" -m hs_train.distill jobs --model "$model" --hs "$hs" \
  --prompts "$shared/data/train/prompts.jsonl" --out "$out/jobs.txt")

case "$step" in
gen)
  minutes="${1:?smollm2_next.sh gen MINUTES}"
  oracle="$home/peer/bin/hs-oracle"
  [ -x "$oracle" ] || bash "$repo/tools/oracle/build.sh" >&2
  # Seed the answers file with the committed answers (hs-oracle skips every prompt already in it).
  if [ ! -s "$out/answers.txt" ]; then
    for f in $(committed); do xz -dc "$f"; done >"$out/answers.txt"
  fi
  "$oracle" --distill "$out/jobs.txt" --answers "$out/answers.txt" --parallel 128 -t 2 --minutes "$minutes" \
    "$model" 2>&1 | tee -a "$out/gen.log"
  ;;
pack)
  # Complete lines of answers.txt past those of the committed files, as the next file.
  n_old=0
  for f in $(committed); do n_old=$((n_old + $(xz -dc "$f" | wc -l))); done
  n_files=$(committed | wc -l)
  next="$dist/answers-$(printf '%02d' "$n_files").txt.xz"
  tail -n +$((n_old + 1)) "$out/answers.txt" | grep -P '^\d+\t[01]\t\d+\t[\d,]*\d$' | xz -9 >"$next"
  echo "pack: $(xz -dc "$next" | wc -l) answers -> $next ($(sha256sum "$next" | cut -d' ' -f1))"
  ;;
train)
  minutes=0
  if [ "${1:-}" = "--minutes" ]; then
    minutes="$2"
    shift 2
  fi
  answers="${ANSWERS:-$(committed | paste -sd, -)}"
  cd "$repo/tools"
  "$PY" -m hs_train.distill feats --model "$model" --answers "$answers" --prompt-ids "$out/jobs.txt.prompt_ids.txt" \
    --out "$out/feats"
  "$PY" -m hs_train.train --model "$model" --data "$out/feats" --out "$home/heads/smollm2-next" \
    --init "$repo/models/heads/smollm2/head.gguf" --seq 512 --batch 2 --ttt 5 --epochs 1 --lr 2e-4 \
    --ckpt-min 5 --minutes "$minutes" "$@"
  ;;
*)
  echo "smollm2_next.sh: unknown step '$step' (gen, pack or train)" >&2
  exit 2
  ;;
esac
