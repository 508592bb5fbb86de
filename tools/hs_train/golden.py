"""Reference outputs of a trained head for the C implementation's tests: the
target's taps for a token sequence, the head consuming all its rows, then a
greedy chain of drafts, each node's top-K (target ids, probabilities), computed
step by step as models/eagle3.h describes (test_head.sim_node) from the head's
f16 weights as exported.

  python -m hs_train.golden --model TARGET.gguf --head RUN/model.safetensors --tokens 1,403,407,... \
      [--depth 4] [--top-k 5] --out golden.json
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def load_head(path):
    from safetensors.numpy import load_file

    t = load_file(path)
    f = lambda k: t[k].astype(np.float32)
    p = {
        "fc": f("fc.weight").T,
        "attn_norm": f("midlayer.input_layernorm.weight"),
        "hidden_norm": f("midlayer.hidden_norm.weight"),
        "wq": f("midlayer.self_attn.q_proj.weight").T,
        "wk": f("midlayer.self_attn.k_proj.weight").T,
        "wv": f("midlayer.self_attn.v_proj.weight").T,
        "wo": f("midlayer.self_attn.o_proj.weight").T,
        "ffn_norm": f("midlayer.post_attention_layernorm.weight"),
        "wg": f("midlayer.mlp.gate_proj.weight").T,
        "wu": f("midlayer.mlp.up_proj.weight").T,
        "wd": f("midlayer.mlp.down_proj.weight").T,
        "norm": f("norm.weight"),
        "lm_head": f("lm_head.weight").T,
    }
    return p, t["d2t"].astype(np.int64)


def topk(logits, d2t, k):
    z = logits.astype(np.float64)
    pr = np.exp(z - z.max())
    pr /= pr.sum()
    o = np.argsort(-pr, kind="stable")[:k]
    return [int(i + d2t[i]) for i in o], [float(pr[i]) for i in o]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--tokens", required=True, help="comma-separated target ids x_0 .. x_n (n rows are consumed)")
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--top-k", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)

    import jax.numpy as jnp

    from hs_train import target
    from hs_train.test_head import sim_node

    tcfg, tp = target.load(a.model)
    toks = np.array([int(x) for x in a.tokens.split(",")], np.int32)
    _, taps, _ = target.forward(target.to_device(tp), tcfg, jnp.asarray(toks[None]), want_logits=False)
    taps = np.asarray(taps[0])
    p, d2t = load_head(a.head)
    hd = {"n_head": tcfg.n_head, "n_kv_head": tcfg.n_kv_head, "head_dim": tcfg.head_dim, "eps": tcfg.eps,
          "rope_base": tcfg.rope_base}
    embd = tp["tok_embd"]
    n = len(toks) - 1
    keys, vals = [], []
    for j in range(n):  # row j: taps of position j, token j+1
        lg, hid, k, v = sim_node(p, hd, embd[toks[j + 1]], taps[j] @ p["fc"], j, keys, vals)
        keys.append(k)
        vals.append(v)
    ids, prs = topk(lg, d2t, a.top_k)
    out = {
        "model": tcfg.name,
        "tokens": toks.tolist(),
        "consumed_rows": n,
        "tap_layers": list(tcfg.tap_layers),
        "root": {"position": n - 1, "top_ids": ids, "top_probs": prs},
        "chain": [],
        "note": "root: the last consumed row's top-K (the distribution of x_{n+1}); chain[d-1]: the depth-d node "
                "drafting the root's greedy choice path (token = the previous top-1), at position n-1+d",
    }
    for d in range(1, a.depth + 1):
        tok = ids[0]
        lg, hid, k, v = sim_node(p, hd, embd[tok], hid, n - 1 + d, keys, vals)
        keys.append(k)
        vals.append(v)
        ids, prs = topk(lg, d2t, a.top_k)
        out["chain"].append({"depth": d, "token": tok, "position": n - 1 + d, "top_ids": ids, "top_probs": prs})
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out)[:600])
    return 0


if __name__ == "__main__":
    sys.exit(main())
