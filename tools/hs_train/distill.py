"""Self-distillation data: the target answers training prompts greedily.

  python -m hs_train.distill gen --model M.gguf --hs heterospec --prompts prompts.jsonl --out DIR [--n-prompts N]
         [--min-prompt P0 --max-prompt P1]   (prompts of P0..P1 tokens; long ones in their own DIR)
  python -m hs_train.distill gen-stories --model stories260K.gguf --out DIR [--n-seqs N]   (openings sampled, then greedy)
  python -m hs_train.distill jobs --hs heterospec --model M.gguf --prompts prompts.jsonl --out JOBS
         [--min-prompt P0 --max-prompt P1]   (prompt ids for hs-oracle --distill, in gen's order)
  python -m hs_train.distill feats --model M.gguf --answers A.txt[.xz][,B...] --out DIR
         (features of hs-oracle --distill's answers, as gen writes them)
  python -m hs_train.distill pack-feats --answers A.txt[.xz][,B...] --feats F.hsf[,G.hsf] --out DIR
         [--missing LEFT.txt]   (the same shards from the features hs-oracle --distill --feats recorded while
         answering or --refeed computed; LEFT.txt: the answers still without them, hs-oracle --refeed's input)
  python -m hs_train.distill show --model M.gguf --out DIR [-n 3]      (decodes a few answers)

gen: prompts are tokenized by heterospec itself (`tokenize --chat --jsonl`, the
exact prompt `generate --chat` feeds), shuffled with a fixed seed (so any prefix
of the order is a representative subset), and answered greedily up to
--max-new tokens, stopping after the end-of-turn token (<|im_end|>, the GGUF's
EOS), which is kept as the answer's last token. Held-out split: every prompt
whose line index % 50 == 0 (never trained on; used for acceptance figures).
Decoding runs --batch sequences at once with a KV cache (continuous batching:
a finished slot takes the next prompt), jit-compiled for a few fixed shapes.

jobs + hs-oracle --distill + feats is the faster route (llama.cpp's CPU backend
decodes 128 sequences at once, about 3x the JAX decoder here): jobs writes the
prompts gen would answer, in gen's order ("IDX<TAB>id,..."); hs-oracle answers
them greedily into an answers file ("IDX<TAB>STOP<TAB>N_PROMPT<TAB>id,..."; a
compact text that can be kept, xz-compressed, and resumed); feats runs the
target in JAX over each prompt + answer (whole sequences, so positions see the
same prefix as during generation) and writes the shards below. The answers are
llama.cpp's greedy choices; feats logs how often they equal the JAX target's
argmax (the features and labels are always the JAX target's own).

Output in DIR: shard_NNNNN.npz (idx [n] prompt line index, heldout [n],
prompt_len [n], answer_len [n], stop [n] (1: end token, 0: length limit),
offsets [n+1], tokens [sum] = prompt + answer of each sequence; and the
features of every position but each sequence's last (len - 1 rows per
sequence, in order): taps [rows, 3 dim] f16 (the target's hidden states at
the inputs of its tap layers), top_p [rows, 32] f16 and top_id [rows, 32] i32
(the target's 32 most probable next tokens)), gen.log, and
meta.json. A restart skips the prompts already in shards (sequences in flight
at a kill are lost and redone; SIGTERM or --minutes drain them: no new prompt
starts, the running ones finish and are written).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np

HELDOUT_MOD = 50
TOP_K = 32  # target probabilities kept per position


def log(f, msg):
    line = time.strftime("%Y-%m-%d %H:%M:%S ") + msg
    print(line, flush=True)
    if f:
        f.write(line + "\n")
        f.flush()


def read_meta(out_dir):
    """meta.json of DIR ({} when there is none)."""
    path = os.path.join(out_dir, "meta.json")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def write_meta(out_dir, info):
    """meta.json of DIR: info over what is there (pack-feats and feats fill one DIR in turn)."""
    info = {**read_meta(out_dir), **info}
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(info, f, indent=1)


def is_heldout(idx):
    return np.asarray(idx) % HELDOUT_MOD == 0


def read_prompt_ids(path):
    """A prompt-ids file (tokenize --jsonl's output): one line of comma-separated ids per prompt."""
    with open(path) as f:
        return parse_prompt_ids(f.read())


def parse_prompt_ids(text):
    return [[int(x) for x in l.split(",")] for l in text.splitlines()]


def tokenize_prompts(hs, model, prompts, cache_path):
    if os.path.exists(cache_path):
        return read_prompt_ids(cache_path)
    env = dict(os.environ)
    env.setdefault("XDG_RUNTIME_DIR", "/tmp/runtime-%d" % os.getuid())
    out = subprocess.run(
        [hs, "tokenize", "-m", model, "--chat", "--jsonl", prompts], check=True, env=env, capture_output=True, text=True
    ).stdout
    tmp = cache_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(out)
    os.replace(tmp, cache_path)
    return parse_prompt_ids(out)


def data_dirs(arg):
    """The folders of a --data argument (comma-separated)."""
    return arg.split(",")


def shard_paths(dirs):
    """The shards of one folder or of comma-separated folders, folder by folder, each in order."""
    return [p for d in data_dirs(dirs) for p in sorted(glob.glob(os.path.join(d, "shard_*.npz")))]


def read_shards(out_dir):
    """All sequences in the shards of DIR (or DIR1,DIR2,..): dict of concatenated arrays plus a
    list of token arrays."""
    seqs, meta = [], {k: [] for k in ("idx", "heldout", "prompt_len", "answer_len", "stop")}
    for p in shard_paths(out_dir):
        z = np.load(p)
        off = z["offsets"]
        for i in range(len(z["idx"])):
            seqs.append(z["tokens"][off[i] : off[i + 1]])
        for k in meta:
            meta[k].append(z[k])
    meta = {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in meta.items()}
    return meta, seqs


def write_shard(out_dir, done):
    n_old = len(glob.glob(os.path.join(out_dir, "shard_*.npz")))
    path = os.path.join(out_dir, f"shard_{n_old:05d}.npz")
    toks = [np.asarray(d["tokens"], np.int32) for d in done]
    off = np.concatenate([[0], np.cumsum([len(t) for t in toks])]).astype(np.int64)
    tmp = path + ".tmp.npz"
    feats = {}
    if "feats" in done[0]:
        for k, j in (("taps", 0), ("top_p", 1), ("top_id", 2)):
            feats[k] = np.concatenate([d["feats"][j] for d in done])
    np.savez(
        tmp,
        **feats,
        idx=np.array([d["idx"] for d in done], np.int64),
        heldout=is_heldout([d["idx"] for d in done]),
        prompt_len=np.array([d["prompt_len"] for d in done], np.int32),
        answer_len=np.array([len(d["tokens"]) - d["prompt_len"] for d in done], np.int32),
        stop=np.array([d["stop"] for d in done], np.int8),
        offsets=off,
        tokens=np.concatenate(toks),
    )
    os.replace(tmp, path)
    return path


class ShardWriter:
    """Collects finished sequences and writes a shard every `size` of them (flush: the rest)."""

    def __init__(self, out, size, logf):
        self.out, self.size, self.logf, self.pending = out, size, logf, []

    def add(self, d):
        self.pending.append(d)
        if len(self.pending) >= self.size:
            self.flush()

    def flush(self):
        if self.pending:
            p = write_shard(self.out, self.pending)
            log(self.logf, f"wrote {p} ({len(self.pending)} sequences)")
            self.pending.clear()


class Decoder:
    """Continuous-batching greedy decoder over B slots with a KV cache of n_ctx rows."""

    def __init__(self, cfg, params, batch, n_ctx, window_step=None):
        # window_step: attend over the first rows only, in steps of this many (None: all n_ctx rows).
        # Measured on the 2-core machine (SmolLM2, B 64, 30 layers of attention alone): a 384-row
        # window of a 512-row cache took 0.95-1.2 s per step (XLA copies the strided slice), all
        # 512 rows 0.24-0.27 s; so the default reads the whole cache.
        import jax
        import jax.numpy as jnp

        from hs_train import target

        self.cfg, self.params, self.B, self.n_ctx, self.wstep = cfg, params, batch, n_ctx, window_step
        self.jnp = jnp
        self.cache = target.init_cache(cfg, batch, n_ctx)
        self._step = {}

        def step(p, cache, tok, pos, window):
            logits, k, v, taps = target.decode_step(p, cfg, cache, tok, pos, window)
            tp, ti = target.top_probs(logits, TOP_K)
            return jnp.argmax(logits, -1).astype(jnp.int32), k, v, taps.astype(jnp.float16), tp.astype(jnp.float16), ti

        self._step_fn = jax.jit(step, static_argnums=(4,))
        self._write = jax.jit(target.cache_write, donate_argnums=(0,))

        def prefill(p, cache, toks, slot, last):
            k, v, logits, taps = target.prefill_kv(p, cfg, toks[None])  # k/v [L, 1, P, KV, hd]
            new = []
            for l, (kc, vc) in enumerate(cache):
                kl = jnp.transpose(k[l], (0, 2, 1, 3))  # [1, KV, P, hd]
                vl = jnp.transpose(v[l], (0, 2, 1, 3))
                new.append(
                    (
                        jax.lax.dynamic_update_slice(kc, kl, (slot, 0, 0, 0)),
                        jax.lax.dynamic_update_slice(vc, vl, (slot, 0, 0, 0)),
                    )
                )
            tp, ti = target.top_probs(logits[0], TOP_K)
            feats = (taps[0].astype(jnp.float16), tp.astype(jnp.float16), ti)
            return jnp.argmax(logits[0, last]).astype(jnp.int32), new, feats

        self._prefill = jax.jit(prefill, donate_argnums=(1,))
        self.rows = jnp.arange(batch)

    def prefill(self, slot, prompt):
        P = len(prompt)
        Pb = -(-P // 64) * 64
        toks = np.zeros(Pb, np.int32)
        toks[:P] = prompt
        first, self.cache, feats = self._prefill(self.params, self.cache, self.jnp.asarray(toks), slot, P - 1)
        return int(first), [np.asarray(f)[:P] for f in feats]

    def step(self, tok, pos):
        """tok, pos: numpy [B]. Returns next tokens (numpy [B]) and the fed
        positions' features (taps [B, 3 dim] f16, top_p [B, K] f16, top_id [B, K])."""
        window = self.n_ctx
        if self.wstep:
            window = min(self.n_ctx, -(-(int(pos.max()) + 1) // self.wstep) * self.wstep)
        jt, jp = self.jnp.asarray(tok), self.jnp.asarray(pos)
        nxt, k, v, taps, tp, ti = self._step_fn(self.params, self.cache, jt, jp, window)
        self.cache = self._write(self.cache, k, v, self.rows, jp)
        return np.asarray(nxt), (np.asarray(taps), np.asarray(tp), np.asarray(ti))


def generate(dec, order, prompts, stop_ids, max_new, on_done, logf, log_every=50, drain=lambda: False):
    """Greedy answers for the prompt indices in order. Once drain() is
    true, no new prompt starts and the call returns when the running ones end."""
    B = dec.B
    slots = [None] * B  # per slot: dict(idx, tokens, prompt_len) or None
    tok = np.zeros(B, np.int32)
    pos = np.zeros(B, np.int32)
    queue = list(order)[::-1]
    n_tok = 0
    t0 = time.time()
    steps = 0

    def finish(s, stop):
        d = slots[s]
        feats = [np.concatenate(f) for f in zip(*d["feats"])]
        assert len(feats[0]) == len(d["tokens"]) - 1
        on_done({"idx": d["idx"], "tokens": d["tokens"], "prompt_len": d["prompt_len"], "stop": stop, "feats": feats})
        slots[s] = None

    def fill(s):
        nonlocal n_tok
        while queue and not drain():
            i = queue.pop()
            pr = prompts[i]
            first, feats = dec.prefill(s, pr)
            slots[s] = {"idx": i, "tokens": list(pr) + [first], "prompt_len": len(pr), "feats": [feats]}
            n_tok += 1
            if first in stop_ids or max_new == 1:
                finish(s, int(first in stop_ids))
                continue
            tok[s], pos[s] = first, len(pr)
            return
        tok[s], pos[s] = 0, 0

    for s in range(B):
        fill(s)
    while any(x is not None for x in slots):
        nxt, (taps, tp, ti) = dec.step(tok, pos)
        steps += 1
        for s in range(B):
            if slots[s] is None:
                continue
            t = int(nxt[s])
            slots[s]["tokens"].append(t)
            slots[s]["feats"].append((taps[s : s + 1], tp[s : s + 1], ti[s : s + 1]))
            n_tok += 1
            n_ans = len(slots[s]["tokens"]) - slots[s]["prompt_len"]
            if t in stop_ids or n_ans >= max_new:
                finish(s, int(t in stop_ids))
                fill(s)
            else:
                tok[s], pos[s] = t, pos[s] + 1
        if steps % log_every == 0:
            dt = time.time() - t0
            active = sum(x is not None for x in slots)
            log(logf, f"step {steps}: {n_tok} answer tokens in {dt:.0f} s ({n_tok / dt:.1f} tok/s), "
                f"{active}/{B} slots busy, {len(queue)} prompts queued")
    return n_tok


def cmd_gen(a):
    import jax

    from hs_train import target

    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "gen.log"), "a")
    with open(a.prompts) as f:
        n_lines = sum(1 for _ in f)
    prompts = tokenize_prompts(a.hs, a.model, a.prompts, os.path.join(a.out, "prompt_ids.txt"))
    assert len(prompts) == n_lines
    order = order_of(prompts, a.seed, a.min_prompt, a.max_prompt)
    sel = order[: a.n_prompts]
    meta, _ = read_shards(a.out)
    have = set(int(i) for i in meta["idx"])
    remaining = [i for i in sel if i not in have]
    cfg, params = target.load(a.model)
    stop_ids = {cfg.eos}
    info = {
        "model": os.path.abspath(a.model),
        "model_name": cfg.name,
        "prompts": os.path.abspath(a.prompts),
        "seed": a.seed,
        "min_prompt": a.min_prompt,
        "max_prompt": a.max_prompt,
        "max_new": a.max_new,
        "n_prompts": a.n_prompts,
        "heldout": f"line index % {HELDOUT_MOD} == 0",
        "stop_ids": sorted(stop_ids),
        "eligible_prompts": len(order),
    }
    write_meta(a.out, info)
    log(logf, f"gen: {len(sel)} prompts selected ({len(order)} of {n_lines} have {a.min_prompt}..{a.max_prompt} tokens), "
        f"{len(have)} done, {len(remaining)} remaining; batch {a.batch}; jax {jax.__version__} on {jax.devices()}")
    if not remaining:
        return 0
    dec = Decoder(cfg, target.to_device(params), a.batch, a.max_prompt + a.max_new)
    shards = ShardWriter(a.out, a.shard_size, logf)

    t0 = time.time()
    stop = {"sig": False}

    def on_term(signum, frame):
        stop["sig"] = True
        log(logf, "SIGTERM: finishing the running sequences, then writing the last shard")

    signal.signal(signal.SIGTERM, on_term)

    def drain():
        return stop["sig"] or (a.minutes > 0 and time.time() - t0 > a.minutes * 60)

    n = generate(dec, remaining, prompts, stop_ids, a.max_new, shards.add, logf, drain=drain)
    shards.flush()
    log(logf, f"gen done: {n} tokens in {time.time() - t0:.0f} s")
    return 0


def cmd_gen_stories(a):
    """stories260K (no chat template): each sequence opens with BOS and 4-32
    tokens sampled from the target at temperature 1 (its own seed), the
    "prompt", continued greedily (with features, as gen) up to --max-len tokens
    or EOS. Sequence i has idx i; held out: idx % 50 == 0."""
    import jax
    import jax.numpy as jnp

    from hs_train import target

    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "gen.log"), "a")
    cfg, params = target.load(a.model)
    params = target.to_device(params)
    write_meta(a.out, {"model": os.path.abspath(a.model), "model_name": cfg.name, "n_seqs": a.n_seqs, "seed": a.seed,
                       "opening": "BOS + 4..32 tokens sampled at temperature 1 (rng [seed, idx])",
                       "max_new": a.max_len, "heldout": f"sequence index % {HELDOUT_MOD} == 0",
                       "stop_ids": [cfg.eos]})
    meta, _ = read_shards(a.out)
    have = set(int(i) for i in meta["idx"])
    remaining = [i for i in range(a.n_seqs) if i not in have]
    log(logf, f"gen-stories: {a.n_seqs} sequences, {len(have)} done, {len(remaining)} remaining")
    if not remaining:
        return 0
    fwd = jax.jit(lambda p, t: target.forward(p, cfg, t)[0])
    prompts = {}
    for c in range(0, len(remaining), 256):
        ids = remaining[c : c + 256]
        toks = np.zeros((len(ids), 33), np.int32)
        toks[:, 0] = cfg.bos
        n_open = np.zeros(len(ids), np.int32)
        rngs = [np.random.default_rng([a.seed, i]) for i in ids]
        for r, g in enumerate(rngs):
            n_open[r] = g.integers(4, 33)
        for t in range(1, 33):
            logits = np.asarray(fwd(params, jnp.asarray(toks)))[:, t - 1].astype(np.float64)
            p = np.exp(logits - logits.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            for r, g in enumerate(rngs):
                if t <= n_open[r]:
                    toks[r, t] = g.choice(len(p[r]), p=p[r])
        for r, i in enumerate(ids):
            pr = toks[r, : 1 + n_open[r]].tolist()
            if cfg.eos in pr:  # an opening that already ended: keep up to EOS's predecessor
                pr = pr[: pr.index(cfg.eos)]
            prompts[i] = pr
    dec = Decoder(cfg, params, a.batch, 64 + a.max_len)
    shards = ShardWriter(a.out, a.shard_size, logf)

    t0 = time.time()
    n = generate(dec, remaining, prompts, {cfg.eos}, a.max_len, shards.add, logf, log_every=200)
    shards.flush()
    log(logf, f"gen-stories done: {n} tokens in {time.time() - t0:.0f} s")
    return 0


def gpt2_detok(vocab):
    """Byte-level BPE token strings -> bytes."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    dec = {chr(c): b for b, c in zip(bs, cs)}

    def f(ids):
        return b"".join(bytes(dec.get(ch, 63) for ch in vocab[i]) for i in ids).decode("utf-8", "replace")

    return f


def vocab_of(model):
    import gguf

    r = gguf.GGUFReader(model)
    return list(r.fields["tokenizer.ggml.tokens"].contents()), r.fields["tokenizer.ggml.model"].contents()


def cmd_show(a):
    meta, seqs = read_shards(a.out)
    vocab, kind = vocab_of(a.model)
    if kind == "gpt2":
        detok = gpt2_detok(vocab)
    else:
        def detok(ids):
            return "".join(vocab[i] for i in ids).replace("\u2581", " ")
    for i in range(min(a.n, len(seqs))):
        pl = int(meta["prompt_len"][i])
        print(f"--- idx {meta['idx'][i]} prompt {pl} answer {meta['answer_len'][i]} stop {meta['stop'][i]}")
        print(repr(detok(seqs[i][:pl])))
        print(repr(detok(seqs[i][pl:])))
        if a.ids:
            print(",".join(str(x) for x in seqs[i][pl:]))
    n_ans = int(meta["answer_len"].sum())
    print(f"{len(seqs)} sequences, {n_ans} answer tokens, {int(meta['heldout'].sum())} held out, "
          f"{int(meta['stop'].sum())} stopped at the end token")
    return 0


def order_of(prompts, seed, min_prompt, max_prompt):
    """Prompt line indices in gen's order: a fixed-seed permutation, kept when the prompt has
    min_prompt..max_prompt tokens."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(prompts))
    return [int(i) for i in order if min_prompt <= len(prompts[i]) <= max_prompt]


def cmd_jobs(a):
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    prompts = tokenize_prompts(a.hs, a.model, a.prompts, a.out + ".prompt_ids.txt")
    order = order_of(prompts, a.seed, a.min_prompt, a.max_prompt)
    if a.sources:  # the same order, restricted to prompts of these sources
        want = set(a.sources.split(","))
        with open(a.prompts) as f:
            src = [json.loads(line).get("source", "") for line in f]
        unknown = want - set(src)
        if unknown:
            sys.exit(f"distill jobs: no prompt of source(s) {', '.join(sorted(unknown))} in {a.prompts}")
        order = [i for i in order if src[i] in want]
    tmp = a.out + ".tmp"
    with open(tmp, "w") as f:
        for i in order:
            f.write(f"{i}\t{','.join(str(t) for t in prompts[i])}\n")
    os.replace(tmp, a.out)
    print(f"jobs: {len(order)} of {len(prompts)} prompts have {a.min_prompt}..{a.max_prompt} tokens -> {a.out}")
    return 0


def read_answers(paths):
    """Sequences of hs-oracle --distill answer files (comma-separated; .xz read as such), in file
    order; a later line of an index already read is skipped (a line cut by a kill ends its file). Returns
    dicts idx, stop, prompt_len, answer (the answer's ids)."""
    import lzma

    out, seen = [], set()
    for p in paths.split(","):
        opener = lzma.open if p.endswith(".xz") else open
        with opener(p, "rt") as f:
            for n, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    break  # cut by a kill
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 4:
                    sys.exit(f"distill: {p} line {n}: expected IDX, STOP, N_PROMPT and ids, tab-separated")
                idx, stop, n_prompt = int(parts[0]), int(parts[1]), int(parts[2])
                ids = [int(x) for x in parts[3].split(",")]
                if idx in seen:
                    continue
                seen.add(idx)
                out.append({"idx": idx, "stop": stop, "prompt_len": n_prompt, "answer": ids})
    return out


HSF_MAGIC = b"HSF1"


def read_hsf(path):
    """The records of an hs-oracle --feats file (tools/oracle/oracle.h, HSF1), one by one in file order: dicts idx,
    stop, prompt_len, tokens and feats [taps f16 [n-1, d3], top_p f16 [n-1, k], top_id int32 [n-1, k]], as
    feats computes them (views of the memory-mapped file, which can be several GB). A record cut short by a
    kill ends the file; anything else malformed is an error."""
    import mmap

    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    o = 0
    while o < len(buf):
        if len(buf) - o < 32:
            break  # cut by a kill
        if buf[o : o + 4] != HSF_MAGIC:
            sys.exit(f"distill: {path}: no HSF1 record at byte {o}")
        idx = int(np.frombuffer(buf, np.int64, 1, o + 4)[0])
        stop, n_prompt, n, d3, k = (int(x) for x in np.frombuffer(buf, np.int32, 5, o + 12))
        if not (0 < n_prompt < n and d3 > 0 and k > 0 and stop in (0, 1)):
            sys.exit(f"distill: {path}: record at byte {o} (idx {idx}): bad header")
        size = 32 + 4 * n + (n - 1) * (2 * d3 + 4 * k + 2 * k)
        if len(buf) - o < size:
            break
        q = o + 32
        toks = np.frombuffer(buf, np.int32, n, q).copy()
        q += 4 * n
        taps = np.frombuffer(buf, np.float16, (n - 1) * d3, q).reshape(n - 1, d3)
        q += 2 * (n - 1) * d3
        top_id = np.frombuffer(buf, np.int32, (n - 1) * k, q).reshape(n - 1, k)
        q += 4 * (n - 1) * k
        top_p = np.frombuffer(buf, np.float16, (n - 1) * k, q).reshape(n - 1, k)
        yield {"idx": idx, "stop": stop, "prompt_len": n_prompt, "tokens": toks, "feats": [taps, top_p, top_id]}
        o += size


def cmd_pack_feats(a):
    """Shards from hs-oracle --feats records, for the answers given (the committed files), skipping
    sequences already in the shards; feats then computes what is left."""
    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "gen.log"), "a")
    answers = {d["idx"]: d for d in read_answers(a.answers)}
    meta, _ = read_shards(a.out)
    have = set(int(i) for i in meta["idx"])
    shards = ShardWriter(a.out, a.shard_size, logf)
    n_new = n_skip = 0
    for path in a.feats.split(","):
        if not os.path.exists(path):
            log(logf, f"pack-feats: no {path}")
            continue
        for r in read_hsf(path):
            d = answers.get(r["idx"])
            if r["idx"] in have or d is None:
                continue
            if list(r["tokens"][r["prompt_len"] :]) != d["answer"] or r["prompt_len"] != d["prompt_len"]:
                n_skip += 1  # another run's answer to the same prompt
                continue
            have.add(r["idx"])
            shards.add(r)
            n_new += 1
    shards.flush()
    if n_new:
        before = read_meta(a.out).get("oracle_feats", {}).get("sequences", 0)
        write_meta(a.out, {"oracle_feats": {
            "generator": "hs-oracle --distill --feats (llama.cpp CPU backend: its taps and top 32)",
            "files": [os.path.abspath(p) for p in a.feats.split(",")],
            "sequences": before + n_new}})
    log(logf, f"pack-feats: {n_new} sequences with hs-oracle's features; {n_skip} records of other answers "
        f"skipped; {len(have)} sequences in shards, {len(answers)} answers")
    if a.missing:
        # the answers still without features, as answer-file lines (hs-oracle --refeed's input)
        left = [d for i, d in answers.items() if i not in have]
        with open(a.missing + ".tmp", "w") as f:
            for d in left:
                f.write(f"{d['idx']}\t{d['stop']}\t{d['prompt_len']}\t{','.join(map(str, d['answer']))}\n")
        os.replace(a.missing + ".tmp", a.missing)
        log(logf, f"pack-feats: {len(left)} answers without features -> {a.missing}")
    return 0


def cmd_feats(a):
    import jax
    import jax.numpy as jnp

    from hs_train import target

    os.makedirs(a.out, exist_ok=True)
    logf = open(os.path.join(a.out, "gen.log"), "a")
    answers = read_answers(a.answers)
    prompts = read_prompt_ids(a.prompt_ids)
    meta, _ = read_shards(a.out)
    have = set(int(i) for i in meta["idx"])
    new = [d for d in answers if d["idx"] not in have]  # answers without features yet
    for d in new:
        pr = prompts[d["idx"]]
        if len(pr) != d["prompt_len"]:
            sys.exit(f"distill: answer {d['idx']}: prompt of {d['prompt_len']} tokens, but {a.prompt_ids} "
                     f"line {d['idx']} has {len(pr)} (another tokenizer or prompt file?)")
        d["tokens"] = pr + d["answer"]
    cfg, params = target.load(a.model)
    info = {
        "model": os.path.abspath(a.model),
        "model_name": cfg.name,
        "answers": a.answers,
        "prompt_ids": os.path.abspath(a.prompt_ids),
        "generator": "hs-oracle --distill (llama.cpp CPU backend, greedy)",
        "heldout": f"line index % {HELDOUT_MOD} == 0",
        "stop_ids": [cfg.eos],
    }
    write_meta(a.out, info)
    log(logf, f"feats: {len(answers)} answers, {len(have)} already in shards, {len(new)} without features; "
        f"jax {jax.__version__} on {jax.devices()}")
    if not new:
        return 0
    params = target.to_device(params)

    def feats(p, toks):
        logits, taps, _ = target.forward(p, cfg, toks)
        tp, ti = target.top_probs(logits, TOP_K)
        return taps.astype(jnp.float16), tp.astype(jnp.float16), ti

    fn = jax.jit(feats)
    shards = ShardWriter(a.out, a.shard_size, logf)
    # Similar lengths together (fewer padded positions), in fixed buckets of 64 (few compiled shapes).
    new.sort(key=lambda d: len(d["tokens"]))
    t0, n_tok, agree, n_ans = time.time(), 0, 0, 0
    i = 0
    while i < len(new):
        T = -(-len(new[i]["tokens"]) // 64) * 64
        B = max(1, a.batch_tokens // T)
        group = [d for d in new[i : i + B] if len(d["tokens"]) <= T]
        i += len(group)
        toks = np.zeros((B, T), np.int32)
        for r, d in enumerate(group):
            toks[r, : len(d["tokens"])] = d["tokens"]
        taps, tp, ti = (np.asarray(x) for x in fn(params, jnp.asarray(toks)))
        for r, d in enumerate(group):
            m = len(d["tokens"]) - 1
            pl = d["prompt_len"]
            agree += int((ti[r, pl - 1 : m, 0] == np.asarray(d["tokens"][pl:])).sum())
            n_ans += m - pl + 1
            n_tok += m + 1
            shards.add({"idx": d["idx"], "tokens": d["tokens"], "prompt_len": pl, "stop": d["stop"],
                        "feats": [taps[r, :m], tp[r, :m], ti[r, :m]]})
        dt = time.time() - t0
        log(logf, f"feats: {i}/{len(new)} sequences, {n_tok} tokens in {dt:.0f} s ({n_tok / dt:.0f} tok/s); "
            f"answer tokens equal to the JAX target's argmax: {agree}/{n_ans} ({agree / max(n_ans, 1):.4f})")
    shards.flush()
    return 0


def cmd_heldout_set(a):
    """The held-out training prompts (line index % 50 == 0, never trained on) as a bench-spec question set,
    DIR/SET/question.jsonl in EAGLE's format (with --by-source, a set per prompt source): heterospec bench-spec
    --data DIR --sets SET measures on the device the acceptance that train's held-out evaluation predicts, which
    tells a head that learned too little from one the runtime computes differently, and both from prompts unlike
    the training data (the benchmark sets)."""
    sets = {}  # set name -> question lines
    with open(a.prompts) as f:
        for idx, line in enumerate(f):
            if not is_heldout(idx):
                continue
            p = json.loads(line)
            src = p.get("source", "")
            name = src if a.by_source else a.set
            if len(p["prompt"]) > a.max_chars or len(sets.setdefault(name, [])) >= a.n:
                continue
            sets[name].append(json.dumps({"question_id": idx, "category": src, "turns": [p["prompt"]]}))
    for name, lines in sorted(sets.items()):
        if not lines:
            continue
        os.makedirs(os.path.join(a.out, name), exist_ok=True)
        with open(os.path.join(a.out, name, "question.jsonl"), "w") as o:
            o.write("".join(x + "\n" for x in lines))
        print(f"heldout-set: {len(lines)} held-out prompts -> {a.out}/{name}/question.jsonl")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--model", required=True)
    g.add_argument("--hs", required=True, help="heterospec binary (for tokenize)")
    g.add_argument("--prompts", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--n-prompts", type=int, default=4000)
    g.add_argument("--min-prompt", type=int, default=1, help="fewest prompt tokens (chat template included)")
    g.add_argument("--max-prompt", type=int, default=256, help="most prompt tokens (the KV cache holds "
                   "max-prompt + max-new rows)")
    g.add_argument("--max-new", type=int, default=256)
    g.add_argument("--batch", type=int, default=64)
    g.add_argument("--shard-size", type=int, default=128)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--minutes", type=float, default=0, help="start no new prompt after this long (0: no limit)")
    s = sub.add_parser("gen-stories")
    s.add_argument("--model", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--n-seqs", type=int, default=4096)
    s.add_argument("--max-len", type=int, default=256, help="most answer tokens")
    s.add_argument("--batch", type=int, default=128)
    s.add_argument("--shard-size", type=int, default=512)
    s.add_argument("--seed", type=int, default=0)
    j = sub.add_parser("jobs")
    j.add_argument("--model", required=True)
    j.add_argument("--hs", required=True, help="heterospec binary (for tokenize)")
    j.add_argument("--prompts", required=True)
    j.add_argument("--out", required=True, help="jobs file for hs-oracle --distill")
    j.add_argument("--min-prompt", type=int, default=1)
    j.add_argument("--max-prompt", type=int, default=256)
    j.add_argument("--seed", type=int, default=0)
    j.add_argument("--sources", help="only prompts of these sources (comma-separated), in the same order")
    e = sub.add_parser("feats")
    e.add_argument("--model", required=True)
    e.add_argument("--answers", required=True,
                   help="hs-oracle --distill answer files, comma-separated (.xz too)")
    e.add_argument("--prompt-ids", required=True,
                   help="the prompts' ids, a line per prompt (jobs writes JOBS.prompt_ids.txt)")
    e.add_argument("--out", required=True)
    e.add_argument("--batch-tokens", type=int, default=4096, help="positions per forward pass")
    e.add_argument("--shard-size", type=int, default=256)
    k = sub.add_parser("pack-feats")
    k.add_argument("--answers", required=True, help="the answer files whose sequences get shards, comma-separated")
    k.add_argument("--feats", required=True, help="hs-oracle --feats files, comma-separated (missing: skipped)")
    k.add_argument("--out", required=True)
    k.add_argument("--shard-size", type=int, default=256)
    k.add_argument("--missing", help="write the answers that still have no shard here (answer-file lines)")
    w = sub.add_parser("show")
    w.add_argument("--model", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("-n", type=int, default=3)
    w.add_argument("--ids", action="store_true")
    h = sub.add_parser("heldout-set")
    h.add_argument("--prompts", required=True, help="the training prompts (prompts.jsonl)")
    h.add_argument("--out", required=True, help="folder for bench-spec --data")
    h.add_argument("--set", default="heldout", help="the set's name (its subfolder)")
    h.add_argument("-n", type=int, default=20, help="the first N held-out prompts in file order (per set)")
    h.add_argument("--by-source", action="store_true", help="a set per prompt source, named after it")
    h.add_argument("--max-chars", type=int, default=600, help="skip longer prompts (the articles)")
    a = ap.parse_args(argv)
    if "/data/bench" in os.path.abspath(getattr(a, "prompts", "") or ""):
        sys.exit("distill: refusing to use benchmark prompts for training data")
    cmds = {"gen": cmd_gen, "gen-stories": cmd_gen_stories, "jobs": cmd_jobs, "feats": cmd_feats,
            "pack-feats": cmd_pack_feats, "show": cmd_show, "heldout-set": cmd_heldout_set}
    return cmds[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
