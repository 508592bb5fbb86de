"""Checks the JAX target (target.py) against heterospec's own forward pass.

For each prompt, `heterospec logits` writes every position's logits (HSLG
file); the JAX forward runs over the same token ids. Prints, per prompt and in
total, the top-1 agreement and the largest |softmax difference| over all
positions and vocabulary entries.

  python -m hs_train.check_target --hs BUILD/heterospec -m MODEL.gguf [--chat] [-p TEXT ...] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

DEFAULT_PROMPTS = [
    "What is the capital of France? Answer in one sentence.",
    "Write a short poem about the sea.",
    "Tom has 3 apples and buys 5 more. How many apples does he have?",
    "Explain what a hash table is.",
]


def read_hslg(path):
    with open(path, "rb") as f:
        b = f.read()
    if b[:4] != b"HSLG":
        raise ValueError(f"{path}: not an HSLG file")
    ver, n_vocab, n_rows = np.frombuffer(b, np.uint32, 3, 4)
    if ver != 1:
        raise ValueError(f"{path}: HSLG version {ver}")
    toks = np.frombuffer(b, np.int32, n_rows, 16)
    logits = np.frombuffer(b, np.float32, n_rows * n_vocab, 16 + 4 * n_rows).reshape(n_rows, n_vocab)
    return toks, logits


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hs", required=True, help="heterospec binary")
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--chat", action="store_true")
    ap.add_argument("-p", "--prompt", action="append")
    ap.add_argument("--json", help="write the figures as JSON here")
    a = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from hs_train import target

    cfg, params = target.load(a.model)
    params = target.to_device(params)
    fwd = jax.jit(lambda p, t: target.forward(p, cfg, t)[0])
    prompts = a.prompt or DEFAULT_PROMPTS
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp/runtime-%d" % os.getuid())
    rows = []
    agree = total = 0
    worst = 0.0
    with tempfile.TemporaryDirectory() as td:
        for i, text in enumerate(prompts):
            out = os.path.join(td, f"{i}.hslg")
            # An f32 cache, as the JAX target keeps (heterospec's default is f16).
            cmd = [a.hs, "logits", "-m", a.model, "--kv-type", "f32", "-p", text, "-o", out] + (
                ["--chat"] if a.chat else [])
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            toks, ref = read_hslg(out)
            got = np.asarray(fwd(params, jnp.asarray(toks[None])))[0]
            top_ref, top_got = ref.argmax(-1), got.argmax(-1)
            d = float(np.abs(softmax(ref.astype(np.float64)) - softmax(got.astype(np.float64))).max())
            n_agree = int((top_ref == top_got).sum())
            rows.append({"prompt": text, "n_tokens": int(len(toks)), "top1_agree": n_agree, "max_abs_softmax_diff": d})
            print(f"prompt {i}: {len(toks)} tokens, top-1 agree {n_agree}/{len(toks)}, max |softmax diff| {d:.3g}")
            agree += n_agree
            total += len(toks)
            worst = max(worst, d)
    summary = {
        "model": os.path.basename(a.model),
        "chat": a.chat,
        "positions": total,
        "top1_agree": agree,
        "top1_rate": agree / total,
        "max_abs_softmax_diff": worst,
        "prompts": rows,
    }
    print(f"total: top-1 agree {agree}/{total} ({100 * agree / total:.2f} %), max |softmax diff| {worst:.3g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
