"""Wire format: one versioned header frame describing the object tree, then zero-copy buffers.

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
from collections.abc import Sequence
from typing import Any

import numpy as np

from caraml.errors import CaramlError, MalformedMessage, MessageTooLarge

VERSION = 1
MAGIC = b"CRM"
KIND_DATA = 0
KIND_ERROR = 1
INLINE_MAX = 2048  # buffers up to this size are packed into frame 0 (one frame, one copy)
DEFAULT_MAX_SIZE = 1 << 31  # 2 GiB; pass max_size to lower it

_PREFIX = struct.Struct("<3sBBxHI")
_PREFIX_LEN = _PREFIX.size
_dumps = json.JSONEncoder(separators=(",", ":")).encode
_loads = json.JSONDecoder().decode
_ARRAY_HEADERS: dict[tuple, bytes] = {}
_PARSED: dict[bytes, tuple] = {}
_PLANS: dict[bytes, tuple] = {}  # header JSON of a lone inline array -> _LAST_IN-like plan
# The last small-array header sent and plan received: repeated messages skip every lookup.
_LAST_OUT: tuple = (None, None, b"")
_LAST_IN: tuple = (b"\xff", (), np.dtype("u1"), -1, 0)  # header, shape, dtype, length, offset
_CACHE_MAX = 512


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
            _check_dtype(obj.dtype)
            return {"s": [self.add(obj.tobytes(), obj.dtype.itemsize), dtype_to_json(obj.dtype)]}
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
        _check_dtype(arr.dtype)
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
            raise CaramlError(f"caraml cannot serialize Arrow {type(obj).__name__}; send a Table, "
                              "RecordBatch, Array or ChunkedArray")
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


def _check_dtype(dtype: np.dtype) -> None:
    if dtype.hasobject:
        raise CaramlError(f"caraml cannot send arrays of dtype {dtype} (Python objects need "
                          "pickle); convert to a numeric, bytes ('S') or unicode ('U') dtype")


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
        raise CaramlError(f"a message holds at most 65535 large buffers, this one has {nframes};"
                          " concatenate arrays or send them in several messages")
    return _PREFIX.pack(MAGIC, VERSION, kind, nframes, len(tree_json)) + tree_json


def frames_following(head: bytes) -> int:
    """How many frames follow this header frame, by its own account (-1: not a caraml header)."""
    if len(head) < _PREFIX_LEN or head[:3] != MAGIC:
        return -1
    return _PREFIX.unpack_from(head)[3]


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
        _check_dtype(obj.dtype)
        tree = [{"n": [0, dtype_to_json(obj.dtype), list(obj.shape), "C"]}, [obj.nbytes]]
        head = _header(KIND_DATA, _dumps(tree).encode(), 0)
        if len(_ARRAY_HEADERS) > _CACHE_MAX:
            _ARRAY_HEADERS.clear()
        _ARRAY_HEADERS[key] = head
    _LAST_OUT = (obj.dtype, obj.shape, head)
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
    if type(obj) is np.ndarray and kind == KIND_DATA and obj.nbytes <= INLINE_MAX:
        return [small_frame(obj)]
    enc = _Encoder()
    tree = enc.encode(obj)
    head = _header(kind, _dumps([tree, enc.layout]).encode(), len(enc.frames))
    if enc.inline:
        head = b"".join([head, *enc.inline])
    return [head, *enc.frames]


def deserialize(frames: Sequence[Any], max_size: int | None = None) -> Any:
    """Rebuild the object from frames; arrays are read-only zero-copy views of the frames.

    Args:
        frames: what ``recv_multipart`` returned (bytes, ``zmq.Frame`` or buffers).
        max_size: reject messages whose frames add up to more bytes than this.

    Raises:
        MalformedMessage: truncated, garbled, foreign, too large, or an error reply.
    """
    if len(frames) == 1 and type(frames[0]) is bytes and (max_size is None
                                                            or len(frames[0]) <= max_size):
        arr = fast_single(frames[0])
        if arr is not None:
            return arr
    kind, obj = decode(frames, max_size)
    if kind != KIND_DATA:
        raise MalformedMessage(f"expected a data message, got an error reply: {obj}")
    return obj


def decode(frames: Sequence[Any], max_size: int | None = None) -> tuple[int, Any]:
    """Like :func:`deserialize` but returns ``(kind, obj)`` so error replies can be told apart."""
    limit = DEFAULT_MAX_SIZE if max_size is None else max_size
    if len(frames) == 1 and type(frames[0]) is bytes and len(frames[0]) <= limit:
        arr = fast_single(frames[0])
        if arr is not None:
            return KIND_DATA, arr
    try:
        bufs = [f.buffer if hasattr(f, "buffer") else memoryview(f) for f in frames]
    except TypeError as exc:
        raise MalformedMessage(f"frames must be bytes-like: {exc}") from None
    if not bufs:
        raise MalformedMessage("empty message (no frames)")
    total = sum(b.nbytes for b in bufs)
    if total > limit:
        raise MessageTooLarge(f"message of {total} bytes exceeds max_size={limit}; raise "
                              "max_size on the receiver or send smaller messages")
    head = bufs[0]
    if head.nbytes < _PREFIX_LEN or head[:3] != MAGIC:
        raise MalformedMessage("not a caraml message (bad magic); is the peer using caraml?")
    _, version, kind, nframes, jlen = _PREFIX.unpack_from(head)
    if version != VERSION:
        raise MalformedMessage(f"caraml wire version {version} is not {VERSION}; upgrade the "
                               "older side so both speak the same version")
    if nframes != len(bufs) - 1:
        raise MalformedMessage(f"message truncated or padded: header announces {nframes} buffer "
                               f"frames, {len(bufs) - 1} arrived")
    try:
        return kind, _rebuild(head, bufs, jlen)
    except MalformedMessage:
        raise
    except Exception as exc:  # any garbled field ends here, never in the caller's loop
        raise MalformedMessage(f"garbled caraml message: {type(exc).__name__}: {exc}") from None


def fast_single(head: bytes) -> np.ndarray | None:
    """Decode a one-frame message holding a lone small array whose header was seen before;
    None for anything else (then use :func:`deserialize`)."""
    plan = _LAST_IN
    if len(head) == plan[3] and head.startswith(plan[0]):
        return np.ndarray(plan[1], plan[2], head, plan[4])
    return _fast_array(head)


def _fast_array(head: bytes) -> np.ndarray | None:
    global _LAST_IN
    if len(head) < _PREFIX_LEN:
        return None
    magic, version, kind, nframes, jlen = _PREFIX.unpack_from(head)
    if nframes or kind or version != VERSION or magic != MAGIC:
        return None
    end = _PREFIX_LEN + jlen
    plan = _PLANS.get(head[_PREFIX_LEN:end])
    if plan is None or len(head) != plan[3]:
        return None
    _LAST_IN = plan
    return np.ndarray(plan[1], plan[2], head, plan[4])


def _remember_plan(head: memoryview, key: bytes, tree: Any, layout: list) -> None:
    if len(layout) == 1 and type(layout[0]) is int and layout[0] > 0 and type(tree) is dict:
        spec = tree.get("n")
        if spec and spec[3] == "C" and spec[0] == 0:
            if len(_PLANS) > _CACHE_MAX:
                _PLANS.clear()
            end = _PREFIX_LEN + len(key)
            _PLANS[key] = (head[:end].tobytes(), tuple(spec[2]), dtype_from_json(spec[1]),
                           end + layout[0], end)


def _rebuild(head: memoryview, bufs: list[memoryview], jlen: int) -> Any:
    end = _PREFIX_LEN + jlen
    if end > head.nbytes:
        raise MalformedMessage(f"header truncated: needs {end} bytes, frame has {head.nbytes}")
    key = head[_PREFIX_LEN:end].tobytes()
    parsed = _PARSED.get(key)
    if parsed is None:
        tree, layout = _loads(key.decode())
        parsed = (tree, layout)
        if jlen < 1024:
            if len(_PARSED) > _CACHE_MAX:
                _PARSED.clear()
            _PARSED[key] = parsed
    tree, layout = parsed
    out = _Decoder(_buffers(head, end, bufs, layout)).decode(tree)
    if len(bufs) == 1 and jlen < 1024 and key not in _PLANS:
        _remember_plan(head, key, tree, layout)  # only after a full decode proved it consistent
    return out


def _buffers(head: memoryview, offset: int, bufs: list[memoryview], layout: list) -> list:
    out = []
    next_frame = 1
    for size in layout:
        if type(size) is not int:
            raise MalformedMessage("buffer layout must be integers")
        if size >= 0:
            if offset + size > head.nbytes:
                raise MalformedMessage("inline buffer runs past the end of the header frame")
            out.append(head[offset:offset + size])
            offset += size
        else:
            if next_frame >= len(bufs):
                raise MalformedMessage(f"message truncated: header names more than "
                                       f"{len(bufs) - 1} buffer frames")
            out.append(bufs[next_frame])
            next_frame += 1
    if next_frame != len(bufs) or offset != head.nbytes:
        raise MalformedMessage("message has trailing frames or bytes the header does not name")
    return out


class _Decoder:
    __slots__ = ("bufs",)

    def __init__(self, bufs: list[memoryview]) -> None:
        self.bufs = bufs

    def decode(self, node: Any) -> Any:
        t = type(node)
        if t is list:
            return [self.decode(x) for x in node]
        if t is not dict:
            return node
        if len(node) != 1:
            raise MalformedMessage("tag objects have exactly one key")
        (tag, val), = node.items()
        if tag == "n":
            return self.array(*val)
        if tag == "d":
            return {k: self.decode(v) for k, v in val.items()}
        if tag == "t":
            return tuple(self.decode(x) for x in val)
        if tag == "m":
            return {self.decode(k): self.decode(v) for k, v in val}
        if tag == "b":
            return self.bufs[val].tobytes()
        if tag == "s":
            return np.frombuffer(self.bufs[val[0]], dtype=dtype_from_json(val[1]))[0]
        if tag == "a":
            return self.arrow(*val)
        raise MalformedMessage(f"unknown tag {tag!r}")

    def array(self, index: int, dtype: Any, shape: list, order: str) -> np.ndarray:
        dt = dtype_from_json(dtype)
        _check_dtype(dt)
        buf = self.bufs[index]
        count = 1
        for n in shape:
            count *= n
        if count * dt.itemsize != buf.nbytes or any(n < 0 for n in shape):
            raise MalformedMessage(f"array of shape {shape} and dtype {dt} needs "
                                   f"{count * dt.itemsize} bytes, frame has {buf.nbytes}")
        if dt.itemsize == 0 or count == 0:
            return np.empty(shape, dtype=dt)
        arr = np.frombuffer(buf, dtype=dt).reshape(shape)
        if order == "F":
            return arr.T
        return arr

    def arrow(self, index: int, kind: str) -> Any:
        import pyarrow as pa

        with pa.ipc.open_stream(pa.py_buffer(self.bufs[index])) as reader:
            table = reader.read_all()
        if kind == "t":
            return table
        if kind == "r":
            batches = table.combine_chunks().to_batches()
            if not batches:
                return pa.RecordBatch.from_pylist([], schema=table.schema)
            return batches[0]
        column = table.column(0)
        if kind == "c":
            return column
        if kind == "a":
            return column.combine_chunks()
        raise MalformedMessage(f"unknown Arrow kind {kind!r}")
