"""The llama target (a GGUF file) in JAX, f32, for self-distillation.

Weights are read with gguf.GGUFReader and dequantized to f32 (gguf.quants).
llama.cpp's GGUF stores attn_q/attn_k rows permuted for its "normal" RoPE,
which rotates adjacent pairs (x[2i], x[2i+1]); the target is computed that way,
so the file's rows are used as they are.

  cfg, params = load("model.gguf")
  logits, taps = forward(params, cfg, tokens)         # tokens [B, T], causal from 0
  # taps [B, T, 3 * dim]: inputs of layers cfg.tap_layers (2, L/2, L-3), in that order

Incremental decoding with a KV cache (fixed shapes, for jit): see init_cache,
prefill and decode_step.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    n_layer: int
    dim: int
    n_head: int
    n_kv_head: int
    head_dim: int
    ff: int
    n_vocab: int
    eps: float
    rope_base: float
    n_ctx_train: int
    tap_layers: tuple
    bos: int
    eos: int
    add_bos: bool


def eagle3_tap_layers(n_layer: int) -> tuple:
    """EAGLE-3's tap layers as heterospec picks them (models/llama.c)."""
    return (2, n_layer // 2, n_layer - 3 if n_layer >= 3 else 0)


def _field(r, key, default=None):
    f = r.fields.get(key)
    if f is None:
        return default
    return f.contents()


def _dequant(t) -> np.ndarray:
    import gguf

    a = gguf.quants.dequantize(t.data, t.tensor_type)
    # numpy shape of a GGUF tensor: [rows][cols] = reversed ne
    shape = tuple(int(x) for x in reversed(t.shape))
    return np.asarray(a, dtype=np.float32).reshape(shape)


def load(path: str):
    """Returns (Config, params) with params as numpy f32 arrays; matrices stored
    transposed, [in][out], so that y = x @ W."""
    import gguf

    r = gguf.GGUFReader(path)
    arch = _field(r, "general.architecture")
    if arch != "llama":
        raise ValueError(f"{path}: architecture {arch!r}, not llama")
    p = "llama."
    n_layer = int(_field(r, p + "block_count"))
    dim = int(_field(r, p + "embedding_length"))
    n_head = int(_field(r, p + "attention.head_count"))
    n_kv = int(_field(r, p + "attention.head_count_kv", n_head))
    tensors = {t.name: t for t in r.tensors}
    n_vocab = int(tensors["token_embd.weight"].shape[1])
    cfg = Config(
        name=str(_field(r, "general.name", "")),
        n_layer=n_layer,
        dim=dim,
        n_head=n_head,
        n_kv_head=n_kv,
        head_dim=dim // n_head,
        ff=int(_field(r, p + "feed_forward_length")),
        n_vocab=n_vocab,
        eps=float(_field(r, p + "attention.layer_norm_rms_epsilon", 1e-5)),
        rope_base=float(_field(r, p + "rope.freq_base", 10000.0)),
        n_ctx_train=int(_field(r, p + "context_length", 2048)),
        tap_layers=eagle3_tap_layers(n_layer),
        bos=int(_field(r, "tokenizer.ggml.bos_token_id", 1)),
        eos=int(_field(r, "tokenizer.ggml.eos_token_id", 2)),
        add_bos=bool(_field(r, "tokenizer.ggml.add_bos_token", True)),
    )
    rot = _field(r, p + "rope.dimension_count", cfg.head_dim)
    if int(rot) != cfg.head_dim:
        raise ValueError(f"rope.dimension_count {rot} != head_dim {cfg.head_dim}: partial RoPE not supported")

    def W(name):  # [out][in] -> [in][out]
        return np.ascontiguousarray(_dequant(tensors[name]).T)

    params = {
        "tok_embd": _dequant(tensors["token_embd.weight"]),  # [vocab][dim]
        "out_norm": _dequant(tensors["output_norm.weight"]),
        # tied output when the file has no output.weight (SmolLM2)
        "output": W("output.weight") if "output.weight" in tensors else None,
        "layers": [],
    }
    if params["output"] is None:
        params["output"] = np.ascontiguousarray(params["tok_embd"].T)
    for l in range(n_layer):
        b = f"blk.{l}."
        params["layers"].append(
            {
                "attn_norm": _dequant(tensors[b + "attn_norm.weight"]),
                "wq": W(b + "attn_q.weight"),
                "wk": W(b + "attn_k.weight"),
                "wv": W(b + "attn_v.weight"),
                "wo": W(b + "attn_output.weight"),
                "ffn_norm": _dequant(tensors[b + "ffn_norm.weight"]),
                "wg": W(b + "ffn_gate.weight"),
                "wu": W(b + "ffn_up.weight"),
                "wd": W(b + "ffn_down.weight"),
            }
        )
    return cfg, params


def to_device(params):
    return jax.tree_util.tree_map(jnp.asarray, params)


# ---- ops ----


def rmsnorm(x, w, eps):
    x32 = x.astype(jnp.float32)
    return x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps) * w


def rope_freqs(head_dim, base):
    return base ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)  # [head_dim/2]


def rope_norm(x, pos, base):
    """llama.cpp's normal RoPE: rotates (x[2i], x[2i+1]). x [..., T, H, hd], pos [..., T]."""
    hd = x.shape[-1]
    ang = pos[..., None].astype(jnp.float32) * jnp.asarray(rope_freqs(hd, base), jnp.float32)  # [..., T, hd/2]
    c = jnp.cos(ang)[..., None, :]
    s = jnp.sin(ang)[..., None, :]
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    y0 = x0 * c - x1 * s
    y1 = x0 * s + x1 * c
    return jnp.stack([y0, y1], axis=-1).reshape(x.shape)


def rope_neox(x, pos, base):
    """NEOX / Hugging Face rotate_half: rotates (x[i], x[i + hd/2]). x [..., T, H, hd], pos [..., T]."""
    hd = x.shape[-1]
    ang = pos[..., None].astype(jnp.float32) * jnp.asarray(rope_freqs(hd, base), jnp.float32)
    c = jnp.cos(ang)[..., None, :]
    s = jnp.sin(ang)[..., None, :]
    x0 = x[..., : hd // 2]
    x1 = x[..., hd // 2 :]
    return jnp.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)


def attention(q, k, v, mask):
    """q [B, T, H, hd], k/v [B, S, KV, hd], mask [B or 1, T, S] bool. GQA: head h uses kv head h // (H/KV)."""
    B, T, H, hd = q.shape
    KV = k.shape[2]
    g = H // KV
    q = q.reshape(B, T, KV, g, hd)
    s = jnp.einsum("btkgd,bskd->bkgts", q, k) / np.sqrt(hd).astype(np.float32)
    s = jnp.where(mask[:, None, None, :, :], s, -1e30)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bkgts,bskd->btkgd", p, v)
    return o.reshape(B, T, H * hd)


def _layer_qkv(lp, cfg, h, pos):
    B, T, _ = h.shape
    x = rmsnorm(h, lp["attn_norm"], cfg.eps)
    q = (x @ lp["wq"]).reshape(B, T, cfg.n_head, cfg.head_dim)
    k = (x @ lp["wk"]).reshape(B, T, cfg.n_kv_head, cfg.head_dim)
    v = (x @ lp["wv"]).reshape(B, T, cfg.n_kv_head, cfg.head_dim)
    return rope_norm(q, pos, cfg.rope_base), rope_norm(k, pos, cfg.rope_base), v


def _layer_rest(lp, cfg, h, att):
    h = h + att @ lp["wo"]
    x = rmsnorm(h, lp["ffn_norm"], cfg.eps)
    return h + (jax.nn.silu(x @ lp["wg"]) * (x @ lp["wu"])) @ lp["wd"]


def forward(params, cfg: Config, tokens, want_logits=True):
    """Causal forward over tokens [B, T] at positions 0..T-1.
    Returns (logits [B, T, vocab] or None, taps [B, T, 3 * dim], final hidden [B, T, dim] after output norm)."""
    B, T = tokens.shape
    pos = jnp.broadcast_to(jnp.arange(T), (B, T))
    mask = jnp.tril(jnp.ones((T, T), bool))[None]
    h = params["tok_embd"][tokens]
    taps = {}
    for l, lp in enumerate(params["layers"]):
        if l in cfg.tap_layers:
            taps[l] = h
        q, k, v = _layer_qkv(lp, cfg, h, pos)
        h = _layer_rest(lp, cfg, h, attention(q, k, v, mask))
    tap = jnp.concatenate([taps[l] for l in cfg.tap_layers], axis=-1)
    hn = rmsnorm(h, params["out_norm"], cfg.eps)
    logits = hn @ params["output"] if want_logits else None
    return logits, tap, hn


# ---- KV-cache decoding (fixed shapes) ----


def init_cache(cfg: Config, batch: int, n_ctx: int):
    """Per layer K and V [batch][n_kv_head][n_ctx][head_dim] (a list, so that a
    donated cache is updated in place)."""
    shape = (batch, cfg.n_kv_head, n_ctx, cfg.head_dim)
    return [(jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)) for _ in range(cfg.n_layer)]


def prefill_kv(params, cfg: Config, tokens):
    """Causal forward over prompts tokens [B, P] (right-padded; pad rows are
    harmless to earlier positions). Returns (k, v) [L, B, P, KV, hd], logits
    [B, P, vocab] and taps [B, P, 3 * dim]."""
    B, P = tokens.shape
    pos = jnp.broadcast_to(jnp.arange(P), (B, P))
    mask = jnp.tril(jnp.ones((P, P), bool))[None]
    h = params["tok_embd"][tokens]
    ks, vs, taps = [], [], {}
    for l, lp in enumerate(params["layers"]):
        if l in cfg.tap_layers:
            taps[l] = h
        q, k, v = _layer_qkv(lp, cfg, h, pos)
        ks.append(k)
        vs.append(v)
        h = _layer_rest(lp, cfg, h, attention(q, k, v, mask))
    logits = rmsnorm(h, params["out_norm"], cfg.eps) @ params["output"]
    tap = jnp.concatenate([taps[l] for l in cfg.tap_layers], axis=-1)
    return jnp.stack(ks), jnp.stack(vs), logits, tap


def decode_step(params, cfg: Config, cache, tokens, pos, window=None):
    """One token per sequence: tokens [B] at positions pos [B] (each row its own),
    attending to cache rows 0..pos-1 and to itself. Only the first `window`
    cache rows are read (static; every pos must be <= window). The cache is only
    read: returns (logits [B, vocab], k_new, v_new [L, B, KV, hd], taps
    [B, 3 * dim]); write k_new and v_new
    with cache_write (a separate, donating jit keeps the update in place)."""
    B = tokens.shape[0]
    S = cache[0][0].shape[2] if window is None else window
    H, KV, hd = cfg.n_head, cfg.n_kv_head, cfg.head_dim
    g = H // KV
    scale = np.float32(1.0 / np.sqrt(hd))
    h = params["tok_embd"][tokens][:, None, :]  # [B, 1, dim]
    p2 = pos[:, None]
    mask = jnp.arange(S)[None, :] < pos[:, None]  # [B, S]: earlier rows only
    ks, vs, taps = [], [], {}
    for l, (lp, (kc, vc)) in enumerate(zip(params["layers"], cache)):
        if l in cfg.tap_layers:
            taps[l] = h[:, 0]
        q, k, v = _layer_qkv(lp, cfg, h, p2)  # q [B, 1, H, hd], k/v [B, 1, KV, hd]
        qg = q.reshape(B, KV, g, hd)
        k1, v1 = k[:, 0], v[:, 0]  # [B, KV, hd]
        ks.append(k1)
        vs.append(v1)
        # multiply-and-reduce rather than a batched dot: XLA's CPU batched dot
        # of B * KV tiny products costs far more than the arithmetic
        s_old = jnp.sum(qg[:, :, :, None, :] * kc[:, :, None, :S, :], axis=-1) * scale
        s_old = jnp.where(mask[:, None, None, :], s_old, -1e30)
        s_new = jnp.sum(qg * k1[:, :, None, :], axis=-1)[..., None] * scale
        p = jax.nn.softmax(jnp.concatenate([s_old, s_new], axis=-1), axis=-1)
        o = jnp.sum(p[..., :S, None] * vc[:, :, None, :S, :], axis=-2) + p[..., S:] * v1[:, :, None, :]
        h = _layer_rest(lp, cfg, h, o.reshape(B, 1, H * hd))
    logits = rmsnorm(h[:, 0], params["out_norm"], cfg.eps) @ params["output"]
    tap = jnp.concatenate([taps[l] for l in cfg.tap_layers], axis=-1)
    return logits, jnp.stack(ks), jnp.stack(vs), tap


def top_probs(logits, k):
    """The k largest probabilities of softmax(logits) and their ids, over the last axis."""
    return jax.lax.top_k(jax.nn.softmax(logits.astype(jnp.float32), axis=-1), k)


def cache_write(cache, k_new, v_new, rows, pos):
    """Writes k_new/v_new [L, n, KV, hd] at cache rows (batch slots) rows [n],
    positions pos [n]. Use as jax.jit(cache_write, donate_argnums=0)."""
    return [
        (kc.at[rows, :, pos].set(k_new[l]), vc.at[rows, :, pos].set(v_new[l]))
        for l, (kc, vc) in enumerate(cache)
    ]
