#!/usr/bin/env python3
"""Randomly initialised EAGLE-3 checkpoints for the converter's tests, in the layout of the public ones:
config.json plus model.safetensors or pytorch_model.bin (torch.save's zip format, by tools/torch_zip.py).

    python tools/tests/eagle3_ckpt.py OUT_DIR [--format safetensors|bin] [--seed N]

writes a head of the stories260K configuration (hidden 64, 8 heads, 4 KV heads, ff 172, vocabulary 512,
draft vocabulary 256).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from torch_zip import save_torch_zip  # noqa: E402

# stories260K's sizes (dim 64, 8 heads, 4 KV heads, hidden_dim 172, vocabulary 512)
STORIES_CFG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 64,
    "intermediate_size": 172,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 8,
    "num_hidden_layers": 1,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "max_position_embeddings": 512,
    "vocab_size": 512,
    "draft_vocab_size": 256,
    "hidden_act": "silu",
    "torch_dtype": "float32",
}


def random_tensors(cfg, seed=0):
    """{checkpoint name: array} of a random head for cfg, with d2t/t2d of a random sorted subset of the target
    vocabulary (as EAGLE-3 builds them from token frequencies)."""
    rng = np.random.default_rng(seed)
    H, V, Vd, ff = cfg["hidden_size"], cfg["vocab_size"], cfg["draft_vocab_size"], cfg["intermediate_size"]
    T = cfg.get("target_hidden_size", H)
    hd = cfg.get("head_dim") or H // cfg["num_attention_heads"]
    q, kv = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols)) / np.sqrt(cols)).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.standard_normal(H)).astype(np.float32)

    used = np.sort(rng.choice(V, size=Vd, replace=False))
    t2d = np.zeros(V, dtype=bool)
    t2d[used] = True
    return {
        "fc.weight": mat(H, 3 * T),
        "midlayer.input_layernorm.weight": norm(),
        "midlayer.hidden_norm.weight": norm(),
        "midlayer.self_attn.q_proj.weight": mat(q, 2 * H),
        "midlayer.self_attn.k_proj.weight": mat(kv, 2 * H),
        "midlayer.self_attn.v_proj.weight": mat(kv, 2 * H),
        "midlayer.self_attn.o_proj.weight": mat(H, q),
        "midlayer.post_attention_layernorm.weight": norm(),
        "midlayer.mlp.gate_proj.weight": mat(ff, H),
        "midlayer.mlp.up_proj.weight": mat(ff, H),
        "midlayer.mlp.down_proj.weight": mat(H, ff),
        "norm.weight": norm(),
        "lm_head.weight": mat(Vd, H),
        "d2t": (used - np.arange(Vd)).astype(np.int64),
        "t2d": t2d,
    }


def write_checkpoint(out_dir, cfg, tensors, fmt="safetensors", **torch_zip_options):
    """config.json + model.safetensors (fmt "safetensors") or pytorch_model.bin (fmt "bin")."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if fmt == "safetensors":
        from safetensors.numpy import save_file

        save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, os.path.join(out_dir, "model.safetensors"))
    elif fmt == "bin":
        save_torch_zip(os.path.join(out_dir, "pytorch_model.bin"), tensors, **torch_zip_options)
    else:
        raise ValueError(f"format {fmt!r}: expected safetensors or bin")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--format", choices=("safetensors", "bin"), default="safetensors")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    write_checkpoint(args.out_dir, STORIES_CFG, random_tensors(STORIES_CFG, args.seed), args.format)
    print(f"eagle3_ckpt: wrote {args.out_dir} ({args.format})")


if __name__ == "__main__":
    main()
