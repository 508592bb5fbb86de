"""A copy of a head GGUF whose draft logits are multiplied by S.

    python -m hs_train.scale_head HEAD.gguf OUT.gguf S

The head's output is output.weight @ (rmsnorm(x) * output_norm.weight) with no
bias (models/eagle3.h), so multiplying the f32 output_norm.weight by S
multiplies every logit by S: the draft distribution at temperature 1 / S. The
ranking of each node's children, and so every chain, stays the same; what
changes is the probabilities EAGLE-2's tree ranks candidates by (path
log-probability) and the Top-K entropy HeteroSpec's strata read. The 8-bit
activations of the output product are scale-free (per-block amax), so the
runtime's logits scale exactly up to float rounding.

Used to ask whether the trained head's probabilities are the right ones for
EAGLE's default tree (tools/hs_train/README.md, "Draft temperature").
"""
import shutil
import sys

import numpy as np
from gguf import GGUFReader


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: python -m hs_train.scale_head HEAD.gguf OUT.gguf S")
    src, dst = argv[0], argv[1]
    try:
        s = float(argv[2])
    except ValueError:
        s = float("nan")
    if not (s > 0 and np.isfinite(s)):
        sys.exit(f"scale_head: S must be a positive number, not {argv[2]}")
    try:
        head = GGUFReader(src)
    except Exception as e:
        sys.exit(f"scale_head: {src}: not a readable GGUF file: {e}")
    arch = head.fields.get("general.architecture")
    if arch is None or arch.contents() != "eagle3":
        sys.exit(f"scale_head: {src} is not an eagle3 head")
    norm = [t for t in head.tensors if t.name == "output_norm.weight"]
    if len(norm) != 1 or norm[0].data.dtype != np.float32:
        sys.exit(f"scale_head: {src} has no f32 output_norm.weight")
    shutil.copyfile(src, dst)
    r = GGUFReader(dst, "r+")
    norm = [t for t in r.tensors if t.name == "output_norm.weight"]
    norm[0].data[...] = norm[0].data * np.float32(s)
    r.data.flush()
    print(f"{dst}: output_norm.weight x {s} (draft temperature {1 / s:.4g})")


if __name__ == "__main__":
    main(sys.argv[1:])
