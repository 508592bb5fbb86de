"""eagle3_gguf -- EAGLE-3 draft heads as heterospec head files (GGUF, general.architecture "eagle3"; the format
is specified in models/eagle3.h and described in tools/HEADS.md).

    write_eagle3_gguf("head.gguf", cfg, tensors, d2t, target_name="stories260K", target_layers=5)
    cfg, tensors = read_eagle3_gguf("head.gguf")          # the same names and layout back

cfg is an EAGLE-3 config.json as a dict. tensors maps EAGLE-3 checkpoint names (fc.weight, midlayer.*,
norm.weight, lm_head.weight, optionally d2t, t2d and embed_tokens.weight) to numpy arrays in PyTorch layout
[out_features][in_features]; they are written as they are (no permutation of Q/K rows: the head rotates with
NEOX RoPE). Every shape is checked against cfg, t2d (when present) against d2t, and every problem is reported
at once in an Eagle3Error (a ValueError) before anything is written; the file appears only when complete.
"""
import os
import sys

import numpy as np

ARCH = "eagle3"
N_TAPS = 3
F16_MAX = 65504.0

# checkpoint name -> (GGUF name, matrix?); in the order of models/eagle3.h
TENSORS = {
    "fc.weight": ("fc.weight", True),
    "midlayer.input_layernorm.weight": ("blk.0.attn_norm.weight", False),
    "midlayer.hidden_norm.weight": ("blk.0.hidden_norm.weight", False),
    "midlayer.self_attn.q_proj.weight": ("blk.0.attn_q.weight", True),
    "midlayer.self_attn.k_proj.weight": ("blk.0.attn_k.weight", True),
    "midlayer.self_attn.v_proj.weight": ("blk.0.attn_v.weight", True),
    "midlayer.self_attn.o_proj.weight": ("blk.0.attn_output.weight", True),
    "midlayer.post_attention_layernorm.weight": ("blk.0.ffn_norm.weight", False),
    "midlayer.mlp.gate_proj.weight": ("blk.0.ffn_gate.weight", True),
    "midlayer.mlp.up_proj.weight": ("blk.0.ffn_up.weight", True),
    "midlayer.mlp.down_proj.weight": ("blk.0.ffn_down.weight", True),
    "norm.weight": ("output_norm.weight", False),
    "lm_head.weight": ("output.weight", True),
}
IGNORED = "embed_tokens.weight"  # EAGLE-3 heads share the target's embedding

# Hugging Face LlamaConfig's defaults, which EAGLE-3's code used when config.json leaves these out.
CONFIG_DEFAULTS = {"rope_theta": 10000.0, "max_position_embeddings": 2048}


class Eagle3Error(ValueError):
    """A checkpoint or head file that does not fit the eagle3 format; the message names every problem."""


def _note(msg):
    print(f"eagle3: {msg}", file=sys.stderr)


def head_config(cfg, log=_note):
    """Validated head dimensions from an EAGLE-3 config.json dict: hidden, heads, kv_heads, head_dim, ff, vocab,
    draft_vocab, target_hidden, eps, rope_theta, n_ctx."""
    errors = []

    def default(key):
        if key in CONFIG_DEFAULTS:
            log(f"config.json has no {key}; using {CONFIG_DEFAULTS[key]} (Hugging Face LlamaConfig's default)")
        return CONFIG_DEFAULTS.get(key)

    def integer(key, fallback=None):
        v = cfg.get(key)
        v = (fallback or default(key)) if v is None else v
        if v is None:
            errors.append(f"config: missing {key}")
            return 0
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            errors.append(f"config: {key} = {v!r} is not a positive integer")
            return 0
        return v

    def number(key):
        v = cfg.get(key)
        v = default(key) if v is None else v
        if v is None:
            errors.append(f"config: missing {key}")
            return 0.0
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
            errors.append(f"config: {key} = {v!r} is not a positive number")
            return 0.0
        return float(v)

    h = {
        "hidden": integer("hidden_size"),
        "heads": integer("num_attention_heads"),
        "kv_heads": integer("num_key_value_heads"),
        "ff": integer("intermediate_size"),
        "vocab": integer("vocab_size"),
        "draft_vocab": integer("draft_vocab_size"),
        "eps": number("rms_norm_eps"),
        "rope_theta": number("rope_theta"),
        "n_ctx": integer("max_position_embeddings"),
    }
    h["target_hidden"] = integer("target_hidden_size", h["hidden"] or None)
    if h["hidden"] and h["heads"]:
        if h["hidden"] % h["heads"]:
            errors.append(f"config: hidden_size {h['hidden']} is not a multiple of num_attention_heads {h['heads']}")
        h["head_dim"] = h["hidden"] // h["heads"]
        if cfg.get("head_dim") is not None and cfg["head_dim"] != h["head_dim"]:
            errors.append(f"config: head_dim {cfg['head_dim']!r} is not hidden_size / num_attention_heads = "
                          f"{h['head_dim']}; the eagle3 format has no key for another head size")
    else:
        h["head_dim"] = 0
    if h["heads"] and h["kv_heads"] and h["heads"] % h["kv_heads"]:
        errors.append(f"config: num_attention_heads {h['heads']} is not a multiple of num_key_value_heads "
                      f"{h['kv_heads']}")
    if h["vocab"] and h["draft_vocab"] and h["draft_vocab"] > h["vocab"]:
        errors.append(f"config: draft_vocab_size {h['draft_vocab']} exceeds vocab_size {h['vocab']}")
    if cfg.get("rope_scaling"):
        errors.append(f"config: rope_scaling {cfg['rope_scaling']!r} is not supported (the head rotates with plain "
                      "NEOX RoPE at rope_theta)")
    if cfg.get("hidden_act", "silu") != "silu":
        errors.append(f"config: hidden_act {cfg['hidden_act']!r} is not supported (SwiGLU with silu only)")
    if cfg.get("num_hidden_layers", 1) != 1:
        errors.append(f"config: num_hidden_layers {cfg['num_hidden_layers']!r}: an EAGLE-3 head has one layer")
    if errors:
        raise Eagle3Error("\n".join(errors))
    return h


def expected_shapes(h):
    """checkpoint name -> (shape, how the shape follows from the config)"""
    H, T, ff = h["hidden"], h["target_hidden"], h["ff"]
    q, kv = h["heads"] * h["head_dim"], h["kv_heads"] * h["head_dim"]
    qkv = "num_key_value_heads * head_dim, 2 * hidden_size"
    return {
        "fc.weight": ((H, 3 * T), "hidden_size, 3 * target_hidden_size"),
        "midlayer.input_layernorm.weight": ((H,), "hidden_size"),
        "midlayer.hidden_norm.weight": ((H,), "hidden_size"),
        "midlayer.self_attn.q_proj.weight": ((q, 2 * H), "num_attention_heads * head_dim, 2 * hidden_size"),
        "midlayer.self_attn.k_proj.weight": ((kv, 2 * H), qkv),
        "midlayer.self_attn.v_proj.weight": ((kv, 2 * H), qkv),
        "midlayer.self_attn.o_proj.weight": ((H, q), "hidden_size, num_attention_heads * head_dim"),
        "midlayer.post_attention_layernorm.weight": ((H,), "hidden_size"),
        "midlayer.mlp.gate_proj.weight": ((ff, H), "intermediate_size, hidden_size"),
        "midlayer.mlp.up_proj.weight": ((ff, H), "intermediate_size, hidden_size"),
        "midlayer.mlp.down_proj.weight": ((H, ff), "hidden_size, intermediate_size"),
        "norm.weight": ((H,), "hidden_size"),
        "lm_head.weight": ((h["draft_vocab"], H), "draft_vocab_size, hidden_size"),
    }


def tap_layers(target_layers):
    """The target layers whose inputs the head reads: EAGLE-3's 2, L/2, L-3 for a target of L layers (an int),
    or 3 layers given explicitly (a sequence)."""
    if target_layers is None:
        raise Eagle3Error("the target's layer count is needed (EAGLE-3 checkpoints do not store their tap layers, "
                          "which are the target's layers 2, L/2, L-3)")
    if isinstance(target_layers, (int, np.integer)) and not isinstance(target_layers, bool):
        n = int(target_layers)
        if n < 3:
            raise Eagle3Error(f"a target of {n} layers has no layers 2, L/2, L-3 to tap (EAGLE-3 needs at least 3)")
        return [2, n // 2, n - 3]
    taps = list(target_layers)
    if len(taps) != N_TAPS or any(isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 0
                                  for t in taps):
        raise Eagle3Error(f"target_layers {target_layers!r}: expected a layer count or {N_TAPS} layer indices")
    return [int(t) for t in taps]


def check_d2t(h, d2t, t2d):
    """d2t (draft id -> offset: target id = draft id + d2t[draft id]) as int32 [draft_vocab], checked against
    the vocabularies and, when given, against t2d (bool [vocab]: which target ids the draft vocabulary has)."""
    d2t = np.asarray(d2t)
    Vd, V = h["draft_vocab"], h["vocab"]
    if d2t.shape != (Vd,):
        raise Eagle3Error(f"d2t has shape {list(d2t.shape)}, expected [{Vd}] (draft_vocab_size)")
    if not np.issubdtype(d2t.dtype, np.integer):
        raise Eagle3Error(f"d2t has type {d2t.dtype}, expected integers (target id = draft id + d2t[draft id])")
    target = np.arange(Vd, dtype=np.int64) + d2t.astype(np.int64)
    bad = np.flatnonzero((target < 0) | (target >= V))
    if bad.size:
        i = int(bad[0])
        raise Eagle3Error(f"d2t maps {bad.size} draft ids outside the target vocabulary [0, {V}): draft id {i} -> "
                          f"{i} + d2t[{i}] = {int(target[i])}")
    uniq, counts = np.unique(target, return_counts=True)
    if uniq.size != Vd:
        t = int(uniq[np.argmax(counts > 1)])
        raise Eagle3Error(f"d2t maps draft ids {np.flatnonzero(target == t)[:4].tolist()} to the same target id {t}")
    if t2d is not None:
        t2d = np.asarray(t2d)
        if t2d.shape != (V,):
            raise Eagle3Error(f"t2d has shape {list(t2d.shape)}, expected [{V}] (vocab_size)")
        if t2d.dtype != np.bool_:
            if not np.issubdtype(t2d.dtype, np.integer) or not np.isin(t2d, (0, 1)).all():
                raise Eagle3Error(f"t2d has type {t2d.dtype} and values other than 0 and 1; expected a bool mask")
            t2d = t2d.astype(bool)
        missing = np.flatnonzero(~t2d[target])
        if missing.size:
            i = int(missing[0])
            raise Eagle3Error(f"t2d disagrees with d2t: draft id {i} maps to target id {int(target[i])} "
                              f"({i} + d2t[{i}]), but t2d[{int(target[i])}] is false ({missing.size} such draft ids)")
        n = int(t2d.sum())
        if n != Vd:
            extra = np.setdiff1d(np.flatnonzero(t2d), target)[:4].tolist()
            raise Eagle3Error(f"t2d disagrees with d2t: t2d marks {n} target ids, d2t maps {Vd} draft ids "
                              f"(marked but not mapped: {extra}...)")
    return d2t.astype(np.int32)


def check_tensors(h, tensors, log=_note):
    """The checkpoint's weights validated against the config: [(checkpoint name, float32 array)] in file order.
    Raises Eagle3Error listing every missing, misshapen, unknown or non-finite tensor."""
    shapes = expected_shapes(h)
    errors = []
    missing = [n for n in TENSORS if n not in tensors]
    if missing:
        errors.append(f"missing tensors: {', '.join(missing)}")
    unknown = sorted(n for n in tensors if n not in TENSORS and n not in ("d2t", "t2d", IGNORED))
    if unknown:
        errors.append(f"unknown tensors (not part of an EAGLE-3 head): {', '.join(unknown)}")
    if IGNORED in tensors:
        log(f"{IGNORED} {list(np.shape(tensors[IGNORED]))} is ignored: the head uses the target's token "
            "embedding (token_embd.weight), as EAGLE-3 does")
    out = []
    for name in TENSORS:
        if name not in tensors:
            continue
        a = np.asarray(tensors[name])
        shape, why = shapes[name]
        if a.shape != shape:
            errors.append(f"{name} has shape {list(a.shape)}, expected {list(shape)} ({why})")
            continue
        if not np.issubdtype(a.dtype, np.floating):
            errors.append(f"{name} has type {a.dtype}, expected floating point")
            continue
        a = a.astype(np.float32)
        bad = a.size - int(np.isfinite(a).sum())
        if bad:
            errors.append(f"{name} has {bad} values that are NaN or infinite")
            continue
        out.append((name, a))
    if errors:
        raise Eagle3Error("\n".join(errors))
    return out


def write_eagle3_gguf(path, cfg, tensors, d2t=None, target_name=None, target_layers=None, dtype="f16", *,
                      train_rows=None, log=_note):
    """Writes an eagle3 head file. d2t: the draft->target offsets (default: tensors["d2t"]); target_layers: the
    target's layer count (taps 2, L/2, L-3) or its 3 tap layers; target_name: the target GGUF's general.name;
    dtype: "f16", "f32" or "q8_0" for the matrices (norm vectors are always f32; q8_0 as llama.cpp's: blocks of
    32 int8 with an f16 scale, about half of f16's bytes); train_rows: the rows (positions) of the sequences
    the head was trained on, written as eagle3.train_row_length (None: not recorded; the runtime's default
    window over a prompt is three quarters of it). Returns [(GGUF name, type, shape)]."""
    import gguf

    if dtype not in ("f16", "f32", "q8_0"):
        raise Eagle3Error(f"dtype {dtype!r}: expected f16, f32 or q8_0")
    h = head_config(cfg, log)
    if train_rows is not None and (isinstance(train_rows, bool) or not isinstance(train_rows, (int, np.integer))
                                   or not 1 <= int(train_rows) <= h["n_ctx"]):
        raise Eagle3Error(f"train_rows {train_rows!r}: expected a whole number in [1, {h['n_ctx']}] "
                          "(max_position_embeddings)")
    taps = tap_layers(target_layers)
    weights = check_tensors(h, tensors, log)
    if d2t is None:
        if "d2t" not in tensors:
            raise Eagle3Error("missing tensors: d2t (draft id -> target id offsets)")
        d2t = tensors["d2t"]
    d2t = check_d2t(h, d2t, tensors.get("t2d"))

    converted = []  # (GGUF name, array, quantization type or None, logical shape)
    for name, a in weights:
        gname, matrix = TENSORS[name]
        qtype = None
        if matrix and dtype in ("f16", "q8_0"):
            over = int((np.abs(a) > F16_MAX).sum())
            if over:
                raise Eagle3Error(f"{name} has {over} values beyond f16's range (|x| > {F16_MAX:g}); "
                                  "convert with dtype f32")
        shape = list(a.shape)
        if matrix and dtype == "f16":
            a = a.astype(np.float16)
        elif matrix and dtype == "q8_0":
            qtype = gguf.GGMLQuantizationType.Q8_0
            if a.shape[-1] % 32:
                raise Eagle3Error(f"{name}: {a.shape[-1]} columns are not a multiple of q8_0's block of 32")
            a = gguf.quants.quantize(np.ascontiguousarray(a, dtype=np.float32), qtype)
        converted.append((gname, np.ascontiguousarray(a), qtype, shape))
    converted.append(("d2t", d2t, None, list(d2t.shape)))

    tmp = f"{path}.tmp{os.getpid()}"
    try:
        w = gguf.GGUFWriter(tmp, ARCH)
        w.add_name(f"EAGLE-3 head for {target_name}" if target_name else "EAGLE-3 head")
        w.add_uint32(f"{ARCH}.embedding_length", h["hidden"])
        w.add_uint32(f"{ARCH}.feed_forward_length", h["ff"])
        w.add_uint32(f"{ARCH}.attention.head_count", h["heads"])
        w.add_uint32(f"{ARCH}.attention.head_count_kv", h["kv_heads"])
        w.add_float32(f"{ARCH}.attention.layer_norm_rms_epsilon", h["eps"])
        w.add_float32(f"{ARCH}.rope.freq_base", h["rope_theta"])
        w.add_uint32(f"{ARCH}.context_length", h["n_ctx"])
        w.add_uint32(f"{ARCH}.vocab_size", h["vocab"])
        w.add_uint32(f"{ARCH}.draft_vocab_size", h["draft_vocab"])
        w.add_uint32(f"{ARCH}.target_hidden_size", h["target_hidden"])
        w.add_key_value(f"{ARCH}.target_layers", taps, gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.INT32)
        if target_name:
            w.add_string(f"{ARCH}.target_name", target_name)
        if train_rows is not None:
            w.add_uint32(f"{ARCH}.train_row_length", int(train_rows))
        for gname, a, qtype, _ in converted:
            if qtype is None:
                w.add_tensor(gname, a)
            else:
                w.add_tensor(gname, a, raw_dtype=qtype)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return [(g, "q8_0" if q is not None else {np.float16: "f16", np.float32: "f32", np.int32: "i32"}[a.dtype.type],
             shape) for g, a, q, shape in converted]


def read_eagle3_config(path):
    """A head file's cfg alone (read_eagle3_gguf's, without reading the tensors)."""
    import gguf

    return _config(path, gguf.GGUFReader(path).fields)


def read_eagle3_gguf(path):
    """(cfg, tensors) of a head file: cfg in config.json's names plus target_layers, target_name and
    train_row_length (each None when absent); tensors under their checkpoint names, as stored (f16 or f32
    [rows][cols]; q8_0 dequantized to f32; d2t int32)."""
    import gguf

    r = gguf.GGUFReader(path)
    cfg = _config(path, r.fields)
    by_gguf = {g: n for n, (g, _) in TENSORS.items()}
    by_gguf["d2t"] = "d2t"
    tensors = {}
    for t in r.tensors:
        if t.name not in by_gguf:
            raise Eagle3Error(f"{path}: unknown tensor {t.name}")
        if t.tensor_type == gguf.GGMLQuantizationType.Q8_0:
            tensors[by_gguf[t.name]] = gguf.quants.dequantize(t.data, t.tensor_type)
        else:
            tensors[by_gguf[t.name]] = np.array(t.data)
    return cfg, tensors


def read_eagle3_gguf_or_exit(path, prog):
    """read_eagle3_gguf for a command-line tool: exits naming prog and the problem when path is not a head file
    it can read."""
    try:
        return read_eagle3_gguf(path)
    except Eagle3Error as e:
        sys.exit(f"{prog}: {e}")
    except Exception as e:
        sys.exit(f"{prog}: {path}: not a readable GGUF file: {e}")


def _config(path, fields):
    """cfg (read_eagle3_gguf) from a head file's GGUF fields."""

    def get(key, required=True):
        f = fields.get(key)
        if f is None:
            if required:
                raise Eagle3Error(f"{path}: missing key {key}")
            return None
        return f.contents()

    if get("general.architecture") != ARCH:
        raise Eagle3Error(f"{path}: general.architecture is {get('general.architecture')!r}, not {ARCH!r}")
    p = ARCH + "."
    cfg = {
        "hidden_size": get(p + "embedding_length"),
        "intermediate_size": get(p + "feed_forward_length"),
        "num_attention_heads": get(p + "attention.head_count"),
        "num_key_value_heads": get(p + "attention.head_count_kv"),
        "rms_norm_eps": get(p + "attention.layer_norm_rms_epsilon"),
        "rope_theta": get(p + "rope.freq_base"),
        "max_position_embeddings": get(p + "context_length"),
        "vocab_size": get(p + "vocab_size"),
        "draft_vocab_size": get(p + "draft_vocab_size"),
        "target_hidden_size": get(p + "target_hidden_size"),
        "target_layers": list(get(p + "target_layers")),
        "target_name": get(p + "target_name", required=False),
        "train_row_length": get(p + "train_row_length", required=False),
    }
    cfg["head_dim"] = cfg["hidden_size"] // cfg["num_attention_heads"]
    return cfg
