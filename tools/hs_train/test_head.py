"""Checks train.py's training-time-test forward against a plain simulation of
inference as models/eagle3.h describes it (consume rows, then a chain of draft
nodes, each seeing the consumed rows, its ancestors and itself), on a small
random head and two packed sequences. Also checks the EAGLE-3 export layout and
the held-out evaluation's walk of chain rounds.

  python -m hs_train.test_head          (exit 0 and "ok" when they agree)
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np


def sim_node(p, hd, e_tok, x_in, pos, keys, vals):
    """One head row as eagle3.h computes it; keys/vals: the K/V rows it sees
    besides its own. Returns (logits, hidden, k, v)."""
    from hs_train.target import rmsnorm, rope_neox

    H, KV, hdim, eps, base = hd["n_head"], hd["n_kv_head"], hd["head_dim"], hd["eps"], hd["rope_base"]
    u = np.concatenate([rmsnorm(e_tok, p["attn_norm"], eps), rmsnorm(x_in, p["hidden_norm"], eps)])
    posa = np.array([pos])
    q = np.asarray(rope_neox((u @ p["wq"]).reshape(1, H, hdim), posa, base))[0]
    k = np.asarray(rope_neox((u @ p["wk"]).reshape(1, KV, hdim), posa, base))[0]
    v = (u @ p["wv"]).reshape(KV, hdim)
    K = np.stack(keys + [k])  # [S, KV, hd]
    V = np.stack(vals + [v])
    o = np.zeros((H, hdim))
    for h in range(H):
        kh = h // (H // KV)
        s = K[:, kh] @ q[h] / np.sqrt(hdim)
        w = np.exp(s - s.max())
        w /= w.sum()
        o[h] = w @ V[:, kh]
    x = x_in + o.reshape(-1) @ p["wo"]
    hn = np.asarray(rmsnorm(x, p["ffn_norm"], eps))
    g = hn @ p["wg"]
    x = x + (g / (1 + np.exp(-g)) * (hn @ p["wu"])) @ p["wd"]
    logits = np.asarray(rmsnorm(x, p["norm"], eps)) @ p["lm_head"]
    return logits, x, k, v


def main():
    import jax

    jax.config.update("jax_enable_x64", False)
    import jax.numpy as jnp

    from hs_train import train

    rng = np.random.default_rng(1)
    hd = {"dim": 16, "n_head": 4, "n_kv_head": 2, "head_dim": 4, "ff": 24, "eps": 1e-5, "rope_base": 10000.0}
    V, N, D = 40, 30, hd["dim"]
    d2t = np.sort(rng.choice(V, N, replace=False)) - np.arange(N)
    tparams = {"out_norm": rng.uniform(0.5, 1.5, D).astype(np.float32), "output": rng.standard_normal((D, V)).astype(np.float32)}
    p = train.init_params(hd, N, tparams, d2t.astype(np.int32), 0)
    for k in p:  # larger weights so that errors would show
        p[k] = (p[k] * (10 if p[k].ndim == 2 else 1) + (rng.standard_normal(p[k].shape) * 0.1 if p[k].ndim == 1 else 0)).astype(np.float32)
    embd = rng.standard_normal((V, D)).astype(np.float32)
    K_STEPS = 4
    T = 24
    lens = [11, 13]  # two sequences packed in one row
    taps = rng.standard_normal((T, 3 * D)).astype(np.float32)
    toks = rng.integers(0, V, T).astype(np.int32)
    seg = np.full(T, -1, np.int32)
    start = np.zeros(T, np.int32)
    o = 0
    for si, L in enumerate(lens):
        seg[o : o + L] = si
        start[o : o + L] = o
        o += L
    b = {
        "taps": jnp.asarray(taps[None]).astype(jnp.float16).astype(jnp.float32),
        "tok": jnp.asarray(toks[None]),
        "seg": jnp.asarray(seg[None]),
        "start": jnp.asarray(start[None]),
    }
    taps16 = np.asarray(b["taps"][0])
    forward, _, _ = train.make_fns(hd, K_STEPS, [1.0] * K_STEPS)
    pj = {k: jnp.asarray(v) for k, v in p.items()}
    out = [np.asarray(x[0]) for x in forward(pj, jnp.asarray(embd), b, K_STEPS)]
    worst = 0.0
    o = 0
    for L in lens:
        # row j of this sequence is packed row o + j; positions = packed row index (RoPE is relative)
        for n in range(1, L + 1):  # consumed rows 0 .. n-1
            keys, vals, hid = [], [], None
            for j in range(n):
                lg, hid, k, v = sim_node(p, hd, embd[toks[o + j]], taps16[o + j] @ p["fc"], o + j, keys, vals)
                keys.append(k)
                vals.append(v)
            worst = max(worst, np.abs(lg - out[0][o + n - 1]).max())
            # chain from root n-1: depth d node = row n-1+d with the real token (as TTT feeds it)
            ak, av = list(keys), list(vals)
            for d in range(1, K_STEPS):
                j = n - 1 + d
                if j >= L:
                    break
                lg, hid, k, v = sim_node(p, hd, embd[toks[o + j]], hid, o + j, ak, av)
                ak.append(k)
                av.append(v)
                worst = max(worst, np.abs(lg - out[d][o + j]).max() / (1 + np.abs(lg).max()))
        o += L
    print(f"max deviation between TTT forward and simulated inference: {worst:.3g}")
    ok = worst < 1e-3
    # loss_rows: the losses and their gradients over a batch's loss rows only (and steps >= 1 over the rows
    # a loss depends on) equal those over every row
    # (two packed rows, loss rows scattered, padding to a multiple of 8 with row 0, itself a loss row).
    Kt = 5
    bl = {k: jnp.concatenate([v, v[:, ::-1] if k in ("taps", "tok") else v]) for k, v in b.items()}
    mask = rng.random((2, T)) < 0.6
    mask[0, 0] = True  # the padding's row: counted once, not once per padding slot
    mask[1, :6] = mask[1, 11:17] = False  # segments whose first loss rows leave rows out of later steps
    tid = rng.integers(-1, N, (2, T, Kt)).astype(np.int32)
    bl.update({"mask": jnp.asarray(mask), "tgt_id": jnp.asarray(tid),
               "tgt_p": jnp.asarray(rng.random((2, T, Kt)).astype(np.float16)),
               "top1": jnp.asarray(rng.integers(-1, N, (2, T)).astype(np.int32))})
    _, losses, _ = train.make_fns(hd, K_STEPS, [0.8**k for k in range(K_STEPS)])
    vg = jax.value_and_grad(losses, has_aux=True)
    (l_all, per_all), g_all = vg(pj, jnp.asarray(embd), bl)
    lr = train.loss_rows({k: np.asarray(v) for k, v in bl.items()}, 8, K_STEPS)
    assert len(lr["lrows"]) % 8 == 0 and int(lr["lvalid"].sum()) == int(mask.sum()), lr["lrows"]
    n_rows = [int((r < 2 * T).sum()) for r in lr["g_idx"]]
    assert n_rows == sorted(n_rows, reverse=True) and n_rows[-1] < 2 * T, n_rows  # later steps skip rows
    dev = 0.0
    lr1 = train.loss_rows({k: np.asarray(v) for k, v in bl.items()}, 8)  # the output head's rows only
    assert "g_idx" not in lr1
    for tables in (lr, lr1):
        (l_rows, per_rows), g_rows = vg(pj, jnp.asarray(embd), {k: jnp.asarray(v) for k, v in tables.items()})
        dev = max([dev, abs(float(l_all) - float(l_rows)) / abs(float(l_all))]
                  + [abs(float(x) - float(y)) / max(abs(float(x)), 1e-6) for a_, b_ in zip(per_all, per_rows)
                     for x, y in zip(a_, b_)]
                  + [float(jnp.abs(g_all[k] - g_rows[k]).max() / (jnp.abs(g_all[k]).max() + 1e-12)) for k in g_all])
    print(f"max relative deviation of the losses and gradients over loss rows only: {dev:.3g}")
    ok = ok and dev < 1e-4
    # export layout: [out][in]
    t = train.eagle3_tensors(p, f16=False)
    assert t["fc.weight"].shape == (D, 3 * D)
    assert t["midlayer.self_attn.q_proj.weight"].shape == (hd["n_head"] * hd["head_dim"], 2 * D)
    assert t["midlayer.self_attn.k_proj.weight"].shape == (hd["n_kv_head"] * hd["head_dim"], 2 * D)
    assert t["midlayer.mlp.down_proj.weight"].shape == (D, hd["ff"])
    assert t["lm_head.weight"].shape == (N, D)
    x = rng.standard_normal(2 * D).astype(np.float32)
    assert np.allclose(t["midlayer.self_attn.q_proj.weight"] @ x, x @ p["wq"], atol=1e-4)
    # walk_rounds: rounds and tokens of chain generation from per-root accepted lengths.
    # 11 tokens, prompt 3: rows 0..9, roots 1..8 (tokens 3..10 answer; row 9 has no x_{j+2}).
    root = np.array([False] + [True] * 8 + [False])
    acc = np.array([0, 0, 2, 9, 9, 0, 1, 9, 0, 9])  # visited: rows 2 (+3), 5 (+1), 6 (+2), 8 (+1)
    assert train.walk_rounds(acc, root, 3) == (4, 7), train.walk_rounds(acc, root, 3)
    for _ in range(200):  # chains never pass the answer's end: every answer token but the prefill's is walked
        m, P = int(rng.integers(3, 40)), int(rng.integers(1, 3))
        root = (np.arange(m) + 2 >= P) & (np.arange(m) <= m - 2)
        acc = np.array([rng.integers(0, max(m - 1 - j, 1)) for j in range(m)])
        r, t = train.walk_rounds(acc, root, P)
        assert t == m - P and 1 <= r <= t, (m, P, r, t)
    # grow_vocab: old tokens keep their lm_head columns, new ones (the most frequent answer tokens missing)
    # take the target's output rows, ids sorted again; tokens never answered are not added.
    V, Dg = 12, 3
    outw = rng.standard_normal((Dg, V)).astype(np.float32)
    old_ids = np.array([2, 7, 9])
    gp = {"lm_head": rng.standard_normal((Dg, 3)).astype(np.float32), "fc": np.zeros(1, np.float32)}
    seqs = [{"tokens": np.array([0, 1, 5, 5, 4, 7, 5, 4, 11]), "prompt_len": 2}]  # answers: 5 x3, 4 x2, 7, 11
    gp2, d2t2, t2d2 = train.grow_vocab(gp, old_ids - np.arange(3), seqs, {"output": outw}, V, 5)
    ids2 = np.arange(len(d2t2)) + d2t2
    assert list(ids2) == [2, 4, 5, 7, 9], ids2
    assert np.array_equal(gp2["lm_head"][:, [0, 3, 4]], gp["lm_head"])
    assert np.array_equal(gp2["lm_head"][:, 1], outw[:, 4])
    assert np.array_equal(gp2["lm_head"][:, 2], outw[:, 5]) and gp2["fc"] is gp["fc"]
    assert list(t2d2[[2, 4, 5, 7, 9, 11]]) == [0, 1, 2, 3, 4, -1]
    gp3, d2t3, _ = train.grow_vocab(gp, old_ids - np.arange(3), seqs, {"output": outw}, V, 50)
    assert list(np.arange(len(d2t3)) + d2t3) == [2, 4, 5, 7, 9, 11]  # only answered tokens join
    # rechoose_vocab: the n most frequent answer tokens (5, 4, then 7 and 11 tied, the lower id first); 7
    # keeps its column, 4, 5 and 11 take the target's rows, 2 and 9 (never answered) leave.
    gp4, d2t4, t2d4, kept = train.rechoose_vocab(gp, old_ids - np.arange(3), seqs, {"output": outw}, V, 3)
    assert list(np.arange(len(d2t4)) + d2t4) == [4, 5, 7] and kept == 1, (d2t4, kept)
    assert np.array_equal(gp4["lm_head"][:, 2], gp["lm_head"][:, 1])
    assert np.array_equal(gp4["lm_head"][:, :2], outw[:, [4, 5]])
    assert list(t2d4[[2, 4, 5, 7, 9]]) == [-1, 0, 1, 2, -1]
    # remap_vocab with at least 2 D kept tokens: a new token's column is its target row through the least-
    # squares map from the kept tokens' target rows to their trained columns (exact here: the columns are
    # such a map of the rows).
    Vm, Dm = 40, 3
    outm = rng.standard_normal((Dm, Vm)).astype(np.float32)
    amap = rng.standard_normal((Dm, Dm)).astype(np.float32)
    oldm = np.arange(0, 20, 2)  # 10 tokens >= 2 D
    gm = {"lm_head": (amap @ outm[:, oldm]).astype(np.float32)}
    pm, d2tm, _ = train.remap_vocab(gm, oldm - np.arange(len(oldm)), np.concatenate([oldm[:8], [3, 31]]),
                                    {"output": outm}, Vm)
    idm = list(np.arange(len(d2tm)) + d2tm)
    assert idm == [0, 2, 3, 4, 6, 8, 10, 12, 14, 31], idm
    assert np.array_equal(pm["lm_head"][:, 1], gm["lm_head"][:, 1])  # token 2 kept as it was
    for tok in (3, 31):
        assert np.allclose(pm["lm_head"][:, idm.index(tok)], amap @ outm[:, tok], atol=1e-4), tok
    # fit_rows: a sequence longer than T head rows loses the start of its prompt, features with it, and
    # keeps every answer token's row; one whose answer would lose a row is left out.
    n_tok, P = 12, 7
    s = {"tokens": np.arange(100, 100 + n_tok), "prompt_len": P, "taps": np.arange(n_tok - 1)[:, None] * 10,
         "top_p": np.arange(n_tok - 1)[:, None] * 0.5, "top_id": np.arange(n_tok - 1)[:, None] + 200}
    assert train.fit_rows(s, 11) is s and train.fit_rows(s, 20) is s
    f = train.fit_rows(s, 8)  # 11 rows -> 8: three prompt tokens go
    assert list(f["tokens"]) == list(range(103, 112)) and f["prompt_len"] == 4, f
    assert [int(f[k][0, 0]) for k in ("taps", "top_id")] == [30, 203] and len(f["top_p"]) == 8
    tok_in, _, _, _, nxt, _, rootc = train.row_arrays(f, np.arange(300))
    _, _, _, _, nxt0, _, root0 = train.row_arrays(s, np.arange(300))
    assert list(nxt[rootc]) == list(nxt0[root0]) and list(nxt[rootc]) == list(range(107, 112))
    assert train.fit_rows(s, 6) is not None and train.fit_rows(s, 5) is None  # 2 prompt tokens stay at T = 6
    # coverage: groups by file name up to the last '_'; counts tokens outside the draft vocabulary.
    import tempfile

    from hs_train import coverage

    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for name, ids in (("a_1", [5, 6, 7]), ("a_2", [7, 9]), ("b_10", [6])):
            files.append(os.path.join(tmp, name + ".json"))
            with open(files[-1], "w") as fh:
                json.dump({"ids": ids}, fh)
        np.save(os.path.join(tmp, "d2t.npy"), np.array([5, 5, 5]))  # draft 0, 1, 2 -> target 5, 6, 7
        assert coverage.draft_targets(tmp) == {5, 6, 7}
        g = coverage.tally(files, coverage.draft_targets(tmp))
        assert list(g) == ["a", "b"] and g["a"][:2] == [5, 4] and g["a"][2] == {9: 1} and g["b"][:2] == [1, 1], g
    # the warmup's length: fixed at the start (a --minutes run's from --epochs' length, at most 100 steps), kept
    # by a checkpoint, recomputed from the length only for checkpoints that predate it.
    assert train.warmup_length(0.05, 0, None, 6000) == (100, False)
    assert train.warmup_length(0.05, 0, None, 1487) == (74, False)
    assert train.warmup_length(0.05, 100, None, 1487) == (100, False)
    assert train.warmup_length(0.05, 0, {"warm": 100}, 500) == (100, False)
    assert train.warmup_length(0.05, 0, {"step": 5}, 500) == (25, True)
    assert train.warmup_length(0.05, 0, {"warm": None}, 500) == (25, True)
    assert [round(train.lr_at(s, 2e-4, 100, 1487) * 1e6, 6) for s in (0, 50, 100, 1487, 2000)] == [0, 100, 200, 10, 10]
    print("ok" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
