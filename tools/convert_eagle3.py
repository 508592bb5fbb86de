#!/usr/bin/env python3
"""Converts a public EAGLE-3 checkpoint into a heterospec head file (GGUF, architecture "eagle3").

    python tools/convert_eagle3.py CKPT_DIR -o OUT.gguf (--target TARGET.gguf | --target-layers L) [--dtype f16|f32|q8_0]

CKPT_DIR holds config.json and the weights: model.safetensors, pytorch_model.bin (read without torch), or
either one sharded with its .index.json. EAGLE-3 checkpoints do not store which target layers they tap
(layers 2, L/2, L-3 of an L-layer target): give the target's GGUF (its layer count, general.name, hidden size
and vocabulary are read and checked against the head) or its layer count. Run it with the venv of
`bash tools/pyenv.sh convert` (numpy, gguf, safetensors). Exit status 1 with a message on any error.
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from eagle3_gguf import Eagle3Error, head_config, tap_layers, write_eagle3_gguf  # noqa: E402
from torch_zip import TorchZipError, bf16_to_f32, load_torch_zip  # noqa: E402


class ConvertError(Exception):
    pass


def load_safetensors(path):
    """{name: array} of a .safetensors file; BF16 (which numpy lacks) is read from the raw bytes and widened."""
    from safetensors import safe_open

    out, bf16 = {}, []
    try:
        with safe_open(path, framework="numpy") as f:
            for k in f.keys():
                if f.get_slice(k).get_dtype() == "BF16":
                    bf16.append(k)
                else:
                    out[k] = f.get_tensor(k)
    except Exception as e:  # the package's errors have no common base class
        raise ConvertError(f"{path}: cannot read: {e}") from None
    if bf16:
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            header = json.loads(fh.read(n))
            base = 8 + n
            for k in bf16:
                begin, end = header[k]["data_offsets"]
                fh.seek(base + begin)
                bits = np.frombuffer(fh.read(end - begin), dtype="<u2")
                out[k] = bf16_to_f32(bits).reshape(header[k]["shape"])
    return out


def load_weights(ckpt):
    """{name: array} from the checkpoint folder, and the file(s) it came from."""
    loaders = [("model.safetensors", load_safetensors), ("pytorch_model.bin", load_torch_zip)]
    for fname, load in loaders:
        path = os.path.join(ckpt, fname)
        if os.path.exists(path):
            return load(path), fname
    for fname, load in loaders:
        index = os.path.join(ckpt, fname + ".index.json")
        if os.path.exists(index):
            with open(index) as f:
                shards = sorted(set(json.load(f).get("weight_map", {}).values()))
            if not shards:
                raise ConvertError(f"{index}: no weight_map")
            out = {}
            for shard in shards:
                for k, v in load(os.path.join(ckpt, shard)).items():
                    if k in out:
                        raise ConvertError(f"{index}: tensor {k} is in more than one shard")
                    out[k] = v
            return out, f"{fname} ({len(shards)} shards)"
    raise ConvertError(f"{ckpt}: no model.safetensors or pytorch_model.bin (nor a sharded .index.json of either)")


def read_target(path):
    """(layer count, general.name or None, hidden size, vocabulary size or None) of a target GGUF."""
    import gguf

    try:
        r = gguf.GGUFReader(path)
    except Exception as e:
        raise ConvertError(f"{path}: not a readable GGUF file: {e}") from None

    def get(key):
        f = r.fields.get(key)
        return None if f is None else f.contents()

    arch = get("general.architecture")
    if not arch:
        raise ConvertError(f"{path}: no general.architecture")
    n_layer, dim = get(f"{arch}.block_count"), get(f"{arch}.embedding_length")
    if n_layer is None or dim is None:
        raise ConvertError(f"{path}: no {arch}.block_count or {arch}.embedding_length")
    vocab = get(f"{arch}.vocab_size")
    if vocab is None:
        emb = [t for t in r.tensors if t.name == "token_embd.weight"]
        vocab = int(emb[0].shape[1]) if emb else None  # GGUF dims are {cols, rows}
    return int(n_layer), get("general.name"), int(dim), vocab


def main(argv=None):
    ap = argparse.ArgumentParser(prog="convert_eagle3.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("ckpt", metavar="CKPT_DIR", help="folder with config.json and the weights")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.gguf", help="the head file to write")
    tgt = ap.add_mutually_exclusive_group(required=True)
    tgt.add_argument("--target", metavar="TARGET.gguf",
                     help="the target model: its layer count, name, hidden size and vocabulary are read")
    tgt.add_argument("--target-layers", type=int, metavar="L", help="the target's layer count (taps 2, L/2, L-3)")
    ap.add_argument("--dtype", choices=("f16", "f32", "q8_0"), default="f16",
                    help="type of the matrices (default f16; q8_0 about halves the head's bytes)")
    ap.add_argument("--train-rows", type=int, metavar="N",
                    help="the length of the sequences the head was trained on, when known: recorded as "
                         "eagle3.train_row_length (the runtime's default window over a prompt is 3/4 of it)")
    args = ap.parse_args(argv)

    try:
        cfg_path = os.path.join(args.ckpt, "config.json")
        if not os.path.isfile(cfg_path):
            raise ConvertError(f"{args.ckpt}: no config.json")
        with open(cfg_path) as f:
            try:
                cfg = json.load(f)
            except json.JSONDecodeError as e:
                raise ConvertError(f"{cfg_path}: not JSON: {e}") from None
        h = head_config(cfg, log=lambda _: None)  # write_eagle3_gguf reports its notes
        target_name, n_layer = None, args.target_layers
        if args.target:
            n_layer, target_name, dim, vocab = read_target(args.target)
            problems = []
            if dim != h["target_hidden"]:
                problems.append(f"its hidden size is {dim}, the head's target_hidden_size {h['target_hidden']}")
            if vocab is not None and vocab != h["vocab"]:
                problems.append(f"its vocabulary has {vocab} tokens, the head's vocab_size {h['vocab']}")
            if problems:
                raise ConvertError(f"{args.target} does not fit this head: {'; '.join(problems)}")
        taps = tap_layers(n_layer)
        tensors, source = load_weights(args.ckpt)
        written = write_eagle3_gguf(args.output, cfg, tensors, target_name=target_name, target_layers=n_layer,
                                    dtype=args.dtype, train_rows=args.train_rows)
    except (ConvertError, Eagle3Error, TorchZipError, OSError) as e:
        print(f"convert_eagle3: error: {e}", file=sys.stderr)
        return 1
    size = os.path.getsize(args.output)
    print(f"convert_eagle3: {args.ckpt}/{source} -> {args.output} ({size / 2**20:.2f} MiB, {len(written)} tensors, "
          f"matrices {args.dtype})")
    print(f"  hidden {h['hidden']}, {h['heads']} heads ({h['kv_heads']} KV) of {h['head_dim']}, ff {h['ff']}, "
          f"draft vocabulary {h['draft_vocab']} of {h['vocab']}, taps {taps} of a {n_layer}-layer target"
          + (f" ({target_name})" if target_name else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
