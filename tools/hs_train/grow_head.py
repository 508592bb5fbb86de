"""Grows a head's draft vocabulary without training: its lm_head columns stay, and each added token's column is
the target's output row of that token mapped by the linear map that best takes the target's rows of the head's
own tokens to its trained columns (least squares; train.remap_vocab, the same start an --init run with a larger
--draft-vocab gets). The added tokens are the most frequent answer tokens of the given answer files that the
head lacks.

  python -m hs_train.grow_head --head HEAD.gguf --model TARGET.gguf --draft-vocab N --out DIR \\
      [--dtype f16|q8_0] ANSWERS.txt.xz ...

ANSWERS are answer files as tools/hs_train/smollm2_next.sh writes them (lines IDX<TAB>STOP<TAB>N_PROMPT<TAB>ids;
.xz or plain); never benchmark data. DIR gets the head as train.py exports one (head.gguf, model.safetensors,
config.json, d2t.npy) and grow.json (what was done, the map's fit).

Why it works: on the committed SmolLM2 head the map explains the head's columns from the target's rows with
R^2 0.95 (0.92, mean cosine 0.986, on its 2,192 rarest tokens when fitted on the other 6,000).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np


def answer_counts_files(paths, n_vocab):
    """Occurrences of each target id among the answer tokens of answer files (each read on its own, so a
    sampled answer to a prompt another file answers greedily counts too)."""
    from hs_train.distill import read_answers

    counts = np.zeros(n_vocab, np.int64)
    for path in paths:
        if "/data/bench" in os.path.abspath(path):
            sys.exit(f"grow_head: refusing benchmark data {path}")
        for s in read_answers(path):
            ids = np.asarray(s["answer"], np.int64)
            if ids.size and not (0 <= ids.min() and ids.max() < n_vocab):
                sys.exit(f"grow_head: {path}: a token id outside the target's vocabulary of {n_vocab}")
            np.add.at(counts, ids, 1)
    return counts


def map_fit(cols, ids, out, holdout):
    """R^2 and mean cosine, on the last `holdout` of a head's lm_head columns `cols` (of target ids `ids`), of
    the least-squares map from the target's output rows of those ids to the columns, fitted on the others."""
    from hs_train.train import lstsq_map

    x, y = out[:, ids].astype(np.float64), cols.astype(np.float64)
    fit, test = np.arange(len(ids) - holdout), np.arange(len(ids) - holdout, len(ids))
    pred, yt = lstsq_map(x[:, fit], y[:, fit]) @ x[:, test], y[:, test]
    r2 = 1 - ((yt - pred) ** 2).sum() / ((yt - yt.mean(1, keepdims=True)) ** 2).sum()
    cos = ((pred * yt).sum(0) / np.linalg.norm(pred, axis=0) / np.linalg.norm(yt, axis=0)).mean()
    return float(r2), float(cos)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--head", required=True)
    ap.add_argument("--model", required=True, help="the target GGUF")
    ap.add_argument("--draft-vocab", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=("f16", "q8_0"), default="q8_0", help="head.gguf's matrices")
    ap.add_argument("answers", nargs="+")
    a = ap.parse_args(argv)

    from hs_train import target, train

    tcfg, tparams = target.load(a.model)
    params, d2t = train.params_from_head(a.head, tcfg)
    if a.draft_vocab <= len(d2t):
        sys.exit(f"grow_head: --draft-vocab {a.draft_vocab} is not above the head's {len(d2t)}")
    counts = answer_counts_files(a.answers, tcfg.n_vocab)
    old = train.head_ids(d2t)
    out = np.asarray(tparams["output"], np.float32)  # [dim][vocab]
    # the map's fit on the head's rarest tokens (the ones most like those it gains), fitted on the others
    by_freq = np.argsort(-counts[old], kind="stable")
    r2, cos = map_fit(params["lm_head"][:, by_freq], old[by_freq], out, len(old) // 4)
    ids = train.grown_ids(d2t, counts, a.draft_vocab)
    extra = ids[len(old):]
    if len(ids) < a.draft_vocab:
        sys.exit(f"grow_head: the answers hold only {len(extra)} tokens the head lacks, "
                 f"{a.draft_vocab - len(old)} asked")
    p, d2t2, t2d = train.remap_vocab(params, d2t, ids, tparams, tcfg.n_vocab)
    os.makedirs(a.out, exist_ok=True)
    import eagle3_gguf  # on the path since params_from_head; the grown head keeps the rows it was trained on

    rows = eagle3_gguf.read_eagle3_config(a.head)["train_row_length"]
    path = train.export(a.out, p, tcfg, d2t2, t2d, None, None, a.dtype, train_rows=rows)
    n = counts.sum()
    info = {
        "head": os.path.abspath(a.head), "model": os.path.basename(a.model), "answers": a.answers,
        "draft_vocab": [int(len(old)), int(a.draft_vocab)], "dtype": a.dtype,
        "answer_tokens": int(n),
        "coverage_of_answers": [float(counts[old].sum() / n),
                                float((counts[old].sum() + counts[extra].sum()) / n)],
        "map_fit_on_rarest_quarter": {"r2": r2, "mean_cos": cos},
    }
    with open(os.path.join(a.out, "grow.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"grow_head: {path}: {len(old)} -> {a.draft_vocab} draft tokens; coverage of the answers "
          f"{info['coverage_of_answers'][0]:.3f} -> {info['coverage_of_answers'][1]:.3f}; the map on the head's "
          f"rarest quarter R^2 {r2:.3f}, cosine {cos:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
