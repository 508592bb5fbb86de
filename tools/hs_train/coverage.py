"""Draft-vocabulary coverage of generated text: the share of tokens a head can
ever propose (a target token outside the draft vocabulary is never drafted, so
it caps acceptance wherever it appears).

  python -m hs_train.coverage --head ../models/heads/NAME [--model MODEL.gguf] [--top 20] OUT.json ...

Each OUT.json is `heterospec generate --json` output (its "ids" are the
generated tokens). Files are grouped by their name up to the last '_' (for
example mt_bench_3.json and mt_bench_4.json make one group "mt_bench"); per
group it prints tokens, coverage and, with --model (for the token strings), the
most frequent tokens outside the vocabulary.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys

import numpy as np


def draft_targets(head_dir):
    """The target ids of a head's draft vocabulary (draft id d is target id d + d2t[d])."""
    from hs_train.train import head_ids

    return set(head_ids(np.load(os.path.join(head_dir, "d2t.npy"))).tolist())


def group_of(path):
    name = os.path.splitext(os.path.basename(path))[0]
    return name.rsplit("_", 1)[0] if "_" in name else name


def tally(files, vocab):
    """Per group: [tokens, tokens in the vocabulary, Counter of the tokens outside it]."""
    groups = collections.OrderedDict()
    for f in files:
        try:
            with open(f) as fh:
                ids = json.load(fh)["ids"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"coverage: {f}: not heterospec generate --json output with \"ids\" ({e!r})")
        g = groups.setdefault(group_of(f), [0, 0, collections.Counter()])
        for i in ids:
            g[0] += 1
            if i in vocab:
                g[1] += 1
            else:
                g[2][i] += 1
    return groups


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True, help="head folder holding d2t.npy")
    ap.add_argument("--model", help="target GGUF, to print the missing tokens as strings")
    ap.add_argument("--top", type=int, default=20, help="missing tokens shown per group")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    vocab = draft_targets(a.head)
    strings = None
    if a.model:
        from gguf import GGUFReader

        f = GGUFReader(a.model).fields["tokenizer.ggml.tokens"]
        strings = [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]
    groups = tally(a.files, vocab)
    n_all = sum(g[0] for g in groups.values())
    if n_all == 0:
        sys.exit("coverage: the files hold no generated tokens")
    print(f"draft vocabulary: {len(vocab)} target tokens ({a.head})")
    print("| group | tokens | in the draft vocabulary |")
    print("| --- | ---: | ---: |")
    for name, (n, hit, _) in groups.items():
        print(f"| {name} | {n} | {100.0 * hit / max(n, 1):.1f} % |")
    print(f"| all | {n_all} | {100.0 * sum(g[1] for g in groups.values()) / n_all:.1f} % |")
    if strings is not None and a.top > 0:
        for name, (_, _, miss) in groups.items():
            shown = ", ".join(f"{strings[i]!r} x{c}" for i, c in miss.most_common(a.top))
            print(f"{name}: {shown}")


if __name__ == "__main__":
    main()
