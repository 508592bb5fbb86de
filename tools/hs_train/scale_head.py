"""A copy of a head GGUF whose draft logits are multiplied by S.

    python -m hs_train.scale_head HEAD.gguf OUT.gguf S [--dtype f16|f32|q8_0]

The head's output is output.weight @ (rmsnorm(x) * output_norm.weight) with no
bias (models/eagle3.h), so multiplying the f32 output_norm.weight by S
multiplies every logit by S: the draft distribution at temperature 1 / S. The
ranking of each node's children, and so every chain, stays the same; what
changes is the probabilities EAGLE-2's tree ranks candidates by (path
log-probability) and the Top-K entropy HeteroSpec's strata read. The 8-bit
activations of the output product are scale-free (per-block amax), so the
runtime's logits scale exactly up to float rounding.

The head is read and written by eagle3_gguf (the converter's reader and
writer, with their checks); --dtype is the written matrices' type (f16, as the
committed SmolLM2 head's, by default).

Used to ask whether the trained head's probabilities are the right ones for
EAGLE's default tree (tools/hs_train/README.md, "Draft temperature").
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import eagle3_gguf  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m hs_train.scale_head", description=__doc__.split("\n")[0])
    ap.add_argument("head")
    ap.add_argument("out")
    ap.add_argument("s", type=float, help="the logits' factor (temperature 1 / S)")
    ap.add_argument("--dtype", choices=("f16", "f32", "q8_0"), default="f16", help="OUT's matrices")
    a = ap.parse_args(argv)
    if not (a.s > 0 and np.isfinite(a.s)):
        sys.exit(f"scale_head: S must be a positive number, not {a.s}")
    cfg, tensors = eagle3_gguf.read_eagle3_gguf_or_exit(a.head, "scale_head")
    tensors["norm.weight"] = tensors["norm.weight"] * np.float32(a.s)
    eagle3_gguf.write_eagle3_gguf(a.out, cfg, tensors, target_name=cfg["target_name"],
                                  target_layers=cfg["target_layers"], dtype=a.dtype,
                                  train_rows=cfg["train_row_length"])
    print(f"{a.out}: output_norm.weight x {a.s} (draft temperature {1 / a.s:.4g})")


if __name__ == "__main__":
    main(sys.argv[1:])
