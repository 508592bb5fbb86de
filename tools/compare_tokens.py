#!/usr/bin/env python3
"""Compares heterospec's tokenizer with llama.cpp's on every benchmark prompt.

For every turn of every question in <shared>/data/bench/*/question.jsonl, runs
`heterospec tokenize -m MODEL -p TEXT` and `hs-oracle --tokenize -p TEXT MODEL`
(llama.cpp's llama_tokenize with add_special, without parse_special) and
counts the prompts whose ids differ. Standard library only.

  tools/compare_tokens.py [--model FILE] [--heterospec BIN] [--oracle BIN] [--shared DIR]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
home = os.environ.get("HS_HOME", os.path.expanduser("~/.cache/heterospec"))
ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("--model", default=os.path.join(home, "models/SmolLM2-135M-Instruct.Q4_1.gguf"))
ap.add_argument("--heterospec", default=os.path.join(here, "build/heterospec"))
ap.add_argument("--oracle", default=os.path.join(home, "peer/bin/hs-oracle"))
ap.add_argument("--shared", default=os.path.join(here, "../shared"))
args = ap.parse_args()

for path, what in ((args.model, "model (tools/fetch_model.sh)"), (args.heterospec, "heterospec (tools/setup.sh)"),
                   (args.oracle, "hs-oracle (tools/oracle/build.sh)")):
    if not os.path.exists(path):
        sys.exit(f"compare_tokens: {what} not found at {path}")


def ids(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"compare_tokens: {' '.join(cmd[:3])} failed: {out.stderr.strip()}")
    return out.stdout.strip().splitlines()[-1].strip()


total = bad = 0
print("| set | prompts | equal |\n| --- | ---: | ---: |")
for f in sorted(glob.glob(os.path.join(args.shared, "data/bench/*/question.jsonl"))):
    name = os.path.basename(os.path.dirname(f))
    n = same = 0
    with open(f, encoding="utf-8") as fh:
        for line in fh:
            for text in json.loads(line).get("turns", []):
                a = ids([args.heterospec, "tokenize", "-m", args.model, "-p", text])
                b = ids([args.oracle, "--tokenize", "-p", text, args.model])
                b = b[b.find("[") + 1:b.rfind("]")].replace(" ", "")  # "prompt_ids [1, 2]"
                n += 1
                if a == b:
                    same += 1
                elif bad < 5:
                    print(f"<!-- differs in {name}: {text[:60]!r}\n  heterospec {a[:120]}\n  llama.cpp  {b[:120]} -->")
    total += n
    bad += n - same
    print(f"| {name} | {n} | {same} |")
print(f"| all | {total} | {total - bad} |")
sys.exit(1 if bad else 0)
