"""Trains an EAGLE-3 draft head by self-distillation (JAX + optax, CPU).

  python -m hs_train.train --model TARGET.gguf --data DIR --out RUN [options]   (resumes from RUN/ckpt.pkl)
  python -m hs_train.train --model TARGET.gguf --data DIR --out RUN --eval-only

DIR holds distill.py's shards (tokens + taps + the target's top-32 next-token
probabilities per position). The head is exactly models/eagle3.h's
"Computation (per row)": x = fc(taps); u = [rmsnorm(embed(tok)) * attn_norm,
rmsnorm(x) * hidden_norm]; one llama decoder layer (q/k/v over 2 dim, GQA,
NEOX RoPE at the target's base, residual x, SwiGLU with post-attention
RMSNorm); hidden = layer output; logits = lm_head(rmsnorm(hidden) * norm) over
the draft vocabulary (target id = draft id + d2t[draft id]). The embedding is
the target's token_embd, frozen.

Rows: head row j pairs the taps at position j with token j+1 and learns the
target's distribution at position j+1 (the token j+2), restricted to the draft
vocabulary (soft cross-entropy over the target's top 32); loss only where
token j+2 is an answer token and the target's argmax is in the draft
vocabulary.

Training-time test (EAGLE-3): K unrolled steps; step 0 uses the real taps; at
step k row j takes step k-1's hidden at row j-1 and the real token j+1, and
attends to step-0 keys at rows <= j-k plus step i's key at row j-k+i for
i = 1..k (its chain of draft ancestors), as a depth-k node at inference.
Sequences are packed into rows of --seq tokens (attention within a sequence); a
longer one (a long prompt) loses the start of its prompt (fit_rows).

Outputs in RUN: ckpt.pkl (params, optimizer state, step; written every
--ckpt-min minutes and at the end), train.log, eval.json, and the head in
EAGLE-3 checkpoint layout (model.safetensors, config.json, d2t.npy) plus
head.gguf when tools/eagle3_gguf.py is importable.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import pickle
import sys
import time

import numpy as np

from hs_train.distill import data_dirs, is_heldout, log, shard_paths


# ---------------- data ----------------


def npz_mmap(path):
    """The arrays of an .npz as read-only memory maps of the file where its members are stored uncompressed
    (distill.py writes them so), else read: the features of all SmolLM2 answers (about 17 GB) stay in the page
    cache, which the kernel can reclaim, instead of the process's memory."""
    import zipfile

    out = {}
    with zipfile.ZipFile(path) as zf, open(path, "rb") as f:
        for info in zf.infolist():
            name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
            if info.compress_type != zipfile.ZIP_STORED:
                out[name] = np.load(zf.open(info))
                continue
            f.seek(info.header_offset)
            head = f.read(30)  # the local file header: its name and extra field lengths
            f.seek(info.header_offset + 30 + int.from_bytes(head[26:28], "little") + int.from_bytes(head[28:30], "little"))
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read(f)
            if dtype.hasobject or fortran:
                out[name] = np.load(zf.open(info))
            elif int(np.prod(shape)) == 0:
                out[name] = np.zeros(shape, dtype)
            else:
                out[name] = np.memmap(path, dtype, "r", f.tell(), shape)
    return out


def load_sequences(data_dir, shard_list=None, keep=None):
    """Per sequence: tokens, prompt_len, idx, and features (taps f16 [n-1, 3D], top_p, top_id [n-1, 32]),
    views of the shards' memory maps (npz_mmap). keep(idx) -> bool: only those sequences (--eval-only reads
    the held-out ones)."""
    paths = shard_list or shard_paths(data_dir)
    seqs = []
    for p in paths:
        z = npz_mmap(p)
        off = z["offsets"]
        taps, tp, ti = z["taps"], z["top_p"], z["top_id"]
        r = 0
        for i in range(len(z["idx"])):
            toks = z["tokens"][off[i] : off[i + 1]]
            m = len(toks) - 1
            idx = int(z["idx"][i])
            if keep is None or keep(idx):
                seqs.append(
                    {
                        "idx": idx,
                        "tokens": toks.astype(np.int32),
                        "prompt_len": int(z["prompt_len"][i]),
                        "taps": taps[r : r + m],
                        "top_p": tp[r : r + m],
                        "top_id": ti[r : r + m],
                    }
                )
            r += m
        assert r == len(taps), p
    return seqs, [os.path.abspath(p) for p in paths]


def answer_counts(seqs, n_vocab):
    """How often each target id occurs in the sequences' answers."""
    counts = np.zeros(n_vocab, np.int64)
    for s in seqs:
        np.add.at(counts, s["tokens"][s["prompt_len"] :], 1)
    return counts


def head_ids(d2t):
    """The target ids of a head's draft tokens, in draft-id order."""
    return np.arange(len(d2t)) + d2t


def vocab_maps(ids, n_vocab):
    """d2t (target id = draft id + d2t[draft id]) and t2d (-1 outside) of increasing target ids."""
    ids = np.asarray(ids, np.int64)
    t2d = np.full(n_vocab, -1, np.int32)
    t2d[ids] = np.arange(len(ids))
    return (ids - np.arange(len(ids))).astype(np.int32), t2d


def draft_vocab(train_seqs, n_vocab, n_draft):
    """The n_draft most frequent answer tokens, in increasing target-id order."""
    counts = answer_counts(train_seqs, n_vocab)
    ids = np.sort(np.argsort(-counts, kind="stable")[: min(n_draft, n_vocab)]).astype(np.int64)
    d2t, t2d = vocab_maps(ids, n_vocab)
    return ids, d2t, t2d, counts


def lstsq_map(x, y):
    """The linear map that best takes the columns of x to those of y (least squares, f64): y ~ map @ x."""
    return np.linalg.lstsq(x.astype(np.float64).T, y.astype(np.float64).T, rcond=None)[0].T


def remap_vocab(params, d2t, ids, tparams, n_vocab):
    """An --init head moved to the draft vocabulary ids (target ids): lm_head columns of tokens it had keep
    theirs; the others start from the target's output rows (as init_params does) mapped by the linear map
    that best takes the target's rows of the kept tokens to the head's trained columns (least squares, when
    at least twice as many tokens as dimensions stay): a trained head's hidden state has drifted from the
    target's, and the raw rows would outvote every trained column (measured on the SmolLM2 head: held-out
    top-1 0.000 with raw rows). Returns (params, d2t, t2d)."""
    ids = np.sort(np.asarray(ids, np.int64))
    col = np.full(n_vocab, -1, np.int64)
    col[head_ids(d2t)] = np.arange(len(d2t))  # the head's column of each of its tokens
    src = col[ids]
    stay, new = src >= 0, src < 0
    out = np.asarray(tparams["output"], np.float32)
    head = params["lm_head"]
    lm = np.empty((head.shape[0], len(ids)), np.float32)
    lm[:, stay] = head[:, src[stay]]
    lm[:, new] = out[:, ids[new]]
    if stay.sum() >= 2 * out.shape[0]:
        lm[:, new] = lstsq_map(out[:, ids[stay]], head[:, src[stay]]) @ lm[:, new].astype(np.float64)
    p = dict(params)
    p["lm_head"] = lm
    return (p,) + vocab_maps(ids, n_vocab)


def grow_vocab(params, d2t, train_seqs, tparams, n_vocab, n_draft):
    """An --init head's vocabulary grown to n_draft: its tokens, then the most frequent answer tokens it
    lacks (their columns as remap_vocab makes them). Returns (params, d2t, t2d)."""
    return remap_vocab(params, d2t, grown_ids(d2t, answer_counts(train_seqs, n_vocab), n_draft), tparams, n_vocab)


def grown_ids(d2t, counts, n_draft):
    """The target ids of a vocabulary d2t grown to (at most) n_draft: its own, then the tokens it lacks in
    decreasing count (ties: lower id first), those that occur at all."""
    old = head_ids(d2t)
    counts = counts.copy()
    counts[old] = -1  # already in
    extra = np.argsort(-counts, kind="stable")[: max(0, n_draft - len(old))]
    return np.concatenate([old, extra[counts[extra] > 0]])


def rechoose_vocab(params, d2t, train_seqs, tparams, n_vocab, n_draft):
    """An --init head moved to the n_draft most frequent answer tokens of train_seqs (draft_vocab's choice
    for a new head; remap_vocab). Returns (params, d2t, t2d, kept: how many of its tokens stay)."""
    ids = draft_vocab(train_seqs, n_vocab, n_draft)[0]
    kept = len(np.intersect1d(ids, head_ids(d2t)))
    return remap_vocab(params, d2t, ids, tparams, n_vocab) + (kept,)


def coverage(seqs, t2d):
    n = hit = 0
    for s in seqs:
        a = s["tokens"][s["prompt_len"] :]
        n += len(a)
        hit += int((t2d[a] >= 0).sum())
    return hit / max(n, 1)


def row_arrays(s, t2d):
    """Per head row j (m = n-1 rows): tok_in = token j+1; the target's
    distribution at position j+1 as draft ids/probabilities; its argmax (draft
    id, -1 outside); the true next token x_{j+2} (target id, -1 past the end);
    the loss mask; the chain-root mask (token j+2 is an answer token)."""
    toks = s["tokens"]
    n = len(toks)
    m = n - 1
    tok_in = toks[1:]
    tgt_id = np.full((m, s["top_id"].shape[1]), -1, np.int32)
    tgt_p = np.zeros((m, s["top_p"].shape[1]), np.float16)
    tgt_id[: m - 1] = t2d[s["top_id"][1:]]
    tgt_p[: m - 1] = s["top_p"][1:]
    top1 = np.full(m, -1, np.int32)
    top1[: m - 1] = t2d[s["top_id"][1:, 0]]
    nxt = np.full(m, -1, np.int32)
    nxt[: m - 1] = toks[2:]
    j = np.arange(m)
    root = (j + 2 >= s["prompt_len"]) & (j <= m - 2)
    return tok_in, tgt_id, tgt_p, top1, nxt, root & (top1 >= 0), root


def walk_rounds(acc_len, root, prompt_len):
    """Rounds and tokens of generation with greedy chains over one sequence's head rows: the
    first round's root is row prompt_len - 1 (the prefill gave token prompt_len); a round
    whose chain keeps A drafts gives A + 1 tokens (the drafts and the bonus) and the next
    root is A + 1 rows on. Unlike the mean over every root row, this weighs each stretch
    of text by the rounds that generation spends on it, as tau = tokens / rounds does."""
    rounds = toks = 0
    j = prompt_len - 1
    while 0 <= j < len(root) and root[j]:
        a = int(acc_len[j])
        rounds += 1
        toks += a + 1
        j += a + 1
    return rounds, toks


def pack(lengths, T, seed):
    """First-fit of sequences (lengths <= T) in a seeded random order into rows of T."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(lengths))
    rows, free = [], []
    for i in order:
        L = lengths[i]
        for r in range(len(rows)):
            if free[r] >= L:
                rows[r].append(int(i))
                free[r] -= L
                break
        else:
            rows.append([int(i)])
            free.append(T - L)
    return rows


def fit_rows(s, T):
    """s with at most T head rows: a longer sequence loses the start of its prompt (tokens and their
    per-position features alike) as long as two prompt tokens stay, so every answer token keeps its row
    and the taps, which carry the target's whole context, are unchanged; None when the answer alone is
    too long."""
    c = len(s["tokens"]) - 1 - T
    if c <= 0:
        return s
    if s["prompt_len"] - c < 2:
        return None
    out = dict(s)
    out["tokens"] = s["tokens"][c:]
    out["prompt_len"] = s["prompt_len"] - c
    for k in ("taps", "top_p", "top_id"):
        out[k] = s[k][c:]
    return out


class Packed:
    """Sequences packed into rows of T head rows (fit_rows); batches assembled on demand."""

    def __init__(self, seqs, t2d, T, seed):
        self.seqs = [f for f in (fit_rows(s, T) for s in seqs) if f is not None]
        self.T = T
        self.rows = pack([len(s["tokens"]) - 1 for s in self.seqs], T, seed)
        self.ra = [row_arrays(s, t2d) for s in self.seqs]
        self.n_loss = int(sum(r[5].sum() for r in self.ra))
        self.n_tok = int(sum(len(s["tokens"]) - 1 for s in self.seqs))

    def batch(self, row_ids):
        T, B = self.T, len(row_ids)
        D3 = self.seqs[0]["taps"].shape[1]
        K = self.seqs[0]["top_p"].shape[1]
        b = {
            "taps": np.zeros((B, T, D3), np.float16),
            "tok": np.zeros((B, T), np.int32),
            "seg": np.full((B, T), -1, np.int32),
            "start": np.zeros((B, T), np.int32),
            "tgt_id": np.full((B, T, K), -1, np.int32),
            "tgt_p": np.zeros((B, T, K), np.float16),
            "top1": np.full((B, T), -1, np.int32),
            "nxt": np.full((B, T), -1, np.int32),
            "mask": np.zeros((B, T), bool),
            "root": np.zeros((B, T), bool),
        }
        for bi, r in enumerate(row_ids):
            o = 0
            for si, i in enumerate(self.rows[r]):
                s = self.seqs[i]
                tok_in, tgt_id, tgt_p, top1, nxt, mask, root = self.ra[i]
                m = len(tok_in)
                sl = slice(o, o + m)
                b["taps"][bi, sl] = s["taps"]
                b["tok"][bi, sl] = tok_in
                b["seg"][bi, sl] = si
                b["start"][bi, sl] = o
                b["tgt_id"][bi, sl] = tgt_id
                b["tgt_p"][bi, sl] = tgt_p
                b["top1"][bi, sl] = top1
                b["nxt"][bi, sl] = nxt
                b["mask"][bi, sl] = mask
                b["root"][bi, sl] = root
                o += m
        return b


def loss_rows(b, quantum, ttt=1):
    """b with the tables of forward's loss-row mode, each padded to a multiple of quantum so that the jitted
    step sees few shapes: "lrows", the flat indices into B * T of its loss rows (padding: row 0) and
    "lvalid" (false on the padding); every step's loss mask is within b["mask"], so the losses over these
    rows are the losses over all rows. With ttt > 1 steps, for step k = 1 .. ttt - 1 (row k - 1 of each):
    "g_idx", the rows step k computes (padding: B * T): those of each segment from row f - (ttt - 1 - k)
    on, f its first loss row (a loss at step k' >= k, row r >= f, reads step k at rows r - (k' - k) .. r,
    so at f - (ttt - 1 - k) and later; each set holds the next one's rows and one more); "g_prev", for
    each of them the position of the row before it in step k - 1's set (step 1 takes step 0's rows
    directly); "g_lpos", the position of each loss row in step k's set. Positions past a set's rows (its
    padded length P) point to a zero row."""
    mask = b["mask"]
    B, T = mask.shape
    BT = B * T
    pad = lambda n: max(quantum, -(-n // quantum) * quantum)
    idx = np.flatnonzero(mask.reshape(-1)).astype(np.int32)
    L = pad(len(idx))
    b["lrows"] = np.zeros(L, np.int32)
    b["lrows"][: len(idx)] = idx
    b["lvalid"] = np.arange(L) < len(idx)
    if ttt <= 1:
        return b
    seg = b["seg"]
    first = np.full((B, T), 1 << 30, np.int64)  # the first loss row of each row's segment
    for bi in range(B):
        for sg in np.unique(seg[bi][seg[bi] >= 0]):
            in_seg = seg[bi] == sg
            m = np.flatnonzero(mask[bi] & in_seg)
            if len(m):
                first[bi, in_seg] = m[0]
    local = np.arange(T)[None, :]
    sets = [np.flatnonzero(((seg >= 0) & (local >= first - ttt + k + 1)).reshape(-1)) for k in range(1, ttt)]
    P = pad(len(sets[0]))
    g_idx = np.full((ttt - 1, P), BT, np.int32)
    g_prev = np.full((ttt - 1, P), P, np.int32)
    g_lpos = np.full((ttt - 1, L), P, np.int32)
    w_prev = None
    for k, rows in enumerate(sets, 1):
        g_idx[k - 1, : len(rows)] = rows
        w = np.full(BT + 1, P, np.int32)  # flat row -> position in step k's set (P: not in it)
        w[rows] = np.arange(len(rows))
        if k >= 2:
            g_prev[k - 1, : len(rows)] = w_prev[np.where(rows % T > 0, rows - 1, BT)]
        g_lpos[k - 1, : len(idx)] = w[idx]
        w_prev = w
    b["g_idx"], b["g_prev"], b["g_lpos"] = g_idx, g_prev, g_lpos
    return b


# ---------------- model ----------------


def head_dims(tcfg):
    return {
        "dim": tcfg.dim,
        "n_head": tcfg.n_head,
        "n_kv_head": tcfg.n_kv_head,
        "head_dim": tcfg.head_dim,
        "ff": tcfg.ff,
        "eps": tcfg.eps,
        "rope_base": tcfg.rope_base,
    }


def init_params(hd, n_draft, tparams, d2t, seed):
    """Matrices N(0, 0.02) as in Hugging Face llama init, [in][out]; norms 1;
    lm_head and the final norm start from the target's output rows of the
    draft vocabulary and its output norm."""
    D, H, KV, hdim, ff = hd["dim"], hd["n_head"], hd["n_kv_head"], hd["head_dim"], hd["ff"]
    rng = np.random.default_rng(seed)

    def m(i, o):
        return (rng.standard_normal((i, o)) * 0.02).astype(np.float32)

    ids = np.arange(n_draft) + d2t
    return {
        "fc": m(3 * D, D),
        "attn_norm": np.ones(D, np.float32),
        "hidden_norm": np.ones(D, np.float32),
        "wq": m(2 * D, H * hdim),
        "wk": m(2 * D, KV * hdim),
        "wv": m(2 * D, KV * hdim),
        "wo": m(H * hdim, D),
        "ffn_norm": np.ones(D, np.float32),
        "wg": m(D, ff),
        "wu": m(D, ff),
        "wd": m(ff, D),
        "norm": np.asarray(tparams["out_norm"], np.float32).copy(),
        "lm_head": np.ascontiguousarray(np.asarray(tparams["output"], np.float32)[:, ids]),
    }


# head parameter -> EAGLE-3 checkpoint name, in models/eagle3.h's order (matrices are [in][out] here,
# PyTorch's [out][in] there)
CKPT_NAMES = {
    "fc": "fc.weight",
    "attn_norm": "midlayer.input_layernorm.weight",
    "hidden_norm": "midlayer.hidden_norm.weight",
    "wq": "midlayer.self_attn.q_proj.weight",
    "wk": "midlayer.self_attn.k_proj.weight",
    "wv": "midlayer.self_attn.v_proj.weight",
    "wo": "midlayer.self_attn.o_proj.weight",
    "ffn_norm": "midlayer.post_attention_layernorm.weight",
    "wg": "midlayer.mlp.gate_proj.weight",
    "wu": "midlayer.mlp.up_proj.weight",
    "wd": "midlayer.mlp.down_proj.weight",
    "norm": "norm.weight",
    "lm_head": "lm_head.weight",
}


def params_from_head(path, tcfg):
    """(params, d2t) of a head file written by export(): the inverse of eagle3_tensors, checked against the
    target (dimensions and tap layers)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, here)
    import eagle3_gguf

    cfg, tens = eagle3_gguf.read_eagle3_gguf(path)
    want = {"hidden_size": tcfg.dim, "intermediate_size": tcfg.ff, "num_attention_heads": tcfg.n_head,
            "num_key_value_heads": tcfg.n_kv_head, "vocab_size": tcfg.n_vocab, "target_layers": list(tcfg.tap_layers)}
    bad = [f"{k} {cfg[k]} (target: {v})" for k, v in want.items() if cfg[k] != v]
    if bad:
        sys.exit(f"train: --init {path} does not fit the target: " + ", ".join(bad))
    p = {}
    for k, n in CKPT_NAMES.items():
        a = np.asarray(tens[n], np.float32)
        p[k] = np.ascontiguousarray(a.T) if a.ndim == 2 else a.copy()  # [out][in] -> [in][out]
    return p, np.asarray(tens["d2t"], np.int32)


def make_fns(hd, n_steps, weights):
    import jax
    import jax.numpy as jnp

    from hs_train.target import rmsnorm, rope_neox

    H, KV, hdim, eps, base = hd["n_head"], hd["n_kv_head"], hd["head_dim"], hd["eps"], hd["rope_base"]
    g = H // KV
    scale = np.float32(1.0 / math.sqrt(hdim))

    def shift(a, s):  # a[:, j] <- a[:, j - s], zeros in front
        if s == 0:
            return a
        pad = jnp.zeros(a.shape[:1] + (s,) + a.shape[2:], a.dtype)
        return jnp.concatenate([pad, a[:, :-s]], axis=1)

    def forward(p, embd, b, n_steps):
        """Returns per step: draft logits [B, T, N]. TTT as in the module doc. When b holds loss_rows'
        tables ("lrows", and for several steps "g_idx", "g_prev", "g_lpos"), the logits [L, N] of the loss
        rows only, and with g_idx steps >= 1 run their products only at the rows a loss can depend on
        (attention runs over every row, the rows left out as zeros): the same values at the loss rows."""
        t = b if "lrows" in b else None
        B, T = b["tok"].shape
        BT = B * T
        pos = jnp.broadcast_to(jnp.arange(T), (B, T))
        e = embd[b["tok"]]  # [B, T, D]
        en = rmsnorm(e, p["attn_norm"], eps)
        x = b["taps"].astype(jnp.float32) @ p["fc"]
        j = jnp.arange(T)
        same = b["seg"][:, :, None] == b["seg"][:, None, :]  # [B, T, T]

        def pad1(a):  # [R, ...] -> [R + 1, ...], a zero row last (where padding indices point)
            return jnp.concatenate([a, jnp.zeros((1,) + a.shape[1:], a.dtype)])

        def flat(a):  # [B, T, ...] -> [B * T + 1, ...]
            return pad1(a.reshape((BT,) + a.shape[2:]))

        def full(a, idx):  # rows [P, ...] at flat indices idx (B * T: padding) -> [B, T, ...], zeros elsewhere
            z = jnp.zeros((BT + 1,) + a.shape[1:], a.dtype).at[idx].set(a)
            return z[:BT].reshape((B, T) + a.shape[1:])

        gather = t is not None and "g_idx" in t
        en_f, pos_f = (flat(en), flat(pos)) if gather else (None, None)
        keys, vals = [], []
        k0 = v0 = None
        out = []
        for k in range(n_steps):
            idx = t["g_idx"][k - 1] if gather and k > 0 else None
            en_k, pos_k = (en, pos) if idx is None else (en_f[idx], pos_f[idx])
            u = jnp.concatenate([en_k, rmsnorm(x, p["hidden_norm"], eps)], axis=-1)
            lead = u.shape[:-1]
            q = rope_neox((u @ p["wq"]).reshape(lead + (H, hdim)), pos_k, base).reshape(lead + (KV, g, hdim))
            kk = rope_neox((u @ p["wk"]).reshape(lead + (KV, hdim)), pos_k, base)
            vv = (u @ p["wv"]).reshape(lead + (KV, hdim))
            if idx is not None:
                q, kk, vv = full(q, idx), full(kk, idx), full(vv, idx)
            if k == 0:
                k0, v0 = kk, vv
            keys.append(kk)
            vals.append(vv)
            # step-0 keys at rows <= j - k of the same sequence
            m0 = same & (j[None, None, :] <= (j - k)[None, :, None])
            s0 = jnp.einsum("btkgd,bskd->bkgts", q, k0) * scale
            s0 = jnp.where(m0[:, None, None], s0, -1e30)
            # ancestors: step i's key at row j - k + i, i = 1..k (i = k: itself)
            sa = [jnp.einsum("btkgd,btkd->bkgt", q, shift(keys[i], k - i)) * scale for i in range(1, k + 1)]
            s_all = jnp.concatenate([s0] + [s[..., None] for s in sa], axis=-1)
            pr = jax.nn.softmax(s_all, axis=-1)
            o = jnp.einsum("bkgts,bskd->btkgd", pr[..., :T], v0)
            for n, i in enumerate(range(1, k + 1)):
                o = o + jnp.einsum("bkgt,btkd->btkgd", pr[..., T + n], shift(vals[i], k - i))
            o = o.reshape(B, T, H * hdim)
            if idx is not None:
                o = flat(o)[idx]
            xa = x + o @ p["wo"]
            hn = rmsnorm(xa, p["ffn_norm"], eps)
            hid = xa + (jax.nn.silu(hn @ p["wg"]) * (hn @ p["wu"])) @ p["wd"]
            hf = rmsnorm(hid, p["norm"], eps)
            if t is not None:
                hf = flat(hf)[t["lrows"]] if idx is None else pad1(hf)[t["g_lpos"][k - 1]]
            out.append(hf @ p["lm_head"])
            if not gather:
                x = shift(hid, 1)
            elif k + 1 < n_steps:
                x = flat(shift(hid, 1))[t["g_idx"][0]] if k == 0 else pad1(hid)[t["g_prev"][k]]
        return out

    def step_masks(b, n_steps):
        T = b["tok"].shape[1]
        j = jnp.arange(T)[None, :]
        return [b["mask"] & (j - k >= b["start"]) for k in range(n_steps)]

    def losses(p, embd, b):
        """With b["lrows"] (loss_rows), the logits and everything a loss reads are those rows only
        (b["lvalid"] false for padding): the same sums as over every row."""
        logits = forward(p, embd, b, n_steps)
        masks = step_masks(b, n_steps)
        tid, tgt_p, top1 = b["tgt_id"], b["tgt_p"], b["top1"]
        if "lrows" in b:
            at_rows = lambda a: a.reshape((-1,) + a.shape[2:])[b["lrows"]]
            masks = [at_rows(m) & b["lvalid"] for m in masks]
            tid, tgt_p, top1 = at_rows(tid), at_rows(tgt_p), at_rows(top1)
        tp = jnp.where(tid >= 0, tgt_p.astype(jnp.float32), 0.0)
        tp = tp / jnp.maximum(tp.sum(-1, keepdims=True), 1e-9)
        total = 0.0
        per = []
        for k, (lg, mk) in enumerate(zip(logits, masks)):
            lsm = jax.nn.log_softmax(lg, axis=-1)
            ce = -(jnp.take_along_axis(lsm, jnp.maximum(tid, 0), axis=-1) * tp).sum(-1)  # [B, T]
            mf = mk.astype(jnp.float32)
            n = jnp.maximum(mf.sum(), 1.0)
            l = (ce * mf).sum() / n
            acc = ((jnp.argmax(lg, -1) == top1).astype(jnp.float32) * mf).sum() / n
            total = total + weights[k] * l
            per.append((l, acc, mf.sum()))
        return total, per

    def evaluate(p, embd, b, d2t, depth):
        """Per step: (correct count, n) of the top-1 against the target's argmax, and the
        per-root accepted length of a greedy chain of `depth` drafts (see chain_accept)."""
        logits = forward(p, embd, b, depth)
        masks = step_masks(b, depth)
        res = []
        corr_next = []
        for k, (lg, mk) in enumerate(zip(logits, masks)):
            am = jnp.argmax(lg, -1)
            res.append((((am == b["top1"]) & mk).sum(), mk.sum()))
            # drafted target id == the sequence's next token x_{j+2}
            corr_next.append((am + d2t[am]) == b["nxt"])
        # root r: its chain's draft at depth d + 1 is step d's argmax at row r + d
        acc_len = jnp.zeros(b["tok"].shape, jnp.int32)
        alive = jnp.ones(b["tok"].shape, bool)
        for d in range(depth):
            c = corr_next[d]
            c_r = jnp.concatenate([c[:, d:], jnp.zeros((c.shape[0], d), bool)], axis=1)  # row r <- r + d
            seg_r = jnp.concatenate([b["seg"][:, d:], jnp.full((c.shape[0], d), -2, b["seg"].dtype)], axis=1)
            alive = alive & c_r & (seg_r == b["seg"])
            acc_len = acc_len + alive.astype(jnp.int32)
        return res, acc_len

    return forward, losses, evaluate


# ---------------- export ----------------


def eagle3_tensors(p, f16=True):
    """EAGLE-3 checkpoint names, PyTorch layout [out][in]; matrices f16 (f16=True), norms f32."""
    out = {}
    for k, name in CKPT_NAMES.items():
        a = np.asarray(p[k], np.float32)
        if a.ndim == 2:
            a = np.ascontiguousarray(a.T)
            a = a.astype(np.float16) if f16 else a
        out[name] = a
    return out


def eagle3_config(tcfg, n_draft):
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": tcfg.dim,
        "intermediate_size": tcfg.ff,
        "num_attention_heads": tcfg.n_head,
        "num_key_value_heads": tcfg.n_kv_head,
        "head_dim": tcfg.head_dim,
        "num_hidden_layers": 1,
        "rms_norm_eps": tcfg.eps,
        "rope_theta": tcfg.rope_base,
        "max_position_embeddings": tcfg.n_ctx_train,
        "vocab_size": tcfg.n_vocab,
        "draft_vocab_size": n_draft,
        "target_hidden_size": tcfg.dim,
        "target_layers": list(tcfg.tap_layers),
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": list(tcfg.tap_layers)},
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
        "hidden_act": "silu",
        "bos_token_id": tcfg.bos,
        "eos_token_id": tcfg.eos,
    }


def export(out, p, tcfg, d2t, t2d, writer_dir, logf, dtype="f16", train_rows=None):
    from safetensors.numpy import save_file

    tens = eagle3_tensors(p)
    cfg = eagle3_config(tcfg, len(d2t))
    st = dict(tens)
    st["d2t"] = d2t.astype(np.int64)
    st["t2d"] = t2d >= 0
    save_file(st, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    np.save(os.path.join(out, "d2t.npy"), d2t.astype(np.int32))
    log(logf, f"exported {out}/model.safetensors + config.json + d2t.npy")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, writer_dir or here)
    try:
        import eagle3_gguf  # tools/eagle3_gguf.py (the converter's writer)
    except ImportError:
        log(logf, "tools/eagle3_gguf.py not found: no head.gguf (convert the checkpoint with the converter)")
        return None
    path = os.path.join(out, "head.gguf")
    eagle3_gguf.write_eagle3_gguf(path, cfg, tens, d2t.astype(np.int32), target_name=tcfg.name,
                                  target_layers=list(tcfg.tap_layers), dtype=dtype, train_rows=train_rows)
    log(logf, f"exported {path} (matrices {dtype}, {os.path.getsize(path) / 1e6:.1f} MB)")
    return path


# ---------------- main ----------------


def to_np(tree):
    import jax

    return jax.tree_util.tree_map(lambda a: np.asarray(a), tree)


def warmup_length(fraction, steps, ck, total):
    """(warmup steps, legacy): --warmup-steps, else the checkpoint's, else the fraction of `total` (at most 100
    steps). legacy: a checkpoint written before the length was kept, whose schedule recomputes it from `total`
    at every step as its run did."""
    legacy = bool(ck) and ck.get("warm") is None and not steps
    if steps:
        return steps, False
    if ck and not legacy:
        return ck["warm"], False
    return max(1, min(100, int(fraction * total))), legacy


def lr_at(step, lr, warm, total):
    """Linear warmup over `warm` steps, then cosine to 5 % of lr at `total`."""
    if step < warm:
        return lr * step / warm
    f = min(1.0, (step - warm) / max(1, total - warm))
    return lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * f)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="target GGUF")
    ap.add_argument("--data", required=True, help="distill.py output folder(s), comma-separated")
    ap.add_argument("--out", required=True)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=512, help="head rows per packed row")
    ap.add_argument("--batch", type=int, default=4, help="packed rows per step")
    ap.add_argument("--ttt", type=int, default=5, help="unrolled draft steps in training")
    ap.add_argument("--decay", type=float, default=0.8, help="weight of step k: decay^k")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=float, default=0.05, help="fraction of steps (at most 100 steps), of the "
                    "length known when the run starts (with --minutes: of --epochs)")
    ap.add_argument("--warmup-steps", type=int, default=0, help="the warmup in steps instead (the log and the "
                    "checkpoint give a run's: a --minutes run is reproduced by --steps N --warmup-steps W)")
    ap.add_argument("--minutes", type=float, default=0, help="time budget: as many steps as fit (<= --epochs)")
    ap.add_argument("--steps", type=int, default=0, help="exactly this many steps in all (overrides --epochs, "
                    "--minutes and a resumed checkpoint's length: the cosine then ends there)")
    ap.add_argument("--stop-at", type=int, default=0, help="stop after this step with a checkpoint, leaving "
                    "the schedule as it is (a later run resumes; with --steps, a run that changed its length "
                    "mid-way is reproduced)")
    ap.add_argument("--loss-rows", type=int, default=128, help="the output head only over a batch's loss rows, "
                    "and the draft steps after the first only over the rows a loss depends on, padded to a "
                    "multiple of this (0: every row everywhere; the same losses either way)")
    ap.add_argument("--clip", type=float, default=0.5)
    ap.add_argument("--wd", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ckpt-min", type=float, default=5.0)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-depth", type=int, default=5)
    ap.add_argument("--eval-only", action="store_true")
    ap.add_argument("--gguf-writer", help="folder holding eagle3_gguf.py (default: tools/)")
    ap.add_argument("--gguf-dtype", choices=("f16", "q8_0"), default="f16", help="head.gguf's matrices: q8_0 "
                    "about halves the file (SmolLM2 with a draft vocabulary of 24576: 20.6 MB against about 38 "
                    "in f16; a committed head stays under 25 MB); the safetensors checkpoint stays f16")
    ap.add_argument("--max-heldout-rows", type=int, default=0, help="0: all")
    ap.add_argument("--init", help="head.gguf to start from (its weights and draft vocabulary) instead of a "
                    "random head: continued training on more data; a --draft-vocab above the head's grows its "
                    "vocabulary by the most frequent answer tokens it lacks")
    ap.add_argument("--revocab", action="store_true", help="with --init: the draft vocabulary re-chosen as a "
                    "new head's would be (the --draft-vocab most frequent training answer tokens), the head's "
                    "lm_head columns kept for the tokens that stay (new ones: remap_vocab)")
    a = ap.parse_args(argv)
    if any("/data/bench" in os.path.abspath(d) for d in data_dirs(a.data)):
        sys.exit("train: refusing benchmark data")

    import jax
    import jax.numpy as jnp
    import optax

    from hs_train import target

    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "train.log"), "a")
    ckpt_path = os.path.join(a.out, "ckpt.pkl")
    ck = None
    if os.path.exists(ckpt_path):
        with open(ckpt_path, "rb") as f:
            ck = pickle.load(f)
        log(logf, f"resuming from {ckpt_path} at step {ck['step']}")
        a.draft_vocab, a.seq, a.batch, a.ttt, a.decay, a.epochs, a.lr, a.warmup, a.clip, a.wd, a.seed = (
            ck["args"][k] for k in ("draft_vocab", "seq", "batch", "ttt", "decay", "epochs", "lr", "warmup", "clip", "wd", "seed")
        )
    if a.eval_only and not ck and not a.init:
        sys.exit(f"train: --eval-only needs a checkpoint ({ckpt_path}) or --init HEAD.gguf")
    if a.eval_only and a.revocab:
        sys.exit("train: --eval-only evaluates a head as it is; --revocab would change its vocabulary")
    tcfg, tparams = target.load(a.model)
    seqs, shards = load_sequences(a.data, ck["shards"] if ck else None, keep=is_heldout if a.eval_only else None)
    held = [s for s in seqs if is_heldout(s["idx"])]
    train = [s for s in seqs if not is_heldout(s["idx"])]
    init = None
    if ck:
        d2t, t2d = ck["d2t"], ck["t2d"]
        counts = None
    elif a.init:
        init, d2t = params_from_head(a.init, tcfg)
        d2t, t2d = vocab_maps(head_ids(d2t), tcfg.n_vocab)
        log(logf, f"init from {a.init}: its weights and its draft vocabulary ({len(d2t)} tokens)")
        if a.revocab:
            n_old = len(d2t)
            init, d2t, t2d, kept = rechoose_vocab(init, d2t, train, tparams, tcfg.n_vocab, a.draft_vocab)
            log(logf, f"draft vocabulary re-chosen (--revocab): the {len(d2t)} most frequent training answer "
                f"tokens; {kept} of the head's {n_old} kept with their lm_head columns, {len(d2t) - kept} new "
                "from the target's output rows (mapped as remap_vocab says)")
        elif a.draft_vocab > len(d2t) and not a.eval_only:
            init, d2t, t2d = grow_vocab(init, d2t, train, tparams, tcfg.n_vocab, a.draft_vocab)
            log(logf, f"draft vocabulary grown to {len(d2t)} tokens (--draft-vocab {a.draft_vocab}): the "
                "most frequent training answer tokens it lacked, lm_head columns from the target's output rows "
                "(mapped as remap_vocab says)")
    else:
        _, d2t, t2d, counts = draft_vocab(train, tcfg.n_vocab, a.draft_vocab)
    n_draft = len(d2t)
    cov_tr, cov_he = (coverage(train, t2d) if train else None), coverage(held, t2d)
    cov_tr_s = f"{100 * cov_tr:.2f} % train" if cov_tr is not None else "train not read (--eval-only)"
    log(logf, f"data: {len(shards)} shards, {len(train)} train / {len(held)} held-out sequences, "
        f"{sum(len(s['tokens']) - s['prompt_len'] for s in train)} train answer tokens; draft vocab {n_draft}: "
        f"coverage of answer tokens {cov_tr_s}, {100 * cov_he:.2f} % held out")
    tr = Packed(train, t2d, a.seq, a.seed) if not a.eval_only else None
    he = Packed(held, t2d, a.seq, a.seed)
    if (tr is not None and not tr.seqs) or not he.seqs:
        longest = max(len(s["tokens"]) - 1 for s in seqs) if seqs else 0
        sys.exit(f"train: no {'training' if tr is not None and not tr.seqs else 'held-out'} sequence fits --seq {a.seq} head rows "
                 f"(the longest sequence has {longest}); raise --seq")
    steps_per_epoch = max(1, len(tr.rows) // a.batch) if tr is not None else 1
    total = max(1, int(round(a.epochs * steps_per_epoch)))
    if tr is not None:
        log(logf, f"packed: {len(tr.rows)} train rows of {a.seq} ({tr.n_tok} tokens, {tr.n_loss} loss rows), "
            f"{len(he.rows)} held-out rows; {steps_per_epoch} steps/epoch, {total} steps")
    else:
        log(logf, f"packed: {len(he.rows)} held-out rows of {a.seq} (--eval-only)")

    hd = head_dims(tcfg)
    weights = [a.decay**k for k in range(a.ttt)]
    forward, losses, evaluate = make_fns(hd, a.ttt, weights)
    embd = jnp.asarray(tparams["tok_embd"])
    if ck and "total" in ck:
        total = ck["total"]
    if a.steps:
        if ck and a.steps <= ck["step"]:
            sys.exit(f"train: --steps {a.steps} is not past the checkpoint's step {ck['step']}")
        if ck and ck.get("total") != a.steps:
            log(logf, f"schedule length {ck.get('total')} -> {a.steps} steps (--steps) at step {ck['step']}")
        total = a.steps
    # with --minutes, total is decided from the measured step time
    fixed = bool(ck) or not a.minutes or bool(a.steps)

    # The warmup's length is fixed when the run starts (a time budget sets `total` only at step 60, and a
    # resumed or shortened run keeps its own), so that one --steps run gives every step the learning rate
    # of the run it reproduces. Checkpoints from before it was kept recompute it as they did.
    warm, legacy = warmup_length(a.warmup, a.warmup_steps, ck, total)
    if not a.eval_only:
        log(logf, f"warmup {warm} steps" + (" (from the length, as this checkpoint's run did)" if legacy else ""))

    def sched(step):
        return lr_at(step, a.lr, warmup_length(a.warmup, 0, None, total)[0] if legacy else warm, total)

    # the learning rate is an argument of the step (not baked into optax), so that a time budget can set the
    # schedule's length after measuring
    opt = optax.chain(optax.clip_by_global_norm(a.clip), optax.add_decayed_weights(a.wd),
                      optax.scale_by_adam(b1=0.9, b2=0.95))
    if ck:
        params = jax.tree_util.tree_map(jnp.asarray, ck["params"])
        opt_state = jax.tree_util.tree_map(jnp.asarray, ck["opt_state"])
        step = ck["step"]
    else:
        start = init if init is not None else init_params(hd, n_draft, tparams, d2t, a.seed)
        params = jax.tree_util.tree_map(jnp.asarray, start)
        opt_state = opt.init(params)
        step = 0
    del tparams

    def train_step(params, opt_state, b, lr):
        (l, per), grads = jax.value_and_grad(losses, has_aux=True)(params, embd, b)
        upd, opt_state = opt.update(grads, opt_state, params)
        upd = jax.tree_util.tree_map(lambda u: -lr * u, upd)
        return optax.apply_updates(params, upd), opt_state, l, per

    train_step = jax.jit(train_step, donate_argnums=(0, 1))
    d2t_j = jnp.asarray(d2t)
    eval_fn = jax.jit(lambda p, b: evaluate(p, embd, b, d2t_j, a.eval_depth))

    def save():
        tmp = ckpt_path + ".tmp"
        with open(tmp, "wb") as f:
            pickle.dump({"params": to_np(params), "opt_state": to_np(opt_state), "step": step, "total": total,
                         "warm": None if legacy else warm, "args": vars(a),
                         "shards": shards, "d2t": d2t, "t2d": t2d}, f)
        os.replace(tmp, ckpt_path)

    def order_for(epoch):
        return np.random.default_rng([a.seed, epoch]).permutation(len(tr.rows))

    t_last_ck = time.time()
    t0 = time.time()
    t_prev, step_dts = t0, []
    acc_log = []
    n_since = 0
    # the end is read each step: --minutes sets total at step 60 (a bound fixed before the loop ran every such
    # run to the end of its epoch at the schedule's floor rate)
    while step < (min(total, a.stop_at) if a.stop_at else total) and not a.eval_only:
        ep, i = divmod(step, steps_per_epoch)
        ids = order_for(ep)[i * a.batch : (i + 1) * a.batch]
        nb = tr.batch(ids)
        if a.loss_rows:
            nb = loss_rows(nb, a.loss_rows, a.ttt)
        b = {k: jnp.asarray(v) for k, v in nb.items()}
        params, opt_state, l, per = train_step(params, opt_state, b, jnp.float32(sched(step)))
        step += 1
        if not fixed:
            # the median step of steps 2..60: a step that meets a new shape of the loss-row tables compiles
            # first, which the early steps often do (the mean over steps 2..12 read 4.8 s a step where the run
            # then took 1.4, and so budgeted a third of the steps that fit); for a length of 2,000 steps or more
            # the warmup is 100 steps either way, so the schedule is the one that length given would make
            t_now = time.time()
            if step >= 2:
                step_dts.append(t_now - t_prev)
            t_prev = t_now
            if step == 60:
                dt_step = float(np.median(step_dts))
                total = max(step + 1, min(total, int(a.minutes * 60 / dt_step)))
                fixed = True
                log(logf, f"time budget {a.minutes} min at {dt_step:.2f} s/step: {total} steps "
                    f"({total / steps_per_epoch:.2f} epochs)")
        n_since += 1
        acc_log.append((float(l), [(float(x), float(y), float(n)) for x, y, n in per]))
        if step % a.log_every == 0 or step == total:
            dt = time.time() - t0
            ls = np.mean([x[0] for x in acc_log])
            per_k = np.array([[x[1][k][0] for x in acc_log] for k in range(a.ttt)]).mean(1)
            acc_k = np.array([[x[1][k][1] for x in acc_log] for k in range(a.ttt)]).mean(1)
            log(logf, f"step {step}/{total} ep {ep} lr {float(sched(step)):.2e} loss {ls:.4f} | per-step loss "
                + " ".join(f"{x:.3f}" for x in per_k) + " | acc " + " ".join(f"{x:.3f}" for x in acc_k)
                + f" | {n_since * a.batch * a.seq / dt:.0f} rows/s")
            acc_log = []
            n_since = 0
            t0 = time.time()
        if time.time() - t_last_ck > a.ckpt_min * 60:
            save()
            t_last_ck = time.time()
            log(logf, f"checkpoint at step {step}")
    if not a.eval_only:
        save()
        if step < total:
            log(logf, f"stopped at step {step} of {total} (--stop-at): checkpoint saved, no eval or export")
            return

    # held-out evaluation: per-step top-1 against the target's argmax (loss rows), and
    # the accepted length of a greedy chain from every root row (token j+2 an answer token)
    corr = np.zeros(a.eval_depth)
    cnt = np.zeros(a.eval_depth)
    acc_sum = n_roots = w_rounds = w_toks = 0
    hist = np.zeros(a.eval_depth + 1, np.int64)
    rows = list(range(len(he.rows)))
    if a.max_heldout_rows:
        rows = rows[: a.max_heldout_rows]
    for c in range(0, len(rows), a.batch):
        ids = rows[c : c + a.batch]
        n_real = len(ids)
        nb = he.batch(ids + [ids[-1]] * (a.batch - n_real))
        nb["mask"][n_real:] = False
        nb["root"][n_real:] = False
        res, acc_len = eval_fn(params, {k: jnp.asarray(v) for k, v in nb.items()})
        for k, (cc, nn) in enumerate(res):
            corr[k] += int(cc)
            cnt[k] += int(nn)
        acc_len = np.asarray(acc_len)
        for bi, r in enumerate(ids[:n_real]):
            o = 0
            for i in he.rows[r]:
                m = len(he.seqs[i]["tokens"]) - 1
                rr, tt = walk_rounds(acc_len[bi, o : o + m], nb["root"][bi, o : o + m], he.seqs[i]["prompt_len"])
                w_rounds += rr
                w_toks += tt
                o += m
        acc_len = acc_len[nb["root"]]
        acc_sum += int(acc_len.sum())
        n_roots += int(len(acc_len))
        hist += np.bincount(acc_len, minlength=a.eval_depth + 1)[: a.eval_depth + 1]
    mean_acc = acc_sum / max(n_roots, 1)
    ev = {
        "step": step,
        "heldout_sequences": len(he.seqs),
        "heldout_rows": int(cnt[0]),
        "top1_acc_per_step": (corr / np.maximum(cnt, 1)).tolist(),
        "chain_depth": a.eval_depth,
        "chain_roots": n_roots,
        "mean_accepted": mean_acc,
        "expected_tau": 1 + mean_acc,
        "accepted_hist": hist.tolist(),
        "walked_rounds": w_rounds,
        "walked_tokens": w_toks,
        "walked_tau": w_toks / max(w_rounds, 1),
        "draft_vocab": n_draft,
        "coverage_train": cov_tr,
        "coverage_heldout": cov_he,
    }
    log(logf, "eval: top-1 per step " + " ".join(f"{x:.3f}" for x in ev["top1_acc_per_step"])
        + f"; greedy chain of {a.eval_depth}: mean accepted {mean_acc:.3f}, expected tau {1 + mean_acc:.3f} "
        f"over {n_roots} roots; walked through each answer, tau {w_toks / max(w_rounds, 1):.3f} "
        f"({w_toks} tokens in {w_rounds} rounds)")
    with open(os.path.join(a.out, "eval.json"), "w") as f:
        json.dump(ev, f, indent=1)
    export(a.out, to_np(params), tcfg, d2t, t2d, a.gguf_writer, logf, a.gguf_dtype, train_rows=a.seq)
    return 0


if __name__ == "__main__":
    sys.exit(main())
