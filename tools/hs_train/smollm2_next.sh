#!/usr/bin/env bash
# The next SmolLM2 head: more answers, then features and training that continues from the committed head.
# Each step resumes from what is on disk (rerun the same command after a stop). Nothing here is timed: do
# not benchmark while it runs (two cores).
#
#   tools/hs_train/smollm2_next.sh gen MINUTES     answers to further prompts of the training order, with
#                                                  hs-oracle --distill, into $OUT/answers.txt (seeded with the
#                                                  committed answers, so it starts at the first unanswered
#                                                  prompt), and their features into $OUT/feats.hsf (--feats;
#                                                  about 3.5 KB per token, kept in the cache only)
#   tools/hs_train/smollm2_next.sh gen-long MINUTES
#                                                  the same for the prompts of 257..640 tokens (mostly news
#                                                  articles to summarise, which the short ones leave out), in
#                                                  $OUT/answers-long.txt with a KV cache of 1024 per sequence
#   tools/hs_train/smollm2_next.sh gen-open MINUTES
#                                                  the same for the short prompts of the open-ended sources
#                                                  ($OPEN_SOURCES: role-play, assistant, QA and self-instruct
#                                                  prompts, on which the head accepts least) not answered yet,
#                                                  in $OUT/answers-open.txt
#   tools/hs_train/smollm2_next.sh gen-t1 MINUTES
#                                                  sampled answers (temperature 1 with generate's top-k 40,
#                                                  top-p 0.95, min-p 0.05; hs-oracle --distill-temp 1
#                                                  --distill-seed 1, each job's draw fixed by its IDX) to the
#                                                  short prompts, every one of which already has a greedy
#                                                  answer: new paths through the target's distribution, in
#                                                  $OUT/answers-t1.txt, without features (train refeeds them)
#   tools/hs_train/smollm2_next.sh pack            the answers not committed yet -> models/heads/smollm2/distill/
#                                                  answers-NN.txt.xz, answers-long-NN.txt.xz,
#                                                  answers-open-NN.txt.xz and answers-t1-NN.txt.xz (then
#                                                  commit them, with their lines in the README)
#   tools/hs_train/smollm2_next.sh train [--minutes M] [train.py options]
#                                                  features of the committed answers (all, or the files named
#                                                  in $ANSWERS, comma-separated: hs-oracle's, recorded by gen or
#                                                  by --refeed into $OUT/feats-refeed.hsf), and of the sampled
#                                                  answers (gen-t1: all committed answers-t1-NN, or the files in
#                                                  $T1_ANSWERS; none: without them), then training from
#                                                  models/heads/smollm2/head.gguf into $HS_HOME/heads/smollm2-next
#   tools/hs_train/smollm2_next.sh eval [ckpt|base] [train.py options]
#                                                  the held-out evaluation (top-1 per draft step, chain tau) on
#                                                  the features train packed: of a copy of the running training's
#                                                  latest checkpoint (ckpt, the default; the head exported beside
#                                                  it in $HS_HOME/heads-eval/smollm2-next) or of the committed
#                                                  head (base, in $HS_HOME/heads-eval/smollm2-base), so a run can
#                                                  be judged against its start while it trains; not under
#                                                  $HS_HOME/heads, where generate looks for a head first
#
# The committed head has been trained on all committed answers (models/heads/smollm2/MANIFEST.json, its lineage);
# the first head only on the prompts of answers-00, which is why 3a89119's continuation left that file out. Measured on the 2-core machine: gen about 190 answer tokens/s, feats about 380 tokens/s (prompt and
# answer), training about 500 rows/s (320-370 before the loss-row tables of 2026-11-29).
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
step="${1:?usage: smollm2_next.sh gen MINUTES | gen-long MINUTES | gen-open MINUTES | gen-t1 MINUTES | pack | train [--minutes M] [train.py options] | eval [ckpt|base]}"
shift

[ -f "$model" ] || bash "$repo/tools/fetch_model.sh" >&2
hs="$repo/build/heterospec"
[ -x "$hs" ] || { cmake -S "$repo" -B "$repo/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build "$repo/build"; }
PY="$(bash "$repo/tools/pyenv.sh" train)"
# The hs_train package from tools/ (train and eval run from the caller's folder, so paths in $ANSWERS and the
# train.py options stay as given).
export PYTHONPATH="$repo/tools${PYTHONPATH:+:$PYTHONPATH}"
# The head train continues and eval base scores, and the row shape both give train.py.
head0="$repo/models/heads/smollm2/head.gguf"
shape=(--seq 512 --batch 2 --ttt 5)
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp/runtime-$(id -u)}"
mkdir -p "$XDG_RUNTIME_DIR" "$out"
# committed KIND: the committed answer files of the short (""), long ("-long") or open-ended short ("-open")
# prompts, in order.
committed() { ls "$dist"/answers"$1"-[0-9]*.txt.xz 2>/dev/null || true; }
# The prompts' ids as heterospec tokenizes them, in the order gen uses (prompts of 1..256 tokens).
[ -f "$out/jobs.txt" ] || (cd "$repo/tools" && "$PY" -m hs_train.distill jobs --model "$model" --hs "$hs" \
  --prompts "$shared/data/train/prompts.jsonl" --out "$out/jobs.txt")
# The long prompts (257..640 tokens), in the same order; the tokenization is the same file.
if [ ! -f "$out/jobs-long.txt" ]; then
  cp "$out/jobs.txt.prompt_ids.txt" "$out/jobs-long.txt.prompt_ids.txt"
  (cd "$repo/tools" && "$PY" -m hs_train.distill jobs --model "$model" --hs "$hs" --min-prompt 257 \
    --max-prompt 640 --prompts "$shared/data/train/prompts.jsonl" --out "$out/jobs-long.txt")
fi

# seeds KIND: the committed files whose answers start $out/answers KIND.txt (hs-oracle skips every prompt
# already in it) and that pack leaves out: those of KIND, and for the short and the open-ended kinds the
# other's too (the open-ended prompts are short prompts: gen would answer them again, gen-open may have).
seeds() {
  committed "$1"
  case "$1" in
  "") committed -open ;;
  -open) committed "" ;;
  esac
}

# gen_answers KIND MINUTES [hs-oracle options]: answers to the jobs of KIND not in $out/answers KIND.txt,
# with their features ($out/feats KIND.hsf) unless $NO_FEATS is set.
gen_answers() {
  local kind="$1" minutes="$2" oracle="$home/peer/bin/hs-oracle" fopt=()
  shift 2
  [ -n "${NO_FEATS:-}" ] || fopt=(--feats "$out/feats$kind.hsf")
  [ -x "$oracle" ] || bash "$repo/tools/oracle/build.sh" >&2
  if [ ! -s "$out/answers$kind.txt" ]; then
    for f in $(seeds "$kind"); do xz -dc "$f"; done >"$out/answers$kind.txt"
  fi
  "$oracle" --distill "$out/jobs$kind.txt" --answers "$out/answers$kind.txt" "${fopt[@]}" \
    --parallel 128 -t 2 --minutes "$minutes" "$@" "$model" 2>&1 | tee -a "$out/gen$kind.log"
}

# The open-ended sources gen-open answers.
OPEN_SOURCES="${OPEN_SOURCES:-gpteacher_roleplay,oasst_1k,oasst_prompt_lottery_en_250_text,oasst_en_100_text,t0_hotpotqa,t0_adversarial_qa,selfinstruct_user_oriented_instructions,selfinstruct_seed_tasks}"

# complete_answers [FILE]: the answer lines that are whole (a line cut by a kill is left out).
complete_answers() { grep -P '^\d+\t[01]\t\d+\t[\d,]*\d$' "$@"; }

# pack_answers KIND: the complete lines of $out/answers KIND.txt whose prompt no seed file answers, once
# each, as the next answers KIND-NN file.
pack_answers() {
  local kind="$1" next
  [ -s "$out/answers$kind.txt" ] || return 0
  next="$dist/answers$kind-$(printf '%02d' "$(committed "$kind" | wc -l)").txt.xz"
  for f in $(seeds "$kind"); do xz -dc "$f"; done | cut -f1 >"$out/pack-seen.txt"
  complete_answers "$out/answers$kind.txt" |
    awk -F'\t' 'FILENAME == ARGV[1] { seen[$1] = 1; next } !($1 in seen) && !done[$1]++' "$out/pack-seen.txt" - \
      >"$out/pack-new.txt"
  if [ ! -s "$out/pack-new.txt" ]; then
    echo "pack: no new answers in $out/answers$kind.txt"
    return 0
  fi
  xz -9 <"$out/pack-new.txt" >"$next"
  echo "pack: $(xz -dc "$next" | wc -l) answers -> $next ($(sha256sum "$next" | cut -d' ' -f1))"
}

# shards ANSWERS FEATS REFEED DIR KIND: the shards in DIR of the sequences of ANSWERS (comma-separated files)
# that have a record in FEATS (comma-separated files); the rest are refed into REFEED first (hs-oracle
# --refeed: one llama.cpp prefill per sequence, resumable; jobs by index), their list in
# $out/answers KIND-missing.txt and the log in $out/refeed KIND.log.
shards() {
  local answers="$1" feats="$2" refeed="$3" dir="$4" kind="$5" oracle="$home/peer/bin/hs-oracle"
  local missing="$out/answers$kind-missing.txt"
  "$PY" -m hs_train.distill pack-feats --answers "$answers" --feats "$feats" --out "$dir" --missing "$missing"
  [ -s "$missing" ] || return 0
  [ -x "$oracle" ] || bash "$repo/tools/oracle/build.sh" >&2
  [ -f "$out/jobs-all.txt" ] || awk '{ print NR - 1 "\t" $0 }' "$out/jobs.txt.prompt_ids.txt" >"$out/jobs-all.txt"
  "$oracle" --distill "$out/jobs-all.txt" --answers "$missing" --feats "$refeed" --refeed --ctx 1024 -t 2 \
    "$model" 2>&1 | tee -a "$out/refeed$kind.log"
  "$PY" -m hs_train.distill pack-feats --answers "$answers" --feats "$refeed" --out "$dir"
}

case "$step" in
gen)
  gen_answers "" "${1:?smollm2_next.sh gen MINUTES}"
  ;;
gen-long)
  # 640 prompt tokens + 256 answer tokens fit a cache of 1024 rows per sequence.
  gen_answers -long "${1:?smollm2_next.sh gen-long MINUTES}" --ctx 1024
  ;;
gen-open)
  if [ ! -f "$out/jobs-open.txt" ]; then
    cp "$out/jobs.txt.prompt_ids.txt" "$out/jobs-open.txt.prompt_ids.txt"
    (cd "$repo/tools" && "$PY" -m hs_train.distill jobs --model "$model" --hs "$hs" --sources "$OPEN_SOURCES" \
      --prompts "$shared/data/train/prompts.jsonl" --out "$out/jobs-open.txt")
  fi
  gen_answers -open "${1:?smollm2_next.sh gen-open MINUTES}"
  ;;
gen-t1)
  # The short prompts' jobs again; hs-oracle's sampler draws each answer from (seed 1, IDX). Features come
  # from train's refeed (a prefill at about 1,000 tokens/s) instead of gen (--feats: about 190 answer tokens/s
  # against about 450 without).
  if [ ! -f "$out/jobs-t1.txt" ]; then
    cp "$out/jobs.txt" "$out/jobs-t1.txt"
    cp "$out/jobs.txt.prompt_ids.txt" "$out/jobs-t1.txt.prompt_ids.txt"
  fi
  NO_FEATS=1 gen_answers -t1 "${1:?smollm2_next.sh gen-t1 MINUTES}" --distill-temp 1 --distill-seed 1
  ;;
pack)
  pack_answers ""
  pack_answers -long
  pack_answers -open
  pack_answers -t1
  ;;
train)
  minutes=0
  if [ "${1:-}" = "--minutes" ]; then
    minutes="$2"
    shift 2
  fi
  answers="${ANSWERS:-$( (committed ""; committed -long; committed -open) | paste -sd, -)}"
  answers="$(tr , '\n' <<<"$answers" | xargs realpath | paste -sd, -)"
  # Sequences whose features hs-oracle recorded while answering (gen --feats) or refed go to the shards first;
  # the answers left without them are refed (hs-oracle --refeed: one llama.cpp prefill per sequence, about 615
  # tokens/s on the 2-core VM against about 380 for the JAX target's `distill feats`; resumable; all jobs by
  # index), then the JAX target computes any still left (none once the refeed is complete).
  feats_all="$out/feats.hsf,$out/feats-long.hsf,$out/feats-open.hsf,$out/feats-refeed.hsf"
  shards "$answers" "$feats_all" "$out/feats-refeed.hsf" "$out/feats" ""
  "$PY" -m hs_train.distill feats --model "$model" --answers "$answers" --prompt-ids "$out/jobs.txt.prompt_ids.txt" \
    --out "$out/feats"
  data="$out/feats"
  # The sampled answers (gen-t1) share their prompts' IDX with the greedy ones, so their features have a file
  # and shards of their own ($out/feats-t1.hsf, $out/feats-t1), refed the same way.
  t1="${T1_ANSWERS:-$(committed -t1 | paste -sd, -)}"
  [ "$t1" = none ] && t1=""
  if [ -n "$t1" ]; then
    t1="$(tr , '\n' <<<"$t1" | xargs realpath | paste -sd, -)"
    shards "$t1" "$out/feats-t1.hsf" "$out/feats-t1.hsf" "$out/feats-t1" -t1
    data="$data,$out/feats-t1"
  fi
  "$PY" -m hs_train.train --model "$model" --data "$data" --out "$home/heads/smollm2-next" \
    --init "$head0" "${shape[@]}" --epochs 1 --lr 2e-4 \
    --ckpt-min 5 --minutes "$minutes" "$@"
  ;;
eval)
  which="${1:-ckpt}"
  [ $# -gt 0 ] && shift
  [ -d "$out/feats" ] || { echo "smollm2_next.sh eval: no features in $out/feats yet (run train first)" >&2; exit 1; }
  case "$which" in
  ckpt)
    run="$home/heads/smollm2-next"
    [ -f "$run/ckpt.pkl" ] || { echo "smollm2_next.sh eval: no checkpoint in $run yet" >&2; exit 1; }
    dir="$home/heads-eval/smollm2-next"
    mkdir -p "$dir"
    cp "$run/ckpt.pkl" "$dir/ckpt.pkl"
    "$PY" -m hs_train.train --model "$model" --data "$out/feats" --out "$dir" --eval-only "$@"
    ;;
  base)
    dir="$home/heads-eval/smollm2-base"
    rm -f "$dir/ckpt.pkl"
    "$PY" -m hs_train.train --model "$model" --data "$out/feats" --out "$dir" --init "$head0" "${shape[@]}" \
      --eval-only "$@"
    ;;
  *)
    echo "smollm2_next.sh eval: expected ckpt or base, not '$which'" >&2
    exit 2
    ;;
  esac
  echo "eval: $dir/eval.json"
  ;;
*)
  echo "smollm2_next.sh: unknown step '$step' (gen, gen-long, gen-open, gen-t1, pack, train or eval)" >&2
  exit 2
  ;;
esac
