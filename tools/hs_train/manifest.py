"""Writes MANIFEST.json for a trained head folder under models/heads/: what data
it was trained on, the final training losses, the held-out figures, the target
check, the commands that reproduce it and the sha256 of every file.

  python -m hs_train.manifest --run RUN --data DIR --dest models/heads/NAME [--check CHECK.json]
                              [--cmd "..." ...] [--copy FILE ...]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import sys



def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="train.py output folder")
    ap.add_argument("--data", required=True, help="distill.py output folder(s) the run trained on, comma-separated")
    ap.add_argument("--dest", required=True)
    ap.add_argument("--check", help="check_target.py --json output")
    ap.add_argument("--cmd", action="append", default=[], help="a command of the recipe, in order")
    ap.add_argument("--copy", action="append", help="files of RUN to copy (default: head.gguf, model.safetensors, "
                    "config.json, d2t.npy)")
    ap.add_argument("--status", help="a status note (e.g. an interim checkpoint)")
    a = ap.parse_args(argv)

    from hs_train.distill import data_dirs, read_shards

    a.copy = a.copy or ["head.gguf", "model.safetensors", "config.json", "d2t.npy"]
    os.makedirs(a.dest, exist_ok=True)
    files = {}
    for name in a.copy:
        src = os.path.join(a.run, name)
        if os.path.exists(src):
            if os.path.getsize(src) >= 25 * 1024 * 1024:
                sys.exit(f"manifest: {src} is {os.path.getsize(src)} bytes (>= 25 MB); not copied")
            shutil.copyfile(src, os.path.join(a.dest, name))
            files[name] = {"bytes": os.path.getsize(src), "sha256": sha256(src)}
    dirs = data_dirs(a.data)
    meta, _ = read_shards(a.data)
    held = meta["heldout"].astype(bool)
    gen_meta = []
    for d in dirs:
        with open(os.path.join(d, "meta.json")) as f:
            gen_meta.append(json.load(f))
    data = {
        "generation": gen_meta[0] if len(dirs) == 1 else gen_meta,
        "sequences": int(len(meta["idx"])),
        "train_sequences": int((~held).sum()),
        "heldout_sequences": int(held.sum()),
        "train_answer_tokens": int(meta["answer_len"][~held].sum()),
        "heldout_answer_tokens": int(meta["answer_len"][held].sum()),
        "prompt_tokens": int(meta["prompt_len"].sum()),
        "stopped_at_end_token": int(meta["stop"].sum()),
        "split": "held out: prompt line index % 50 == 0 (stories260K: sequence index % 50 == 0)",
    }
    with open(os.path.join(a.run, "train.log")) as f:
        lines = f.read().splitlines()
    steps = [l for l in lines if re.search(r" step \d+/\d+ ", l)]
    last = steps[-1] if steps else ""
    info = [l for l in lines if " data: " in l or " packed: " in l]
    with open(os.path.join(a.run, "eval.json")) as f:
        ev = json.load(f)
    with open(os.path.join(a.run, "config.json")) as f:
        cfg = json.load(f)
    man = {
        "head": cfg,
        "files": files,
        "data": data,
        "training": {"log_data_lines": info[-2:], "final_step_line": last,
                     "args": _args(a.run)},
        "heldout_eval": ev,
        "target_check": json.load(open(a.check)) if a.check else None,
        "reproduce": a.cmd,
        "status": a.status,
        "conventions": {
            "d2t": "target id = draft id + d2t[draft id]; draft ids in increasing target-id order",
            "taps": "inputs of target layers target_layers (input of layer 0 = embedding output), concatenated "
                    "in that order: [3 * target_hidden_size]",
            "rope": "NEOX / rotate_half on q_proj/k_proj rows as stored (Hugging Face order), base rope_theta",
            "rows": "row j pairs taps at position j with token j+1 and predicts token j+2 (models/eagle3.h)",
        },
    }
    with open(os.path.join(a.dest, "MANIFEST.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(json.dumps({"files": files, "eval": {k: ev[k] for k in ("top1_acc_per_step", "expected_tau", "walked_tau") if k in ev}}, indent=1))
    return 0


def _args(run):
    import pickle

    p = os.path.join(run, "ckpt.pkl")
    if not os.path.exists(p):
        return None
    with open(p, "rb") as f:
        ck = pickle.load(f)
    args = dict(ck["args"])
    args["final_step"] = ck["step"]
    return args


if __name__ == "__main__":
    sys.exit(main())
