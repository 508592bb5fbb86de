"""Tests of the EAGLE-3 head converter (tools/convert_eagle3.py, eagle3_gguf.py, torch_zip.py).

    cd tools/tests && "$(bash ../pyenv.sh convert | tail -n 1)" -m unittest -v test_convert_eagle3

Random checkpoints of a small EAGLE-3 layout are saved as model.safetensors and as pytorch_model.bin (torch.save's
zip format, written by torch_zip's own writer, whose pickle is checked byte for byte against CPython's pickler
fed objects that reduce as torch's do), converted, and read back.
"""
import collections
import contextlib
import io
import json
import os
import pickle
import struct
import subprocess
import sys
import tempfile
import types
import unittest
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = os.path.dirname(HERE)
sys.path.insert(0, TOOLS)
sys.path.insert(0, HERE)

import gguf  # noqa: E402
from safetensors.numpy import save_file  # noqa: E402

import convert_eagle3  # noqa: E402
import torch_zip  # noqa: E402
from eagle3_gguf import TENSORS, Eagle3Error, read_eagle3_config, read_eagle3_gguf, write_eagle3_gguf  # noqa: E402
from eagle3_ckpt import STORIES_CFG, random_tensors, write_checkpoint  # noqa: E402

CONVERT = os.path.join(TOOLS, "convert_eagle3.py")

# hidden 64, 8 heads, 4 KV heads, ff 172, vocabulary 512, draft vocabulary 256, and a wider target (96) so that
# fc's 3 * target_hidden_size differs from 3 * hidden_size
CFG = dict(STORIES_CFG, target_hidden_size=96, rms_norm_eps=1e-6, rope_theta=500000.0, max_position_embeddings=2048)
NORMS = [n for n, (_, matrix) in TENSORS.items() if not matrix]
MATRICES = [n for n, (_, matrix) in TENSORS.items() if matrix]


def run_cli(*args):
    """(exit status, stdout, stderr) of convert_eagle3.py's main() in this process, which is much quicker than a
    process per run (TestConvert.test_cli_process checks that main's status is the script's)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = convert_eagle3.main([str(a) for a in args])
        except SystemExit as e:  # argparse's usage errors
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


def quiet(fn, *args, **kwargs):
    """fn's result and what it wrote to stderr."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        return fn(*args, **kwargs), err.getvalue()


class TmpDirTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


# -------------------------------------------------------------------------------------------------------------
# torch_zip: the pickle and zip layout of torch.save, read back


@contextlib.contextmanager
def fake_torch():
    """Modules named torch and torch._utils whose objects pickle as torch's do (for CPython's pickler to emit the
    same GLOBALs); sys.modules is restored afterwards."""
    saved = {k: sys.modules.get(k) for k in ("torch", "torch._utils")}
    torch, utils = types.ModuleType("torch"), types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):
        raise AssertionError("never called")

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    for name in torch_zip.STORAGE_TYPES:
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    sys.modules.update({"torch": torch, "torch._utils": utils})
    try:
        yield torch
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v


class FakeStorage:
    def __init__(self, cls, numel):
        self.cls, self.numel = cls, numel


class FakeTensor:
    """Reduces as torch.Tensor.__reduce_ex__ does for a plain CPU tensor (torch/_tensor.py)."""

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __reduce_ex__(self, proto):
        rebuild = sys.modules["torch._utils"]._rebuild_tensor_v2
        return rebuild, (self.storage, self.offset, tuple(self.size), tuple(self.stride), False,
                         collections.OrderedDict())


def cpython_pickle(obj):
    """pickle.Pickler(protocol 2) with torch.save's persistent_id (torch/serialization.py _save)."""
    id_map = {}

    def persistent_id(o):
        if isinstance(o, FakeStorage):
            key = id_map.setdefault(id(o), str(len(id_map)))
            return ("storage", o.cls, key, "cpu", o.numel)
        return None

    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=2)
    p.persistent_id = persistent_id
    p.dump(obj)
    return buf.getvalue()


class TestTorchZip(TmpDirTest):
    def sample(self):
        rng = np.random.default_rng(1)
        return {
            "w": rng.standard_normal((3, 4)).astype(np.float32),
            "h": rng.standard_normal(5).astype(np.float16),
            "ids": np.arange(-3, 4, dtype=np.int64) * 1000003,
            "mask": rng.random(6) > 0.5,
            "b": rng.standard_normal((2, 3)).astype(np.float32),
            "v": rng.standard_normal(7).astype(np.float32),
        }

    def test_round_trip_every_layout(self):
        t = self.sample()
        layouts = [{}, {"ordered": False}, {"shared": True}, {"transposed": {"w", "b"}},
                   {"bf16": {"b", "v"}, "shared": True, "transposed": {"b"}}]
        for opts in layouts:
            with self.subTest(**{k: str(v) for k, v in opts.items()}):
                torch_zip.save_torch_zip(self.path("x.bin"), t, **opts)
                back = torch_zip.load_torch_zip(self.path("x.bin"))
                self.assertEqual(list(back), list(t))
                for k, a in t.items():
                    want = torch_zip.bf16_to_f32(torch_zip.f32_to_bf16(a)) if k in opts.get("bf16", ()) else a
                    self.assertEqual(back[k].dtype, want.dtype, k)
                    np.testing.assert_array_equal(back[k], want, err_msg=k)

    def test_bf16_conversion(self):
        x = np.array([1.0, -2.5, 1.00390625, 1.01171875, 3.0e38, np.inf], dtype=np.float32)
        bits = torch_zip.f32_to_bf16(x)
        # 1.00390625 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0); 1.01171875 to 1.015625
        np.testing.assert_array_equal(bits[:4], [0x3F80, 0xC020, 0x3F80, 0x3F82])
        np.testing.assert_array_equal(torch_zip.bf16_to_f32(bits)[:4], [1.0, -2.5, 1.0, 1.015625])
        self.assertTrue(np.isinf(torch_zip.bf16_to_f32(bits)[5]))

    def test_pickle_is_cpythons_for_torch_objects(self):
        """The writer's data.pkl equals what CPython's pickler writes for tensors reducing as torch's do: an
        OrderedDict with _metadata, a transposed view and two tensors sharing one storage at offsets 0 and 12."""
        with fake_torch() as torch:
            floats, longs = FakeStorage(torch.FloatStorage, 12 + 7), FakeStorage(torch.LongStorage, 7)
            d = collections.OrderedDict()
            d["a"] = FakeTensor(floats, 0, [3, 4], [1, 3])
            d["c"] = FakeTensor(longs, 0, [7], [1])
            d["e"] = FakeTensor(floats, 12, [7], [1])
            d._metadata = collections.OrderedDict([("", {"version": 1})])
            want = cpython_pickle(d)
            plain = {"x": FakeTensor(FakeStorage(torch.HalfStorage, 6), 0, [2, 3], [3, 1]),
                     "y": FakeTensor(FakeStorage(torch.BoolStorage, 4), 0, [4], [1])}
            want_plain = cpython_pickle(plain)
        got, _ = torch_zip.torch_zip_pickle({"a": np.zeros((3, 4), np.float32), "c": np.zeros(7, np.int64),
                                             "e": np.zeros(7, np.float32)}, transposed={"a"}, shared=True)
        self.assertEqual(got, want)
        got, _ = torch_zip.torch_zip_pickle({"x": np.zeros((2, 3), np.float16), "y": np.zeros(4, bool)},
                                            ordered=False)
        self.assertEqual(got, want_plain)

    def test_zip_layout(self):
        torch_zip.save_torch_zip(self.path("pytorch_model.bin"), self.sample())
        with open(self.path("pytorch_model.bin"), "rb") as f:
            raw = f.read()
        with zipfile.ZipFile(self.path("pytorch_model.bin")) as z:
            names = [i.filename for i in z.infolist()]
            self.assertEqual(names, ["pytorch_model/data.pkl", "pytorch_model/byteorder"]
                             + [f"pytorch_model/data/{k}" for k in sorted(str(i) for i in range(6))]
                             + ["pytorch_model/version", "pytorch_model/.data/serialization_id"])
            self.assertEqual(z.read("pytorch_model/version"), b"3\n")
            self.assertEqual(z.read("pytorch_model/byteorder"), b"little")
            for i in z.infolist():
                self.assertEqual((i.compress_type, i.flag_bits), (zipfile.ZIP_STORED, 0x0808), i.filename)
                name_len, extra_len = struct.unpack_from("<HH", raw, i.header_offset + 26)
                start = i.header_offset + 30 + name_len + extra_len
                self.assertEqual(start % 64, 0, f"{i.filename}: data at {start} is not 64-byte aligned")
                self.assertEqual(raw[start - extra_len : start - extra_len + 2], b"FB")
                self.assertEqual(raw[start + i.file_size : start + i.file_size + 4], b"PK\x07\x08")
        self.assertEqual(raw[-22 - 20 - 56 : -22 - 20 - 52], b"PK\x06\x06")  # zip64 end record, locator, end

    def test_refuses_other_globals(self):
        """A pickle naming anything but tensors and dicts is refused before that thing is resolved."""
        for obj, name in [({"a": os.getcwd}, os.getcwd.__module__ + ".getcwd"),
                          ({"a": collections.Counter()}, "collections.Counter")]:
            with self.subTest(name=name):
                with open(self.path("evil.bin"), "wb") as f:
                    f.write(torch_zip._zip_records([("data.pkl", pickle.dumps(obj, protocol=2)),
                                                    ("version", b"3\n")], "evil"))
                with self.assertRaisesRegex(torch_zip.TorchZipError, f"refers to {name}, which this reader"):
                    torch_zip.load_torch_zip(self.path("evil.bin"))

    def test_malformed_files(self):
        with open(self.path("legacy.bin"), "wb") as f:
            pickle.dump({"a": 1}, f)
        with self.assertRaisesRegex(torch_zip.TorchZipError, "not a zip archive"):
            torch_zip.load_torch_zip(self.path("legacy.bin"))

        pkl, storages = torch_zip.torch_zip_pickle({"a": np.zeros(4, np.float32)})
        short = [("data.pkl", pkl), ("data/0", storages[0][1][:12]), ("version", b"3\n")]
        with open(self.path("short.bin"), "wb") as f:
            f.write(torch_zip._zip_records(short, "short"))
        with self.assertRaisesRegex(torch_zip.TorchZipError, "data/0 holds 12 bytes, but its FloatStorage has 4"):
            torch_zip.load_torch_zip(self.path("short.bin"))

        with open(self.path("nodata.bin"), "wb") as f:
            f.write(torch_zip._zip_records([("data.pkl", pkl), ("version", b"3\n")], "nodata"))
        with self.assertRaisesRegex(torch_zip.TorchZipError, "storage 0 .FloatStorage. has no record"):
            torch_zip.load_torch_zip(self.path("nodata.bin"))

        # a view reaching past its storage: size 5 of a 4-element storage
        i = pkl.index(b"K\x04\x85")  # the size tuple (4,)
        bad = pkl[:i] + b"K\x05\x85" + pkl[i + 3 :]
        with open(self.path("oob.bin"), "wb") as f:
            f.write(torch_zip._zip_records([("data.pkl", bad), ("data/0", storages[0][1])], "oob"))
        with self.assertRaisesRegex(torch_zip.TorchZipError, r"oob.bin:oob/data.pkl: tensor of size \(5,\), stride "
                                    r"\(1,\) at offset 0 reads element 4 of storage 0 \(FloatStorage\), which has 4"):
            torch_zip.load_torch_zip(self.path("oob.bin"))

    def test_big_endian_records(self):
        pkl, _ = torch_zip.torch_zip_pickle({"a": np.zeros(3, np.float32)})
        a = np.array([1.5, -2.0, 3.25], dtype=">f4")
        with open(self.path("be.bin"), "wb") as f:
            f.write(torch_zip._zip_records([("data.pkl", pkl), ("byteorder", b"big"), ("data/0", a.tobytes())],
                                           "be"))
        np.testing.assert_array_equal(torch_zip.load_torch_zip(self.path("be.bin"))["a"], [1.5, -2.0, 3.25])


# -------------------------------------------------------------------------------------------------------------
# The converter


def write_target_gguf(path, n_layer=30, dim=96, vocab=512, name="tiny-target"):
    """A stand-in target GGUF: the keys and the embedding the converter reads."""
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_uint32("llama.block_count", n_layer)
    w.add_uint32("llama.embedding_length", dim)
    w.add_tensor("token_embd.weight", np.zeros((vocab, dim), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


class TestConvert(TmpDirTest):
    def setUp(self):
        super().setUp()
        self.tensors = random_tensors(CFG, seed=7)

    def ckpt(self, name="ckpt", fmt="safetensors", cfg=CFG, tensors=None, **opts):
        d = self.path(name)
        write_checkpoint(d, cfg, self.tensors if tensors is None else tensors, fmt, **opts)
        return d

    def convert(self, ckpt, *args, out="head.gguf"):
        rc, stdout, stderr = run_cli(ckpt, "-o", self.path(out), *args)
        self.assertEqual(rc, 0, stderr)
        return self.path(out), stdout, stderr

    def check_cfg(self, cfg, taps, name=None):
        for k in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
                  "draft_vocab_size", "max_position_embeddings", "target_hidden_size", "head_dim"):
            self.assertEqual(cfg[k], CFG[k], k)
        self.assertEqual(cfg["rms_norm_eps"], float(np.float32(CFG["rms_norm_eps"])))
        self.assertEqual(cfg["rope_theta"], CFG["rope_theta"])
        self.assertEqual(cfg["target_layers"], taps)
        self.assertEqual(cfg["target_name"], name)

    def test_f32_round_trip_is_bitwise_from_both_formats(self):
        outs = []
        for fmt in ("safetensors", "bin"):
            with self.subTest(fmt=fmt):
                out, stdout, _ = self.convert(self.ckpt(fmt, fmt), "--target-layers", 24, "--dtype", "f32",
                                              out=f"{fmt}.gguf")
                self.assertIn("taps [2, 12, 21] of a 24-layer target", stdout)
                cfg, back = read_eagle3_gguf(out)
                self.check_cfg(cfg, [2, 12, 21])
                self.assertEqual(sorted(back), sorted(list(TENSORS) + ["d2t"]))
                for name in TENSORS:
                    self.assertEqual(back[name].dtype, np.float32, name)
                    np.testing.assert_array_equal(back[name], self.tensors[name], err_msg=name)
                self.assertEqual(back["d2t"].dtype, np.int32)
                np.testing.assert_array_equal(back["d2t"], self.tensors["d2t"])
                with open(out, "rb") as f:
                    outs.append(f.read())
        self.assertEqual(outs[0], outs[1], "the two formats give different head files")

    def test_f16_matrices_norms_f32(self):
        out, _, _ = self.convert(self.ckpt(), "--target-layers", 24)
        _, back = read_eagle3_gguf(out)
        for name in MATRICES:
            self.assertEqual(back[name].dtype, np.float16, name)
            # f16 rounding of the f32 weights, nothing else
            np.testing.assert_array_equal(back[name], self.tensors[name].astype(np.float16), err_msg=name)
            rel = np.abs(back[name].astype(np.float32) - self.tensors[name]).max() / np.abs(self.tensors[name]).max()
            self.assertLess(rel, 2.0**-10, name)
        for name in NORMS:
            self.assertEqual(back[name].dtype, np.float32, name)
            np.testing.assert_array_equal(back[name], self.tensors[name], err_msg=name)

    def test_q8_0_matrices(self):
        """q8_0: each block of 32 weights in a row within half a step of its scale (max |x| / 127, kept as f16);
        norms stay f32 bitwise."""
        cfg = dict(CFG, intermediate_size=192)  # every row a whole number of blocks (CFG's 172 is refused)
        tensors = random_tensors(cfg, seed=11)
        ckpt = self.ckpt("q8", cfg=cfg, tensors=tensors)
        out, stdout, _ = self.convert(ckpt, "--target-layers", 24, "--dtype", "q8_0")
        self.assertIn("matrices q8_0", stdout)
        _, back = read_eagle3_gguf(out)
        for name in MATRICES:
            w = tensors[name]
            self.assertEqual(back[name].shape, w.shape, name)
            blocks = w.reshape(-1, 32)
            step = np.abs(blocks).max(axis=1, keepdims=True) / 127
            err = np.abs(back[name].reshape(-1, 32) - blocks)
            # half a step of rounding, plus the f16 rounding of the scale times up to 127 steps
            self.assertTrue((err <= step * (0.5 + 127 * 2.0**-11) + 1e-12).all(), name)
            self.assertGreater(err.max(), 0, name)  # really quantized, not stored as floats
        for name in NORMS:
            np.testing.assert_array_equal(back[name], tensors[name], err_msg=name)
        with open(out, "rb") as f:
            size = len(f.read())
        f16_out, _, _ = self.convert(ckpt, "--target-layers", 24, out="f16.gguf")
        with open(f16_out, "rb") as f:
            self.assertLess(size, 0.6 * len(f.read()))

    def test_bf16_f16_and_strided_bin(self):
        """bf16 storages come back as their f32 values; f16 checkpoints stay bitwise; views at offsets and with
        transposed strides read as the tensors they show."""
        t = dict(self.tensors)
        t["midlayer.mlp.up_proj.weight"] = t["midlayer.mlp.up_proj.weight"].astype(np.float16)
        bf16 = {"fc.weight", "lm_head.weight", "norm.weight"}
        d = self.ckpt(fmt="bin", tensors=t, bf16=bf16, shared=True, transposed={"midlayer.self_attn.q_proj.weight"})
        out, _, _ = self.convert(d, "--target-layers", 24, "--dtype", "f32")
        _, back = read_eagle3_gguf(out)
        for name in TENSORS:
            want = t[name].astype(np.float32)
            if name in bf16:
                want = torch_zip.bf16_to_f32(torch_zip.f32_to_bf16(want))
            np.testing.assert_array_equal(back[name], want, err_msg=name)

    def test_sharded_safetensors(self):
        d = self.path("sharded")
        os.makedirs(d)
        names = list(self.tensors)
        shards = {"model-00001-of-00002.safetensors": names[:7], "model-00002-of-00002.safetensors": names[7:]}
        for fname, keys in shards.items():
            save_file({k: self.tensors[k] for k in keys}, os.path.join(d, fname))
        with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": {k: fname for fname, keys in shards.items() for k in keys}}, f)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(CFG, f)
        out, stdout, _ = self.convert(d, "--target-layers", 24, "--dtype", "f32")
        self.assertIn("model.safetensors (2 shards)", stdout)
        _, back = read_eagle3_gguf(out)
        np.testing.assert_array_equal(back["lm_head.weight"], self.tensors["lm_head.weight"])
        save_file({"norm.weight": self.tensors["norm.weight"]}, os.path.join(d, "model-00001-of-00002.safetensors"))
        self.assert_fails(d, "model.safetensors.index.json: tensor norm.weight is in more than one shard")

    def test_bf16_safetensors(self):
        """numpy has no bfloat16: such tensors are read from the file's bytes (safetensors layout: 8-byte header
        length, JSON header, data) and widened to f32."""
        bf16 = {"fc.weight", "midlayer.hidden_norm.weight", "lm_head.weight"}
        header, blobs, at = {}, [], 0
        for k, a in self.tensors.items():
            dtype, data = {np.dtype("float32"): "F32", np.dtype("int64"): "I64", np.dtype("bool"): "BOOL"}[a.dtype], a
            if k in bf16:
                dtype, data = "BF16", torch_zip.f32_to_bf16(a)
            raw = np.ascontiguousarray(data).tobytes()
            header[k] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [at, at + len(raw)]}
            blobs.append(raw)
            at += len(raw)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        os.makedirs(self.path("bf16"))
        with open(self.path("bf16", "model.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
        with open(self.path("bf16", "config.json"), "w") as f:
            json.dump(CFG, f)
        out, _, _ = self.convert(self.path("bf16"), "--target-layers", 24, "--dtype", "f32")
        _, back = read_eagle3_gguf(out)
        for name in TENSORS:
            want = self.tensors[name]
            if name in bf16:
                want = torch_zip.bf16_to_f32(torch_zip.f32_to_bf16(want))
            np.testing.assert_array_equal(back[name], want, err_msg=name)

    def test_keys_types_and_shapes_as_eagle3_h(self):
        out, _, _ = self.convert(self.ckpt(), "--target-layers", 24)
        r = gguf.GGUFReader(out)
        V = gguf.GGUFValueType
        want = {
            "general.architecture": ([V.STRING], "eagle3"),
            "eagle3.embedding_length": ([V.UINT32], 64),
            "eagle3.feed_forward_length": ([V.UINT32], 172),
            "eagle3.attention.head_count": ([V.UINT32], 8),
            "eagle3.attention.head_count_kv": ([V.UINT32], 4),
            "eagle3.attention.layer_norm_rms_epsilon": ([V.FLOAT32], float(np.float32(1e-6))),
            "eagle3.rope.freq_base": ([V.FLOAT32], 500000.0),
            "eagle3.context_length": ([V.UINT32], 2048),
            "eagle3.vocab_size": ([V.UINT32], 512),
            "eagle3.draft_vocab_size": ([V.UINT32], 256),
            "eagle3.target_hidden_size": ([V.UINT32], 96),
            "eagle3.target_layers": ([V.ARRAY, V.INT32], [2, 12, 21]),
        }
        for key, (types_, value) in want.items():
            self.assertIn(key, r.fields)
            self.assertEqual(r.fields[key].types, types_, key)
            self.assertEqual(r.fields[key].contents(), value, key)
        self.assertNotIn("eagle3.target_name", r.fields)
        self.assertNotIn("eagle3.train_row_length", r.fields)  # unknown unless --train-rows says
        G = gguf.GGMLQuantizationType
        shapes = {  # GGUF ne = {cols, rows}
            "fc.weight": (G.F16, [288, 64]), "blk.0.attn_norm.weight": (G.F32, [64]),
            "blk.0.hidden_norm.weight": (G.F32, [64]), "blk.0.attn_q.weight": (G.F16, [128, 64]),
            "blk.0.attn_k.weight": (G.F16, [128, 32]), "blk.0.attn_v.weight": (G.F16, [128, 32]),
            "blk.0.attn_output.weight": (G.F16, [64, 64]), "blk.0.ffn_norm.weight": (G.F32, [64]),
            "blk.0.ffn_gate.weight": (G.F16, [64, 172]), "blk.0.ffn_up.weight": (G.F16, [64, 172]),
            "blk.0.ffn_down.weight": (G.F16, [172, 64]), "output_norm.weight": (G.F32, [64]),
            "output.weight": (G.F16, [64, 256]), "d2t": (G.I32, [256]),
        }
        self.assertEqual([t.name for t in r.tensors], list(shapes))
        for t in r.tensors:
            self.assertEqual((t.tensor_type, t.shape.tolist()), shapes[t.name], t.name)
        # each GGUF tensor holds its checkpoint tensor, rows in checkpoint order (the mapping spelled out here
        # rather than taken from eagle3_gguf.TENSORS, which read_eagle3_gguf also uses)
        source = {
            "fc.weight": "fc.weight", "blk.0.attn_norm.weight": "midlayer.input_layernorm.weight",
            "blk.0.hidden_norm.weight": "midlayer.hidden_norm.weight",
            "blk.0.attn_q.weight": "midlayer.self_attn.q_proj.weight",
            "blk.0.attn_k.weight": "midlayer.self_attn.k_proj.weight",
            "blk.0.attn_v.weight": "midlayer.self_attn.v_proj.weight",
            "blk.0.attn_output.weight": "midlayer.self_attn.o_proj.weight",
            "blk.0.ffn_norm.weight": "midlayer.post_attention_layernorm.weight",
            "blk.0.ffn_gate.weight": "midlayer.mlp.gate_proj.weight",
            "blk.0.ffn_up.weight": "midlayer.mlp.up_proj.weight",
            "blk.0.ffn_down.weight": "midlayer.mlp.down_proj.weight", "output_norm.weight": "norm.weight",
            "output.weight": "lm_head.weight", "d2t": "d2t",
        }
        for t in r.tensors:
            want = self.tensors[source[t.name]]
            np.testing.assert_array_equal(t.data, want.astype(t.data.dtype), err_msg=t.name)

    def test_target_gguf_gives_layers_and_name(self):
        write_target_gguf(self.path("target.gguf"), n_layer=30)
        out, stdout, _ = self.convert(self.ckpt(), "--target", self.path("target.gguf"))
        self.assertIn("taps [2, 15, 27] of a 30-layer target (tiny-target)", stdout)
        cfg, _ = read_eagle3_gguf(out)
        self.check_cfg(cfg, [2, 15, 27], "tiny-target")
        self.assertEqual(gguf.GGUFReader(out).fields["general.name"].contents(), "EAGLE-3 head for tiny-target")

    def test_embed_tokens_is_ignored_with_a_note(self):
        t = dict(self.tensors, **{"embed_tokens.weight": np.zeros((512, 64), np.float32)})
        out, _, stderr = self.convert(self.ckpt(tensors=t), "--target-layers", 24)
        self.assertIn("embed_tokens.weight [512, 64] is ignored", stderr)
        self.assertNotIn("embed_tokens.weight", read_eagle3_gguf(out)[1])

    # ---- errors: a clear message, exit status 1, no output file

    def assert_fails(self, ckpt, message, *args):
        out = self.path("fail.gguf")
        rc, stdout, stderr = run_cli(ckpt, "-o", out, *(args or ("--target-layers", 24)))
        self.assertEqual(rc, 1, f"exit status {rc}; stderr: {stderr}")
        self.assertRegex(stderr, message)
        self.assertTrue(stderr.startswith("convert_eagle3: error: "), stderr)
        self.assertNotIn("Traceback", stderr)
        self.assertFalse(os.path.exists(out), "a failed conversion left an output file")
        self.assertEqual(os.listdir(self.tmp).count("fail.gguf"), 0)
        return stderr

    def test_error_missing_tensor(self):
        for fmt in ("safetensors", "bin"):
            with self.subTest(fmt=fmt):
                t = {k: v for k, v in self.tensors.items() if k not in ("midlayer.mlp.up_proj.weight", "norm.weight")}
                self.assert_fails(self.ckpt(fmt, fmt, tensors=t),
                                  "missing tensors: midlayer.mlp.up_proj.weight, norm.weight")
        t = {k: v for k, v in self.tensors.items() if k != "d2t"}
        self.assert_fails(self.ckpt("nod2t", tensors=t), r"missing tensors: d2t \(draft id -> target id offsets\)")

    def test_error_wrong_shape(self):
        t = dict(self.tensors)
        t["midlayer.self_attn.k_proj.weight"] = np.zeros((32, 64), np.float32)
        t["fc.weight"] = np.zeros((64, 192), np.float32)  # 3 * hidden, not 3 * target_hidden
        t["midlayer.mlp.down_proj.weight"] = np.zeros((172, 64), np.float32)  # [in][out]: the right size
        err = self.assert_fails(self.ckpt(tensors=t), r"midlayer.self_attn.k_proj.weight has shape \[32, 64\], "
                                r"expected \[32, 128\] \(num_key_value_heads \* head_dim, 2 \* hidden_size\)")
        self.assertIn("fc.weight has shape [64, 192], expected [64, 288] (hidden_size, 3 * target_hidden_size)", err)
        self.assertIn("midlayer.mlp.down_proj.weight has shape [172, 64], expected [64, 172] (hidden_size, "
                      "intermediate_size)", err)
        t = dict(self.tensors, d2t=self.tensors["d2t"][:-1])
        self.assert_fails(self.ckpt("d2t", tensors=t), r"d2t has shape \[255\], expected \[256\] \(draft_vocab_size\)")

    def test_error_t2d_disagrees_with_d2t(self):
        t2d = self.tensors["t2d"].copy()
        first = int(np.flatnonzero(t2d)[0])
        t2d[first] = False  # draft id 0's target id is no longer marked
        self.assert_fails(self.ckpt("a", tensors=dict(self.tensors, t2d=t2d)),
                          rf"t2d disagrees with d2t: draft id 0 maps to target id {first} \(0 \+ d2t\[0\]\), "
                          rf"but t2d\[{first}\] is false")
        t2d = self.tensors["t2d"].copy()
        t2d[int(np.flatnonzero(~t2d)[0])] = True  # one target id too many
        self.assert_fails(self.ckpt("b", tensors=dict(self.tensors, t2d=t2d)),
                          "t2d disagrees with d2t: t2d marks 257 target ids, d2t maps 256 draft ids")
        d2t = self.tensors["d2t"].copy()
        d2t[-1] = 512  # beyond the vocabulary
        self.assert_fails(self.ckpt("c", tensors=dict(self.tensors, d2t=d2t)),
                          r"d2t maps 1 draft ids outside the target vocabulary \[0, 512\): draft id 255")
        d2t = self.tensors["d2t"].copy()
        d2t[1] = d2t[0] - 1  # draft ids 0 and 1 both map to the same target id
        self.assert_fails(self.ckpt("d", tensors=dict(self.tensors, d2t=d2t)),
                          r"d2t maps draft ids \[0, 1\] to the same target id")

    def test_error_unknown_tensor(self):
        t = dict(self.tensors, **{"fc.bias": np.zeros(64, np.float32),
                                  "midlayer.self_attn.rotary_emb.inv_freq": np.zeros(4, np.float32)})
        self.assert_fails(self.ckpt(tensors=t), r"unknown tensors \(not part of an EAGLE-3 head\): fc.bias, "
                          r"midlayer.self_attn.rotary_emb.inv_freq")

    def test_error_config_and_target(self):
        self.assert_fails(self.ckpt("a", cfg={k: v for k, v in CFG.items() if k != "intermediate_size"}),
                          "config: missing intermediate_size")
        self.assert_fails(self.ckpt("a2", cfg=dict(CFG, max_position_embeddings=2048.5)),
                          "config: max_position_embeddings = 2048.5 is not a positive integer")
        self.assert_fails(self.ckpt("b", cfg=dict(CFG, head_dim=16)),
                          "config: head_dim 16 is not hidden_size / num_attention_heads = 8")
        self.assert_fails(self.ckpt("c", cfg=dict(CFG, rope_scaling={"rope_type": "llama3", "factor": 8.0})),
                          "rope_scaling .* is not supported")
        d = self.ckpt("d")
        self.assert_fails(d, "a target of 2 layers has no layers 2, L/2, L-3", "--target-layers", 2)
        write_target_gguf(self.path("wide.gguf"), dim=128)
        self.assert_fails(d, "wide.gguf does not fit this head: its hidden size is 128, the head's "
                          "target_hidden_size 96", "--target", self.path("wide.gguf"))
        write_target_gguf(self.path("small.gguf"), vocab=500)
        self.assert_fails(d, "its vocabulary has 500 tokens, the head's vocab_size 512", "--target",
                          self.path("small.gguf"))
        self.assert_fails(d, "not a readable GGUF file", "--target", os.path.join(d, "config.json"))
        os.makedirs(self.path("empty"))
        self.assert_fails(self.path("empty"), "empty: no config.json")
        with open(self.path("empty", "config.json"), "w") as f:
            json.dump(CFG, f)
        self.assert_fails(self.path("empty"), "no model.safetensors or pytorch_model.bin")
        with open(self.path("empty", "pytorch_model.bin"), "wb") as f:
            pickle.dump({"fc.weight": 1}, f)
        self.assert_fails(self.path("empty"), "pytorch_model.bin: not a zip archive")

    def test_cli_process(self):
        """The script itself: exit status 0 with a summary, 1 with the error, 2 for a usage error."""
        d = self.ckpt()

        def cli(*args):
            return subprocess.run([sys.executable, CONVERT, d, *map(str, args)], capture_output=True, text=True)

        p = cli("-o", self.path("ok.gguf"), "--target-layers", 24)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("taps [2, 12, 21] of a 24-layer target", p.stdout)
        self.assertTrue(os.path.exists(self.path("ok.gguf")))
        p = cli("-o", self.path("bad.gguf"), "--target-layers", 1)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "convert_eagle3: error: a target of 1 layers has no layers 2, L/2, L-3 to tap "
                         "(EAGLE-3 needs at least 3)\n")
        p = cli("-o", self.path("x.gguf"))
        self.assertEqual(p.returncode, 2)
        self.assertIn("one of the arguments --target --target-layers is required", p.stderr)
        self.assertFalse(os.path.exists(self.path("bad.gguf")) or os.path.exists(self.path("x.gguf")))

    def test_library_errors(self):
        cases = [
            (dict(dtype="q4_0", target_layers=24), "dtype 'q4_0': expected f16, f32 or q8_0"),
            (dict(dtype="q8_0", target_layers=24), "down_proj.weight: 172 columns are not a multiple of q8_0's block"),
            (dict(target_layers=None), "the target's layer count is needed"),
            (dict(target_layers=[2, 3]), "expected a layer count or 3 layer indices"),
        ]
        for kwargs, message in cases:
            with self.subTest(message=message):
                with self.assertRaisesRegex(Eagle3Error, message):
                    write_eagle3_gguf(self.path("x.gguf"), CFG, self.tensors, **kwargs)
        big = dict(self.tensors, **{"lm_head.weight": self.tensors["lm_head.weight"] * 1e6})
        with self.assertRaisesRegex(Eagle3Error, "lm_head.weight has .* values beyond f16's range"):
            write_eagle3_gguf(self.path("x.gguf"), CFG, big, target_layers=24)
        nan = dict(self.tensors, **{"norm.weight": np.full(64, np.nan, np.float32)})
        with self.assertRaisesRegex(Eagle3Error, "norm.weight has 64 values that are NaN or infinite"):
            write_eagle3_gguf(self.path("x.gguf"), CFG, nan, target_layers=24)
        self.assertFalse(os.path.exists(self.path("x.gguf")))
        # explicit taps, d2t given apart from the tensors, and no t2d (optional)
        t = {k: v for k, v in self.tensors.items() if k not in ("d2t", "t2d")}
        (written, notes) = quiet(write_eagle3_gguf, self.path("y.gguf"), CFG, t, self.tensors["d2t"],
                                 target_layers=[1, 2, 3], dtype="f32")
        self.assertEqual(written[-1], ("d2t", "i32", [256]))
        self.assertEqual(read_eagle3_gguf(self.path("y.gguf"))[0]["target_layers"], [1, 2, 3])
        # config keys EAGLE-3's code took from LlamaConfig's defaults
        cfg = {k: v for k, v in CFG.items() if k not in ("rope_theta", "max_position_embeddings")}
        _, notes = quiet(write_eagle3_gguf, self.path("z.gguf"), cfg, self.tensors, target_layers=24)
        self.assertIn("config.json has no rope_theta; using 10000.0", notes)
        self.assertIn("config.json has no max_position_embeddings; using 2048", notes)
        got, _ = read_eagle3_gguf(self.path("z.gguf"))
        self.assertEqual((got["rope_theta"], got["max_position_embeddings"]), (10000.0, 2048))
        self.assertIsNone(got["train_row_length"])

    def test_train_rows(self):
        """eagle3.train_row_length: written as a u32 when given (the converter's --train-rows, the trainer's
        --seq), read back, refused outside [1, max_position_embeddings]; set_train_rows adds it to a head file
        and keeps every tensor bit for bit."""
        for bad in (0, -1, 2049, True, 1.5, "512"):
            with self.subTest(bad=bad):
                with self.assertRaisesRegex(Eagle3Error, "train_rows .*expected a whole number in \\[1, 2048\\]"):
                    write_eagle3_gguf(self.path("x.gguf"), CFG, self.tensors, target_layers=24, train_rows=bad)
        self.assertFalse(os.path.exists(self.path("x.gguf")))
        out, _, _ = self.convert(self.ckpt(), "--target-layers", 24, "--train-rows", 512)
        r = gguf.GGUFReader(out)
        self.assertEqual(r.fields["eagle3.train_row_length"].types, [gguf.GGUFValueType.UINT32])
        self.assertEqual(r.fields["eagle3.train_row_length"].contents(), 512)
        self.assertEqual(read_eagle3_gguf(out)[0]["train_row_length"], 512)
        self.assertEqual(read_eagle3_config(out), read_eagle3_gguf(out)[0])  # the cfg without the tensors
        rc, _, stderr = run_cli(self.ckpt(), "-o", self.path("bad.gguf"), "--target-layers", 24, "--train-rows", 4096)
        self.assertEqual(rc, 1)
        self.assertIn("train_rows 4096", stderr)
        # set_train_rows on a head without the key (f16 and f32 matrices), and its refusals
        tools = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for dtype in ("f16", "f32"):
            with self.subTest(dtype=dtype):
                src, dst = self.path(f"src-{dtype}.gguf"), self.path(f"dst-{dtype}.gguf")
                quiet(write_eagle3_gguf, src, CFG, self.tensors, target_layers=24, target_name="t", dtype=dtype)
                p = subprocess.run([sys.executable, "-m", "hs_train.set_train_rows", src, dst, "300"], cwd=tools,
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertIn("default head window 225", p.stdout)
                a, b = gguf.GGUFReader(src), gguf.GGUFReader(dst)
                self.assertEqual(b.fields["eagle3.train_row_length"].contents(), 300)
                self.assertEqual({k: f.contents() for k, f in a.fields.items() if not k.startswith("GGUF.")},
                                 {k: f.contents() for k, f in b.fields.items()
                                  if not k.startswith("GGUF.") and k != "eagle3.train_row_length"})
                self.assertEqual([(t.name, t.tensor_type) for t in a.tensors],
                                 [(t.name, t.tensor_type) for t in b.tensors])
                for ta, tb in zip(a.tensors, b.tensors):
                    self.assertEqual(ta.data.tobytes(), tb.data.tobytes(), ta.name)
        q8 = self.path("q8.gguf")
        cfg32 = dict(CFG, intermediate_size=192)
        quiet(write_eagle3_gguf, q8, cfg32, random_tensors(cfg32, seed=3), target_layers=24, dtype="q8_0")
        for args, message in (([q8, self.path("o.gguf"), "300"], "only files of f16 or of f32 matrices"),
                              ([self.path("src-f16.gguf"), self.path("o.gguf"), "0"], "train_rows 0"),
                              ([self.path("missing.gguf"), self.path("o.gguf"), "300"], "not a readable GGUF")):
            with self.subTest(args=args[0]):
                p = subprocess.run([sys.executable, "-m", "hs_train.set_train_rows", *args], cwd=tools,
                                   capture_output=True, text=True)
                self.assertEqual(p.returncode, 1, p.stderr)
                self.assertIn(message, p.stderr)
        self.assertFalse(os.path.exists(self.path("o.gguf")))


if __name__ == "__main__":
    unittest.main()
