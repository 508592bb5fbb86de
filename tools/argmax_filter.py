"""Would an exact greedy argmax need the whole output head? A measurement, not part of the runtime.

The output head (SmolLM2: a 49152 x 576 q8_0 matrix) is about a quarter of a decoding step on lavapipe and
is paid for every generated token, speculative or not. Greedy decoding needs only its argmax. A cheaper pass
could find it exactly if every row's error had a bound: rows whose upper bound is below the best lower bound
cannot win, and only the rest would need their f32 logits. This script measures, on the target's own answers,
how many rows such a filter would leave:

- 8-bit activations (each 32-element block rounded to int8 with d = amax / 127, as heterospec's q4_1 products
  take them) on the exact q8_0 weights: a row's error is at most sum over blocks of d / 2 * sum |w|;
- a q4_1 copy of the head (per-block min and scale, 4-bit codes) on those activations: the weights' error adds
  at most sum over blocks of max |w - w4| * sum |x|;
- the copies (q4_1, and 5-bit codes for comparison) under the Cauchy-Schwarz bound, with the exact logit of
  the copy's own argmax row as the lower bound: |w x - wc x'| <= ||w - wc|| ||x|| + ||wc|| ||x' - x|| (x' the
  activations the copy's pass takes: x itself, or its 8-bit form).

Run from tools/ with the training environment (tools/hs_train/README.md):
  $HS_HOME/venv-train/bin/python argmax_filter.py [--model GGUF] [--sequences N] [--every K]
It reads the target with hs_train.target (JAX, f32) and answers from the committed distillation files with
their prompts from $HS_HOME/distill/smollm2-llama/jobs-all.txt, every K-th line of answers-00, the first 512
tokens of each.
"""
import argparse
import lzma
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    home = os.environ.get("HS_HOME", os.path.expanduser("~/.cache/heterospec"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=f"{home}/models/SmolLM2-135M-Instruct.Q4_1.gguf")
    ap.add_argument("--jobs", default=f"{home}/distill/smollm2-llama/jobs-all.txt")
    ap.add_argument("--answers", default=f"{HERE}/../models/heads/smollm2/distill/answers-00.txt.xz")
    ap.add_argument("--sequences", type=int, default=40)
    ap.add_argument("--every", type=int, default=97)
    a = ap.parse_args()

    import jax.numpy as jnp
    from hs_train import target

    cfg, params = target.load(a.model)
    params = target.to_device(params)
    w = np.asarray(params["output"]).T.astype(np.float64)  # [vocab][dim], the q8_0 values
    v, d = w.shape
    wb = w.reshape(v, d // 32, 32)
    l1 = np.abs(wb).sum(-1)  # [vocab][blocks]
    mn = wb.min(-1, keepdims=True)
    sc = (wb.max(-1, keepdims=True) - mn) / 15
    w4b = mn + np.round((wb - mn) / np.where(sc > 0, sc, 1)) * sc
    e4, l1_4, w4 = np.abs(w4b - wb).max(-1), np.abs(w4b).sum(-1), w4b.reshape(v, d)
    sc5 = (wb.max(-1, keepdims=True) - mn) / 31
    w5 = (mn + np.round((wb - mn) / np.where(sc5 > 0, sc5, 1)) * sc5).reshape(v, d)

    def norms(wc):  # per row: ||w - wc||, ||wc||
        return np.sqrt(((wc - w) ** 2).sum(-1)), np.sqrt((wc ** 2).sum(-1))

    copies = {"q4_1": (w4, *norms(w4)), "5-bit": (w5, *norms(w5))}
    cs = {"q4_1 copy, f32 activations": [], "q4_1 copy, 8-bit activations": [], "5-bit copy, 8-bit activations": []}

    def cs_left(name, exact, x, xc):
        wc, err, nc = copies[name]
        approx = wc @ xc
        bound = err * np.linalg.norm(x) + nc * np.linalg.norm(xc - x) + 1e-3  # + f32 rounding slack
        keep = approx + bound >= exact[np.argmax(approx)]
        assert keep[np.argmax(exact)], "the bound let the argmax go"
        return int(keep.sum())

    prompts = {}
    with open(a.jobs) as f:
        for line in f:
            i, ids = line.rstrip("\n").split("\t")
            prompts[int(i)] = [int(x) for x in ids.split(",")]
    seqs = []
    with lzma.open(a.answers, "rt") as f:
        for n, line in enumerate(f):
            if n % a.every:
                continue
            idx, _, _, ids = line.rstrip("\n").split("\t")
            seqs.append((prompts[int(idx)] + [int(x) for x in ids.split(",")])[:512])
            if len(seqs) >= a.sequences:
                break

    c8, c4, margin = [], [], []
    for s in seqs:
        _, _, hn = target.forward(params, cfg, jnp.asarray([s]), want_logits=False)
        for h in np.asarray(hn[0], dtype=np.float64):
            exact = w @ h
            hb = h.reshape(-1, 32)
            dx = np.abs(hb).max(-1) / 127
            xq = (np.round(hb / np.where(dx > 0, dx, 1)[:, None]) * dx[:, None]).reshape(-1)
            ap8, b8 = w @ xq, l1 @ (dx / 2)
            keep = ap8 + b8 >= (ap8 - b8).max()
            assert keep[np.argmax(exact)], "the bound let the argmax go"
            c8.append(int(keep.sum()))
            ap4, b4 = w4 @ xq, l1_4 @ (dx / 2) + e4 @ np.abs(hb).sum(-1)
            c4.append(int((ap4 + b4 >= (ap4 - b4).max()).sum()))
            cs["q4_1 copy, f32 activations"].append(cs_left("q4_1", exact, h, h))
            cs["q4_1 copy, 8-bit activations"].append(cs_left("q4_1", exact, h, xq))
            cs["5-bit copy, 8-bit activations"].append(cs_left("5-bit", exact, h, xq))
            top = np.sort(exact)[-2:]
            margin.append(top[1] - top[0])
    c8, c4, margin = np.array(c8), np.array(c4), np.array(margin)

    def line(name, c):
        print(f"{name}: rows left of {v}: mean {c.mean():.1f}, median {np.median(c):.0f}, p90 "
              f"{np.percentile(c, 90):.0f}, p99 {np.percentile(c, 99):.0f}, max {c.max()}; one row "
              f"{np.mean(c == 1):.3f}, at most 8 {np.mean(c <= 8):.3f}, at most 64 {np.mean(c <= 64):.3f}")

    print(f"{len(seqs)} sequences, {len(c8)} positions; top-1 minus top-2 logit: median {np.median(margin):.2f}, "
          f"p10 {np.percentile(margin, 10):.3f}")
    line("8-bit activations, q8_0 weights", c8)
    line("8-bit activations, a q4_1 copy", c4)
    for name, c in cs.items():
        line(f"Cauchy-Schwarz, {name}", np.array(c))


if __name__ == "__main__":
    main()
