#!/usr/bin/env bash
# Checks hs-oracle against the independent stories260K references in
# ../shared/models/stories260K/ (numpy implementation of llama2.c's forward pass):
#   1. greedy ids for the prompts "" and "Once upon a time" equal golden_greedy.txt;
#   2. the logits after BOS match golden_logits_bos.txt, and the logits at the last
#      position of [1, 403, 407, 261, 378] match golden_logits_once_upon_a_time.txt,
#      within TOL (default 2e-5; llama.cpp's CPU backend is within about 1.05e-5);
#   3. the binary logits file (-o) holds the same numbers as --print-logits;
#   4. --distill (both prompts decoded together, CPU backend) answers each with a prefix of its golden ids,
#      ending at the end token or at --max-new;
#   5. --feats records hold each answer's tokens, the same taps when the two prompts decode together as
#      when each decodes alone (rows are not mixed up between sequences), and at every answer position
#      top-1 = the next token, probabilities in decreasing order;
#   6. --refeed writes the records of answers already given (one prefill each) equal to those --feats wrote
#      while answering (taps within the same tolerance, top-1 = the next token, probabilities within 1e-2),
#      and a rerun after a torn record completes the file without repeating a record;
#   7. --distill-temp 1 draws each job's answer from (--distill-seed, IDX) alone: the same answers with the
#      two prompts decoded together as each alone, other answers under another seed.
#
#   tools/oracle/verify.sh [--vulkan] [TOL]
#
# With --vulkan the oracle runs on the Vulkan backend (lavapipe here) instead of the CPU,
# and the logits are computed one position at a time (--ubatch 1): ggml-vulkan's kernels
# for several positions at once are less exact (about 6e-3 on stories260K, measured).
# Exits non-zero on any mismatch. Needs python3 and a built hs-oracle (build.sh).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
home="${HS_HOME:-$HOME/.cache/heterospec}"
oracle="$home/peer/bin/hs-oracle"
shared="${HS_SHARED_DIR:-$here/../../../shared}"
ref="$shared/models/stories260K"
model="$ref/stories260K.gguf"

backend=()
if [ "${1:-}" = "--vulkan" ]; then backend=(--vulkan --ubatch 1); shift; fi
tol="${1:-2e-5}"

[ -x "$oracle" ] || { echo "verify: $oracle not built (run tools/oracle/build.sh)" >&2; exit 1; }
[ -f "$model" ] || { echo "verify: $model not found (set HS_SHARED_DIR)" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$oracle" "${backend[@]}" -n 128 "$model" >"$work/gen_empty.txt"
"$oracle" "${backend[@]}" -n 124 -p "Once upon a time" "$model" >"$work/gen_once.txt"
"$oracle" "${backend[@]}" --print-logits -o "$work/bos.bin" "$model" >"$work/bos.txt"
"$oracle" "${backend[@]}" --print-logits --tokens 1,403,407,261,378 "$model" >"$work/once.txt"
printf '0\t1\n1\t1,403,407,261,378\n' >"$work/jobs.txt"
"$oracle" --distill "$work/jobs.txt" --answers "$work/answers.txt" --parallel 2 --max-new 100 --ctx 128 -t 1 \
  "$model" 2>/dev/null
"$oracle" --distill "$work/jobs.txt" --answers "$work/answers2.txt" --feats "$work/feats2.hsf" --parallel 2 \
  --max-new 100 --ctx 128 -t 1 "$model" 2>/dev/null
"$oracle" --distill "$work/jobs.txt" --answers "$work/answers1.txt" --feats "$work/feats1.hsf" --parallel 1 \
  --max-new 100 --ctx 128 -t 1 "$model" 2>/dev/null
# --refeed: the records of answers1.txt again, by one prefill each; the first run is cut after its first
# record (as by a kill, with a torn second record) and the rerun completes it
"$oracle" --distill "$work/jobs.txt" --answers "$work/answers1.txt" --feats "$work/refeed.hsf" --refeed \
  --ctx 128 -t 1 "$model" 2>/dev/null
python3 - "$work/refeed.hsf" <<'EOF2'
import struct, sys
data = open(sys.argv[1], "rb").read()
n, d3, k = struct.unpack_from("<iii", data, 20)
first = 32 + 4 * n + (n - 1) * (2 * d3 + 6 * k)
open(sys.argv[1], "wb").write(data[: first + 40])
EOF2
"$oracle" --distill "$work/jobs.txt" --answers "$work/answers1.txt" --feats "$work/refeed.hsf" --refeed \
  --ctx 128 -t 1 "$model" 2>/dev/null
for run in "s5p2 5 2" "s5p1 5 1" "s6p2 6 2"; do
  set -- $run
  "$oracle" --distill "$work/jobs.txt" --answers "$work/sampled-$1.txt" --distill-temp 1 --distill-seed "$2" \
    --parallel "$3" --max-new 100 --ctx 128 -t 1 "$model" 2>/dev/null
done

python3 - "$ref" "$work" "$tol" <<'EOF'
import ast, re, struct, sys
ref, work, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
ok = True

def check(name, cond, detail):
    global ok
    print(f"{'ok  ' if cond else 'FAIL'} {name}: {detail}")
    ok &= cond

# golden_greedy.txt: "PROMPT '...' prompt_tokens(with BOS) [...]" then "greedy_generated_ids [...]"
golden = {}
prompt = None
for line in open(f"{ref}/golden_greedy.txt"):
    m = re.match(r"PROMPT (.*) prompt_tokens\(with BOS\) (\[.*\])", line)
    if m:
        prompt = ast.literal_eval(m.group(1))
        golden[prompt] = {"prompt": ast.literal_eval(m.group(2))}
    elif line.startswith("greedy_generated_ids"):
        golden[prompt]["ids"] = ast.literal_eval(line.split(" ", 1)[1])

def oracle_out(path):
    out = {}
    for line in open(path):
        key, _, rest = line.partition(" ")
        if key in ("prompt_ids", "generated_ids"):
            out[key] = ast.literal_eval(rest)
    return out

for prompt, path in (("", "gen_empty.txt"), ("Once upon a time", "gen_once.txt")):
    g, o = golden[prompt], oracle_out(f"{work}/{path}")
    check(f"prompt ids {prompt!r}", o["prompt_ids"] == g["prompt"], f"{o['prompt_ids']}")
    n_same = next((i for i, (a, b) in enumerate(zip(o["generated_ids"], g["ids"])) if a != b),
                  min(len(o["generated_ids"]), len(g["ids"])))
    check(f"greedy ids {prompt!r}", o["generated_ids"] == g["ids"],
          f"{len(o['generated_ids'])} generated, {len(g['ids'])} golden, first {n_same} equal")

# --distill: line "IDX STOP N_PROMPT ids"; the answer continues the golden ids until the end token (2)
for line in open(f"{work}/answers.txt"):
    idx, stop, n_prompt, ids = line.rstrip("\n").split("\t")
    prompt = "" if idx == "0" else "Once upon a time"
    ids = [int(x) for x in ids.split(",")]
    g = golden[prompt]["ids"]
    want = g[: g.index(2) + 1] if 2 in g[:100] else g[:100]
    check(f"distill {prompt!r}", ids == want and int(stop) == (ids[-1] == 2) and int(n_prompt) == len(golden[prompt]["prompt"]),
          f"{len(ids)} ids (stop {stop}), golden prefix {len(want)}")

# --distill-temp: per job, the same draw whatever shares its batch; another seed, other draws
def answer_map(path):
    return {l.split("\t")[0]: l.rstrip("\n").split("\t")[3] for l in open(path)}
s52, s51, s62 = (answer_map(f"{work}/sampled-{r}.txt") for r in ("s5p2", "s5p1", "s6p2"))
check("sampled answers, batch-independent", len(s52) == 2 and s52 == s51, f"{len(s52)} answers, seed 5 with --parallel 2 and 1")
check("sampled answers, seeded", s62.keys() == s52.keys() and s62 != s52, "seed 6 against seed 5")

# --feats: HSF1 records (oracle.h)
TAPS_TOL = 1e-2
def hsf(path):
    data, o, out = open(path, "rb").read(), 0, {}
    while o < len(data):
        magic, idx, stop, n_prompt, n, d3, k = struct.unpack_from("<4sqiiiii", data, o)
        o += 32
        toks = list(struct.unpack_from(f"<{n}i", data, o)); o += 4 * n
        taps = struct.unpack_from(f"<{(n - 1) * d3}e", data, o); o += 2 * (n - 1) * d3
        top_id = struct.unpack_from(f"<{(n - 1) * k}i", data, o); o += 4 * (n - 1) * k
        top_p = struct.unpack_from(f"<{(n - 1) * k}e", data, o); o += 2 * (n - 1) * k
        out[idx] = dict(magic=magic, stop=stop, n_prompt=n_prompt, toks=toks, d3=d3, k=k, taps=taps, top_id=top_id,
                        top_p=top_p)
    return out

answers = {}
for line in open(f"{work}/answers2.txt"):
    idx, stop, n_prompt, ids = line.rstrip("\n").split("\t")
    answers[int(idx)] = (int(stop), int(n_prompt), [int(x) for x in ids.split(",")])
f2, f1 = hsf(f"{work}/feats2.hsf"), hsf(f"{work}/feats1.hsf")
check("feats records", sorted(f2) == sorted(answers) == sorted(f1), f"{sorted(f2)} {sorted(f1)}")
for idx, r in f2.items():
    stop, n_prompt, ans = answers[idx]
    n, k = len(r["toks"]), r["k"]
    # llama.cpp's products differ slightly with the batch's size: equal within TAPS_TOL of each row's
    # largest value, far below what rows of another position or sequence would give
    d3, t1 = r["d3"], f1[idx]["taps"]
    dev = max(max(abs(a - b) for a, b in zip(r["taps"][p * d3 : (p + 1) * d3], t1[p * d3 : (p + 1) * d3]))
              / max(1e-6, max(abs(a) for a in t1[p * d3 : (p + 1) * d3])) for p in range(n - 1))
    same = r["toks"] == f1[idx]["toks"] and dev <= TAPS_TOL
    top1 = all(r["top_id"][p * k] == r["toks"][p + 1] for p in range(n_prompt - 1, n - 1))
    desc = all(r["top_p"][p * k + j] >= r["top_p"][p * k + j + 1] for p in range(n_prompt - 1, n - 1) for j in range(k - 1))
    zero = all(x == 0 for x in r["top_p"][: (n_prompt - 1) * k])
    check(f"feats {idx}", r["magic"] == b"HSF1" and r["toks"][n_prompt:] == ans and r["stop"] == stop and
          r["n_prompt"] == n_prompt and same and top1 and desc and zero and r["d3"] % 3 == 0,
          f"{n} tokens, taps {r['d3']} wide, alone - batched {dev:.2g}, top-1 = next {top1}, decreasing {desc}, "
          f"prompt rows empty {zero}")

# --refeed: the same records as answering with --feats, one sequence at a time (taps within TAPS_TOL: the
# prefill's batch differs from the decoding steps'; top-1 is the next token where the answer is predicted)
fr = hsf(f"{work}/refeed.hsf")
check("refeed records", sorted(fr) == sorted(f1) and len(open(f"{work}/refeed.hsf", "rb").read()) ==
      len(open(f"{work}/feats1.hsf", "rb").read()), f"{sorted(fr)}")
for idx, r in fr.items():
    a, n, k, d3 = f1[idx], len(r["toks"]), r["k"], r["d3"]
    dev = max(max(abs(x - y) for x, y in zip(r["taps"][p * d3 : (p + 1) * d3], a["taps"][p * d3 : (p + 1) * d3]))
              / max(1e-6, max(abs(x) for x in a["taps"][p * d3 : (p + 1) * d3])) for p in range(n - 1))
    top1 = all(r["top_id"][p * k] == r["toks"][p + 1] for p in range(r["n_prompt"] - 1, n - 1))
    pdev = max(abs(x - y) for x, y in zip(r["top_p"], a["top_p"]))
    check(f"refeed {idx}", r["toks"] == a["toks"] and r["stop"] == a["stop"] and r["n_prompt"] == a["n_prompt"]
          and dev <= TAPS_TOL and top1 and pdev <= 1e-2,
          f"{n} tokens, refed - answered taps {dev:.2g}, top-1 = next {top1}, max |p diff| {pdev:.2g}")

def floats(path):
    return [float(x) for x in open(path).read().split("\n") if x and not x[0].isalpha()]

for gold, got in (("golden_logits_bos.txt", "bos.txt"),
                  ("golden_logits_once_upon_a_time.txt", "once.txt")):
    a, b = floats(f"{ref}/{gold}"), floats(f"{work}/{got}")
    if len(a) != len(b):
        check(gold, False, f"{len(b)} logits, expected {len(a)}")
        continue
    err = max(abs(x - y) for x, y in zip(a, b))
    check(gold, err <= tol, f"max |diff| {err:.3g} (tol {tol:g})")

# binary file: magic, version, n_vocab, n_rows, tokens, rows
data = open(f"{work}/bos.bin", "rb").read()
magic, ver, n_vocab, n_rows = struct.unpack_from("<4sIII", data)
toks = struct.unpack_from(f"<{n_rows}i", data, 16)
rows = struct.unpack_from(f"<{n_rows * n_vocab}f", data, 16 + 4 * n_rows)
size_ok = len(data) == 16 + 4 * n_rows + 4 * n_rows * n_vocab
same = size_ok and all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in zip(rows[-n_vocab:], floats(f"{work}/bos.txt")))
check("logits file", magic == b"HSLG" and ver == 1 and n_rows == 1 and toks == (1,) and same,
      f"magic {magic!r} version {ver} n_vocab {n_vocab} rows {n_rows} tokens {list(toks)} size ok {size_ok}")
sys.exit(0 if ok else 1)
EOF
