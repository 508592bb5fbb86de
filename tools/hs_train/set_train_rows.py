"""A copy of a head GGUF that records the rows it was trained on.

    python -m hs_train.set_train_rows HEAD.gguf OUT.gguf ROWS

Writes eagle3.train_row_length = ROWS (the trainer's --seq: the rows, prompt
and answer together, its sequences were packed into). The runtime's default
window over a prompt is three quarters of it (host/spec.h,
hs_spec_window_of). train.py records it in every head it exports; this is for
heads exported before it did. Tensors, their types and every other key are
kept: the file is read and written by eagle3_gguf (the converter's reader and
writer, with their checks), f16 matrices stay f16 bit for bit.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import eagle3_gguf  # noqa: E402
import gguf  # noqa: E402


def main(argv):
    ap = argparse.ArgumentParser(prog="python -m hs_train.set_train_rows", description=__doc__.split("\n")[0])
    ap.add_argument("head")
    ap.add_argument("out")
    ap.add_argument("rows", type=int, help="the rows of the training sequences (train.py's --seq)")
    a = ap.parse_args(argv)
    cfg, tensors = eagle3_gguf.read_eagle3_gguf_or_exit(a.head, "set_train_rows")
    # read_eagle3_gguf gives q8_0 matrices dequantized: only f16 and f32 files are copied exactly.
    types = {gguf.GGMLQuantizationType(t.tensor_type).name for t in gguf.GGUFReader(a.head).tensors
             if len(t.shape) == 2}
    if types not in ({"F16"}, {"F32"}):
        sys.exit(f"set_train_rows: {a.head}: matrices of types {', '.join(sorted(types))}: only files of f16 "
                 "or of f32 matrices are copied exactly")
    dtype = types.pop().lower()
    try:
        eagle3_gguf.write_eagle3_gguf(a.out, cfg, tensors, target_name=cfg["target_name"],
                                      target_layers=cfg["target_layers"], dtype=dtype, train_rows=a.rows,
                                      log=lambda _: None)
    except eagle3_gguf.Eagle3Error as e:
        sys.exit(f"set_train_rows: {e}")
    print(f"{a.out}: eagle3.train_row_length = {a.rows} (default head window {a.rows - a.rows // 4})")


if __name__ == "__main__":
    main(sys.argv[1:])
