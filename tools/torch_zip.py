"""torch_zip -- PyTorch's zip checkpoints (torch.save since torch 1.6, e.g. pytorch_model.bin) read with numpy
alone, and written by a minimal writer for tests.

    tensors = load_torch_zip("pytorch_model.bin")        # {name: numpy array}; bf16 comes back as f32
    save_torch_zip("pytorch_model.bin", {"w": np.ones((2, 3), np.float32)})   # the same layout torch.save writes

Reading runs a restricted unpickler: the only globals it resolves are collections.OrderedDict,
torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the torch.<Type>Storage classes below; anything else
(code, other classes) is refused with an error naming it, so loading a checkpoint cannot run code from it.

Layout (torch/serialization.py `_save` and caffe2/serialize/inline_container.cc, PyTorchStreamWriter, in the
torch 2.x versions; older 1.6-2.0 files differ only where noted, and this reader takes both):

  A zip archive, every record stored uncompressed, all records in one folder named after the file's stem
  ("pytorch_model/" for pytorch_model.bin; "archive/" when saved to a buffer). In write order:
    <stem>/data.pkl            pickle protocol 2 of the saved object (below)
    <stem>/byteorder           "little" or "big" (torch >= 2.1; absent means little)
    <stem>/data/<key>          the raw bytes of storage <key> (numel elements of its type), in sorted(key)
                               order of the string keys "0", "1", ... (so "10" precedes "2")
    <stem>/version             "3\\n" (torch 1.6-2.0 write it first, before data.pkl)
    <stem>/.data/serialization_id   40 decimal digits (torch >= 2.2; a hash, not checked)
  Each record's data starts at a multiple of 64 bytes from the start of the file: the local header carries an
  extra field "FB", a 2-byte length and that many 'Z' bytes of padding (the central directory has no extra
  field). torch >= 2.1 (miniz 3) sets general-purpose flags 0x0808 (UTF-8 names, data descriptor): the local
  header's CRC and sizes are 0 and a 16-byte data descriptor (PK\\x07\\x08, CRC-32, sizes) follows the data.
  The archive ends with a zip64 end-of-central-directory record and locator before the classic end record
  (miniz writes with MZ_ZIP_FLAG_WRITE_ZIP64).

  data.pkl: a state dict is an OrderedDict (REDUCE of collections.OrderedDict with no arguments, SETITEMS of
  its items, then BUILD with {"_metadata": ...} when the dict came from Module.state_dict()) or a plain dict
  (Hugging Face's save_pretrained). Each tensor is
      REDUCE torch._utils._rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad,
                                             backward_hooks=OrderedDict()[, metadata])
  where size and stride are tuples of element counts and storage is a persistent id (BINPERSID) of the tuple
      ("storage", torch.<Type>Storage, key, location, numel)
  naming record data/<key>. Tensors that share a storage (views, tied weights) name the same key with their
  own offset, size and stride. The pickler memoizes as CPython's does: each global, string and tuple once
  (BINPUT), repeats of the same object by BINGET (the constant strings "storage" and "cpu", a storage class, a
  shared storage's key).
"""
import collections
import io
import pickle
import struct
import zipfile
import zlib

import numpy as np


class TorchZipError(ValueError):
    """A checkpoint this module cannot read, with a message naming the file and the reason."""


# torch.<name> storage class -> (little-endian numpy dtype of its elements, bfloat16?)
STORAGE_TYPES = {
    "FloatStorage": ("<f4", False),
    "HalfStorage": ("<f2", False),
    "BFloat16Storage": ("<u2", True),  # kept as raw bits until the tensor is built, then widened to f32
    "DoubleStorage": ("<f8", False),
    "LongStorage": ("<i8", False),
    "IntStorage": ("<i4", False),
    "ShortStorage": ("<i2", False),
    "CharStorage": ("i1", False),
    "ByteStorage": ("u1", False),
    "BoolStorage": ("?", False),
}


def bf16_to_f32(bits):
    """bfloat16 bit patterns (uint16) -> float32: a bfloat16 is the upper half of a float32."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """float32 -> bfloat16 bit patterns, rounded to nearest even (as torch's .to(torch.bfloat16))."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, (u >> 16) | 0x40, rounded).astype(np.uint16)


# ---------------------------------------------------------------------------------------------------------
# Reading


class _StorageType:
    def __init__(self, name):
        self.name = name


class _Storage:
    """One data/<key> record as a flat array of its element type."""

    def __init__(self, key, name, array, bf16):
        self.key, self.name, self.array, self.bf16 = key, name, array, bf16


def _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None,
                       metadata=None):
    if not isinstance(storage, _Storage):
        raise TorchZipError(f"_rebuild_tensor_v2 got {type(storage).__name__} instead of a storage")
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    if len(size) != len(stride) or storage_offset < 0 or any(s < 0 for s in size + stride):
        raise TorchZipError(f"tensor over storage {storage.key} ({storage.name}): bad offset {storage_offset}, "
                            f"size {size} or stride {stride}")
    numel = storage.array.size
    if 0 not in size:
        last = storage_offset + sum((n - 1) * s for n, s in zip(size, stride))
        if last >= numel:
            raise TorchZipError(f"tensor of size {size}, stride {stride} at offset {storage_offset} reads element "
                                f"{last} of storage {storage.key} ({storage.name}), which has {numel}")
    item = storage.array.itemsize
    base = storage.array[storage_offset:] if numel else storage.array
    t = np.lib.stride_tricks.as_strided(base, shape=size, strides=tuple(s * item for s in stride)).copy()
    return bf16_to_f32(t) if storage.bf16 else t


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    return data


class _RestrictedUnpickler(pickle.Unpickler):
    GLOBALS = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def __init__(self, data, what, read_storage):
        super().__init__(io.BytesIO(data))
        self.what, self.read_storage, self.storages = what, read_storage, {}

    def find_class(self, module, name):
        if (module, name) in self.GLOBALS:
            return self.GLOBALS[(module, name)]
        if module == "torch" and name in STORAGE_TYPES:
            return _StorageType(name)
        raise TorchZipError(f"{self.what}: the pickle refers to {module}.{name}, which this reader does not load "
                            "(only tensors in dicts: torch._utils._rebuild_tensor_v2, torch.*Storage, "
                            "collections.OrderedDict)")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise TorchZipError(f"{self.what}: unknown persistent id {pid!r}")
        _, stype, key, _location, numel = pid
        if not isinstance(stype, _StorageType):
            raise TorchZipError(f"{self.what}: storage {key!r} has type {stype!r}, not a torch.*Storage")
        if key not in self.storages:
            self.storages[key] = self.read_storage(str(key), stype.name, int(numel))
        s = self.storages[key]
        if s.name != stype.name:
            raise TorchZipError(f"{self.what}: storage {key!r} is used both as {s.name} and as {stype.name}")
        return s


def load_torch_zip(path):
    """Reads a torch.save zip checkpoint whose object is a dict of tensors. Returns {name: numpy array} in file
    order (bf16 widened to f32, the other types as stored). TorchZipError for anything else."""
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic != b"PK\x03\x04":
        raise TorchZipError(f"{path}: not a zip archive (torch.save before 1.6, or saved with "
                            "_use_new_zipfile_serialization=False?); re-save it with a newer torch or as safetensors")
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise TorchZipError(f"{path}: bad zip archive: {e}") from None
    with zf:
        names = zf.namelist()
        pkl = [n for n in names if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pkl) != 1:
            raise TorchZipError(f"{path}: expected one <folder>/data.pkl record, found {len(pkl)} "
                                f"(records: {', '.join(names[:8])}{', ...' if len(names) > 8 else ''})")
        prefix = pkl[0][: -len("data.pkl")]
        order = "little"
        if prefix + "byteorder" in names:
            order = zf.read(prefix + "byteorder").decode("ascii", "replace").strip()
            if order not in ("little", "big"):
                raise TorchZipError(f"{path}: unknown byteorder record {order!r}")

        def read_storage(key, type_name, numel):
            rec = f"{prefix}data/{key}"
            if rec not in names:
                raise TorchZipError(f"{path}: storage {key} ({type_name}) has no record {rec}")
            dt, bf16 = STORAGE_TYPES[type_name]
            dt = np.dtype(dt)
            if order == "big":
                dt = dt.newbyteorder(">")
            raw = zf.read(rec)
            if len(raw) != numel * dt.itemsize:
                raise TorchZipError(f"{path}: record {rec} holds {len(raw)} bytes, but its {type_name} has {numel} "
                                    f"elements of {dt.itemsize} bytes")
            return _Storage(key, type_name, np.frombuffer(raw, dtype=dt).astype(dt.newbyteorder("<")), bf16)

        try:
            obj = _RestrictedUnpickler(zf.read(pkl[0]), f"{path}:{pkl[0]}", read_storage).load()
        except TorchZipError as e:
            msg = str(e)
            raise TorchZipError(msg if msg.startswith(str(path)) else f"{path}:{pkl[0]}: {msg}") from None
        except Exception as e:  # a malformed pickle: name it rather than show a traceback
            raise TorchZipError(f"{path}:{pkl[0]}: cannot unpickle: {type(e).__name__}: {e}") from None
    if not isinstance(obj, dict):
        raise TorchZipError(f"{path}: holds a {type(obj).__name__}, not a dict of tensors")
    bad = [k for k, v in obj.items() if not isinstance(k, str) or not isinstance(v, np.ndarray)]
    if bad:
        raise TorchZipError(f"{path}: entries that are not named tensors: {', '.join(map(repr, bad[:5]))}")
    return dict(obj)


# ---------------------------------------------------------------------------------------------------------
# Writing (for tests: checkpoints in the layout above without torch)


class _PickleWriter:
    """Protocol-2 opcodes, memoized as CPython's pickler does for the objects torch.save emits."""

    def __init__(self):
        self.out, self.memo = bytearray(b"\x80\x02"), {}  # PROTO 2

    def _put(self, ident):
        i = self.memo[ident] = len(self.memo)
        self.out += b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i)  # BINPUT / LONG_BINPUT

    def _get(self, ident):
        if ident not in self.memo:
            return False
        i = self.memo[ident]
        self.out += b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i)  # BINGET / LONG_BINGET
        return True

    def glob(self, module, name):
        if not self._get(("global", module, name)):
            self.out += b"c" + f"{module}\n{name}\n".encode()
            self._put(("global", module, name))

    def string(self, s, ident=None):
        """ident: the identity of a string object used more than once (None: a new object)."""
        if ident is not None and self._get(("str", ident)):
            return
        b = s.encode("utf-8")
        self.out += b"X" + struct.pack("<I", len(b)) + b  # BINUNICODE
        self._put(("str", ident) if ident is not None else ("obj", len(self.memo), "str"))

    def integer(self, v):
        if 0 <= v < 256:
            self.out += b"K" + bytes([v])  # BININT1
        elif 0 <= v < 65536:
            self.out += b"M" + struct.pack("<H", v)  # BININT2
        elif -(2**31) <= v < 2**31:
            self.out += b"J" + struct.pack("<i", v)  # BININT
        else:
            n = (v.bit_length() + 8) // 8
            self.out += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)  # LONG1

    def tuple_of(self, emit_items, n):
        if n == 0:
            self.out += b")"  # EMPTY_TUPLE, not memoized
            return
        if n > 3:
            self.out += b"("  # MARK
        emit_items()
        self.out += {1: b"\x85", 2: b"\x86", 3: b"\x87"}.get(n, b"t")  # TUPLE1..3 / TUPLE
        self._put(("obj", len(self.memo), "tuple"))

    def ints_tuple(self, values):
        self.tuple_of(lambda: [self.integer(v) for v in values], len(values))

    def new_object(self):
        self._put(("obj", len(self.memo), "obj"))

    def empty_ordered_dict(self):
        self.glob("collections", "OrderedDict")
        self.out += b")R"  # EMPTY_TUPLE, REDUCE
        self.new_object()


def _tensor_bytes(a, bf16):
    if bf16:
        return f32_to_bf16(a).tobytes(), "BFloat16Storage", 2
    kind = {np.dtype("float32"): "FloatStorage", np.dtype("float16"): "HalfStorage",
            np.dtype("float64"): "DoubleStorage", np.dtype("int64"): "LongStorage", np.dtype("int32"): "IntStorage",
            np.dtype("bool"): "BoolStorage", np.dtype("uint8"): "ByteStorage"}.get(a.dtype)
    if kind is None:
        raise TorchZipError(f"save_torch_zip: no torch storage type for {a.dtype}")
    return np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes(), kind, a.dtype.itemsize


def _zip_records(records, stem):
    """records: [(name, bytes)] -> the archive bytes, laid out as PyTorchStreamWriter (miniz 3) writes them."""
    out, central = bytearray(), bytearray()
    for name, data in records:
        full = f"{stem}/{name}".encode()
        ofs = len(out)
        start = ofs + 30 + len(full) + 4
        pad = (64 - start % 64) % 64
        extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
        crc = zlib.crc32(data)
        # local header: version needed 0 (stored), flags 0x0808 (UTF-8, data descriptor), method 0, time and
        # date 0, CRC and sizes 0 (they follow in the data descriptor)
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 0, 0x0808, 0, 0, 0, 0, 0, 0, len(full), len(extra))
        out += full + extra + data
        out += struct.pack("<IIII", 0x08074B50, crc, len(data), len(data))
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0, 0, 0x0808, 0, 0, 0, crc, len(data),
                               len(data), len(full), 0, 0, 0, 0, 0, ofs) + full
    cd_ofs, n = len(out), len(records)
    out += central
    z64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 0x002D, 0, 0, n, n, len(central), cd_ofs)
    out += struct.pack("<IIQI", 0x07064B50, 0, z64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, len(central), cd_ofs, 0)
    return bytes(out)


def torch_zip_pickle(tensors, ordered=True, bf16=(), transposed=(), shared=False):
    """The data.pkl bytes and the storages [(key, bytes)] that torch.save(tensors) would write.

    ordered: an OrderedDict (as Module.state_dict() returns, with its _metadata attribute) or a plain dict.
    bf16: names stored as BFloat16Storage (rounded from f32). transposed: 2-D names stored as the transposed
    view of a contiguous [cols][rows] tensor (stride (1, rows)), as a state dict holding w.t() would.
    shared: all tensors of one storage type share one storage, each at its own offset (as views of one
    buffer do)."""
    # First the storages: where each tensor's elements go.
    storages, shared_keys, refs = {}, {}, []  # key -> [kind, item size, bytearray]; kind -> shared key
    for name, a in tensors.items():
        a = np.asarray(a)
        if name in transposed:
            if a.ndim != 2:
                raise TorchZipError(f"save_torch_zip: {name} is not 2-D and cannot be stored transposed")
            data, kind, item = _tensor_bytes(np.ascontiguousarray(a.T), name in bf16)
            stride = (1, a.shape[0])
        else:
            data, kind, item = _tensor_bytes(a, name in bf16)
            stride = tuple(int(np.prod(a.shape[i + 1 :], dtype=np.int64)) for i in range(a.ndim))
        if shared and kind in shared_keys:
            key = shared_keys[kind]
        else:
            key = str(len(storages))
            storages[key] = [kind, item, bytearray()]
            shared_keys[kind] = key
        offset = len(storages[key][2]) // item
        storages[key][2] += data
        refs.append((name, a.shape, stride, key, offset))

    # Then the pickle, opcode by opcode.
    p = _PickleWriter()
    if ordered:
        p.empty_ordered_dict()
    else:
        p.out += b"}"  # EMPTY_DICT
        p.new_object()
    for start in range(0, len(refs), 1000):  # the pickler's batches of SETITEMS
        batch = refs[start : start + 1000]
        if len(batch) > 1:
            p.out += b"("  # MARK
        for name, shape, stride, key, offset in batch:
            kind, item, data = storages[key]
            p.string(name)
            p.glob("torch._utils", "_rebuild_tensor_v2")
            p.out += b"("  # MARK: the 6 arguments
            p.out += b"("  # MARK: the persistent id
            p.string("storage", ident="storage")
            p.glob("torch", kind)
            p.string(key, ident=("key", key))  # a shared storage's key is the same string object each time
            p.string("cpu", ident="cpu")
            p.integer(len(data) // item)
            p.out += b"t"  # TUPLE
            p.new_object()
            p.out += b"Q"  # BINPERSID
            p.integer(offset)
            p.ints_tuple(shape)
            p.ints_tuple(stride)
            p.out += b"\x89"  # NEWFALSE: requires_grad
            p.empty_ordered_dict()  # backward_hooks
            p.out += b"t"
            p.new_object()
            p.out += b"R"  # REDUCE
            p.new_object()
        p.out += b"u" if len(batch) > 1 else b"s"  # SETITEMS / SETITEM
    if ordered:  # BUILD {"_metadata": OrderedDict([("", {"version": 1})])}, as Module.state_dict() leaves
        p.out += b"}"
        p.new_object()
        p.string("_metadata")
        p.empty_ordered_dict()
        p.string("")
        p.out += b"}"
        p.new_object()
        p.string("version")
        p.integer(1)
        p.out += b"sss"  # SETITEM: into {"version"}, the OrderedDict, the state
        p.out += b"b"  # BUILD
    p.out += b"."  # STOP
    return bytes(p.out), [(k, bytes(storages[k][2])) for k in sorted(storages)]


def save_torch_zip(path, tensors, ordered=True, bf16=(), transposed=(), shared=False):
    """Writes {name: array} as torch.save would (layout in the module comment; options as torch_zip_pickle)."""
    pkl, storages = torch_zip_pickle(tensors, ordered, bf16, transposed, shared)
    records = [("data.pkl", pkl), ("byteorder", b"little")]
    records += [(f"data/{k}", data) for k, data in storages]
    records.append(("version", b"3\n"))
    sid = "%020d%020d" % (zlib.crc32("".join(n for n, _ in records).encode()),
                          zlib.crc32(b"".join(d for _, d in records)))
    records.append((".data/serialization_id", sid.encode()))
    stem = str(path).replace("\\", "/").rsplit("/", 1)[-1].rsplit(".", 1)[0] or "archive"
    with open(path, "wb") as f:
        f.write(_zip_records(records, stem))
