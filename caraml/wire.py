"""Wire format and writing it: one versioned header frame describing the object tree, then zero-copy buffers.

Frame 0 is ``b"CRM"`` + version byte + kind byte + pad byte + u16 count of the frames that follow
+ u32 JSON length, the JSON tree, then small buffers packed inline. Every large buffer (numpy data, Arrow IPC streams, bytes) is its
own frame, sent without copying and read back with ``np.frombuffer`` over the received frame.
No pickle: only the types listed in :func:`serialize` travel.

JSON tree: plain JSON scalars and lists stand for themselves; every JSON object is a tag:
``{"t": [...]}`` tuple, ``{"d": {...}}`` str-keyed dict, ``{"m": [[k, v], ...]}`` other dict,
``{"b": i}`` bytes, ``{"n": [i, dtype, shape, order]}`` ndarray, ``{"s": [i, dtype]}`` numpy
scalar, ``{"a": [i, kind]}`` Arrow data. ``i`` indexes the buffer layout, a list with one entry
per buffer: its length when packed inline in frame 0, or -1 when it is the next frame.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from caraml.errors import CaramlError

VERSION = 1
MAGIC = b"CRM"
KIND_DATA = 0
KIND_ERROR = 1
INLINE_MAX = 2048  # buffers up to this size are packed into frame 0 (one frame, one copy)
DEFAULT_MAX_SIZE = 1 << 31  # 2 GiB; pass max_size to lower it

PREFIX = struct.Struct("<3sBBxHI")
PREFIX_LEN = PREFIX.size
_dumps = json.JSONEncoder(separators=(",", ":")).encode
_ARRAY_HEADERS: dict[tuple, bytes] = {}
# The last small-array header sent: repeated messages skip every lookup.
_LAST_OUT: tuple = (None, None, b"")
CACHE_MAX = 512


class _Encoder:
    """Collects buffers while turning an object into a JSON-able tree."""

    __slots__ = ("layout", "inline", "frames")

    def __init__(self) -> None:
        self.layout: list[int] = []
        self.inline: list[bytes] = []
        self.frames: list[Any] = []

    def add(self, buf: Any, nbytes: int) -> int:
        index = len(self.layout)
        if nbytes <= INLINE_MAX:
            self.layout.append(nbytes)
            self.inline.append(buf if isinstance(buf, bytes) else bytes(buf))
        else:
            self.layout.append(-1)
            self.frames.append(buf)
        return index

    def encode(self, obj: Any) -> Any:
        t = type(obj)
        if obj is None or t is bool or t is int or t is float or t is str:
            return obj
        if t is list:
            return [self.encode(x) for x in obj]
        if t is dict:
            if all(type(k) is str for k in obj):
                return {"d": {k: self.encode(v) for k, v in obj.items()}}
            return {"m": [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if t is tuple:
            return {"t": [self.encode(x) for x in obj]}
        if t is np.ndarray:
            return self.encode_array(obj)
        if t is bytes or t is bytearray or t is memoryview:
            mv = memoryview(obj).cast("B")
            return {"b": self.add(mv, mv.nbytes)}
        if isinstance(obj, np.generic):
            check_dtype(obj.dtype)
            arr = np.array(obj)  # empty strings (dtype <U0, |S0) become one-character dtypes
            return {"s": [self.add(arr.tobytes(), arr.nbytes), dtype_to_json(arr.dtype)]}
        if t.__module__.startswith("pyarrow"):
            return self.encode_arrow(obj)
        if isinstance(obj, (bool, int, float, str)):  # subclasses such as IntEnum
            return _base_scalar(obj)
        if isinstance(obj, (list, tuple, dict)):
            return self.encode(_base_container(obj))
        raise CaramlError(
            f"caraml cannot serialize {t.__module__}.{t.__qualname__}; send numpy arrays, Arrow "
            "data, str/bytes/int/float/bool/None or lists/tuples/dicts of them"
        )

    def encode_array(self, arr: np.ndarray) -> dict:
        check_dtype(arr.dtype)
        order = "C"
        if arr.nbytes <= INLINE_MAX:
            data = arr.tobytes()
        else:
            if not arr.flags.c_contiguous:
                if arr.flags.f_contiguous:
                    order, arr = "F", arr.T
                else:
                    arr = np.ascontiguousarray(arr)
            data = arr.reshape(-1).view(np.uint8)
        return {"n": [self.add(data, arr.nbytes), dtype_to_json(arr.dtype), list(arr.shape), order]}

    def encode_arrow(self, obj: Any) -> dict:
        import pyarrow as pa

        if isinstance(obj, pa.Table):
            kind, table = "t", obj
        elif isinstance(obj, pa.RecordBatch):
            kind, table = "r", pa.Table.from_batches([obj])
        elif isinstance(obj, pa.ChunkedArray):
            kind, table = "c", pa.table({"a": obj})
        elif isinstance(obj, pa.Array):
            kind, table = "a", pa.table({"a": obj})
        else:
            raise CaramlError(
                f"caraml cannot serialize Arrow {type(obj).__name__}; send a Table, "
                "RecordBatch, Array or ChunkedArray"
            )
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
        buf = sink.getvalue()
        return {"a": [self.add(buf, buf.size), kind]}


def _base_scalar(obj: Any) -> Any:
    for base in (bool, int, float, str):
        if isinstance(obj, base):
            return base(obj)
    raise AssertionError(obj)


def _base_container(obj: Any) -> Any:
    for base in (list, tuple, dict):
        if isinstance(obj, base):
            return base(obj)
    raise AssertionError(obj)


def check_dtype(dtype: np.dtype) -> None:
    """Refuse object dtypes: their items are Python objects that only pickle could send."""
    if dtype.hasobject:
        raise CaramlError(
            f"caraml cannot send arrays of dtype {dtype} (Python objects need "
            "pickle); convert to a numeric, bytes ('S') or unicode ('U') dtype"
        )


def dtype_to_json(dtype: np.dtype) -> Any:
    """A JSON-able dtype description: ``dtype.str`` (byte order kept) or a structured descr."""
    if dtype.fields is None and dtype.subdtype is None:
        return dtype.str
    return [list(field) for field in dtype.descr]


def dtype_from_json(spec: Any) -> np.dtype:
    """Inverse of :func:`dtype_to_json`."""
    if isinstance(spec, str):
        return np.dtype(spec)
    return np.dtype([tuple(_tuple_shapes(f)) for f in spec])


def _tuple_shapes(field: list) -> list:
    out = list(field)
    if isinstance(out[1], list) and out[1] and isinstance(out[1][0], list):
        out[1] = [tuple(_tuple_shapes(f)) for f in out[1]]
    if len(out) == 3:
        out[2] = tuple(out[2])
    return out


def _header(kind: int, tree_json: bytes, nframes: int) -> bytes:
    if nframes > 0xFFFF:
        raise CaramlError(
            f"a message holds at most 65535 large buffers, this one has {nframes};"
            " concatenate arrays or send them in several messages"
        )
    return PREFIX.pack(MAGIC, VERSION, kind, nframes, len(tree_json)) + tree_json


def small_frame(obj: np.ndarray) -> bytes:
    """The whole one-frame message for a small array (``nbytes <= INLINE_MAX``)."""
    last = _LAST_OUT
    if obj.dtype is last[0] and obj.shape == last[1]:
        return last[2] + obj.tobytes()
    return _small_array_header(obj) + obj.tobytes()


def _small_array_header(obj: np.ndarray) -> bytes:
    global _LAST_OUT
    key = (obj.dtype, obj.shape)
    head = _ARRAY_HEADERS.get(key)
    if head is None:
        check_dtype(obj.dtype)
        tree = [{"n": [0, dtype_to_json(obj.dtype), list(obj.shape), "C"]}, [obj.nbytes]]
        head = _header(KIND_DATA, _dumps(tree).encode(), 0)
        if len(_ARRAY_HEADERS) > CACHE_MAX:
            _ARRAY_HEADERS.clear()
        _ARRAY_HEADERS[key] = head
    _LAST_OUT = (obj.dtype, obj.shape, head)
    return head


def _big_array_header(obj: np.ndarray) -> bytes:
    key = (obj.dtype, obj.shape, -1)
    head = _ARRAY_HEADERS.get(key)
    if head is None:
        check_dtype(obj.dtype)
        tree = [{"n": [0, dtype_to_json(obj.dtype), list(obj.shape), "C"]}, [-1]]
        head = _header(KIND_DATA, _dumps(tree).encode(), 1)
        if len(_ARRAY_HEADERS) > CACHE_MAX:
            _ARRAY_HEADERS.clear()
        _ARRAY_HEADERS[key] = head
    return head


def serialize(obj: Any, *, kind: int = KIND_DATA) -> list:
    """Turn an object into a list of frames for ``send_multipart(frames, copy=False)``.

    Args:
        obj: numpy arrays (any dtype except object, any shape, any strides), numpy scalars,
            pyarrow Table/RecordBatch/Array/ChunkedArray, None/bool/int/float/str/bytes, and
            lists, tuples and dicts (any serializable keys) of these, nested.
        kind: KIND_DATA, or KIND_ERROR for an error reply (used by the request-reply server).

    Returns:
        Frame 0 (bytes header with small buffers inline) followed by zero-copy buffers.

    Raises:
        CaramlError: the object holds a type caraml does not send.
    """
    if type(obj) is np.ndarray and kind == KIND_DATA:
        if obj.nbytes <= INLINE_MAX:
            return [small_frame(obj)]
        if obj.flags.c_contiguous:  # the common large case: a cached header and the data
            return [_big_array_header(obj), obj.reshape(-1).view(np.uint8)]
    enc = _Encoder()
    tree = enc.encode(obj)
    head = _header(kind, _dumps([tree, enc.layout]).encode(), len(enc.frames))
    if enc.inline:
        head = b"".join([head, *enc.inline])
    return [head, *enc.frames]
