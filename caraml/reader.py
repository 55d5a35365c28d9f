"""Reading the wire format (see :mod:`caraml.wire`): header checks, zero-copy arrays, fast paths."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from caraml.errors import MalformedMessage, MessageTooLarge
from caraml.wire import (
    CACHE_MAX,
    DEFAULT_MAX_SIZE,
    KIND_DATA,
    MAGIC,
    PREFIX,
    PREFIX_LEN,
    VERSION,
    check_dtype,
    dtype_from_json,
)

_loads = json.JSONDecoder().decode
_PARSED: dict[bytes, tuple] = {}  # header JSON -> (tree, layout)
_PLANS: dict[bytes, tuple] = {}  # header JSON of a lone inline array -> plan as in _LAST_IN
_BIG: dict[bytes, tuple] = {}  # header frame of a lone array in one frame -> (dtype, shape, nbytes)
# The last plan received: a repeated small array is decoded without any lookup.
_LAST_IN: tuple = (b"\xff", (), np.dtype("u1"), -1, 0)  # header, shape, dtype, length, offset


def deserialize(frames: Sequence[Any], max_size: int | None = None) -> Any:
    """Rebuild the object from frames; arrays are read-only zero-copy views of the frames.

    Args:
        frames: what ``recv_multipart`` returned (bytes, ``zmq.Frame`` or buffers).
        max_size: reject messages whose frames add up to more bytes than this.

    Raises:
        MalformedMessage: truncated, garbled, foreign, too large, or an error reply.
    """
    if type(frames[0]) is bytes if frames else False:
        arr = _fast(frames, max_size)
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
        raise MessageTooLarge(
            f"message of {total} bytes exceeds max_size={limit}; raise "
            "max_size on the receiver or send smaller messages"
        )
    head = bufs[0]
    if head.nbytes < PREFIX_LEN or head[:3] != MAGIC:
        raise MalformedMessage("not a caraml message (bad magic); is the peer using caraml?")
    _, version, kind, nframes, jlen = PREFIX.unpack_from(head)
    if version != VERSION:
        raise MalformedMessage(
            f"caraml wire version {version} is not {VERSION}; upgrade the "
            "older side so both speak the same version"
        )
    if nframes != len(bufs) - 1:
        raise MalformedMessage(
            f"message truncated or padded: header announces {nframes} buffer "
            f"frames, {len(bufs) - 1} arrived"
        )
    try:
        return kind, _rebuild(head, bufs, jlen, kind, total)
    except MalformedMessage:
        raise
    except Exception as exc:  # any garbled field ends here, never in the caller's loop
        raise MalformedMessage(f"garbled caraml message: {type(exc).__name__}: {exc}") from None


def _fast(frames: Sequence[Any], max_size: int | None) -> np.ndarray | None:
    """A lone array in a message whose header was decoded before; None for anything else."""
    head = frames[0]
    if len(frames) == 1:
        return fast_single(head) if max_size is None or len(head) <= max_size else None
    plan = _BIG.get(head) if len(frames) == 2 else None
    if plan is None:
        return None
    data = frames[1]
    buf = data.buffer if hasattr(data, "buffer") else memoryview(data)
    if buf.nbytes != plan[2] or (max_size is not None and buf.nbytes > max_size):
        return None
    return np.frombuffer(buf, plan[0]).reshape(plan[1])


def fast_single(head: bytes) -> np.ndarray | None:
    """Decode a one-frame message holding a lone small array whose header was seen before;
    None for anything else (then use :func:`deserialize`)."""
    plan = _LAST_IN
    if len(head) == plan[3] and head.startswith(plan[0]):
        return np.ndarray(plan[1], plan[2], head, plan[4])
    return _fast_array(head)


def _fast_array(head: bytes) -> np.ndarray | None:
    global _LAST_IN
    if len(head) < PREFIX_LEN:
        return None
    magic, version, kind, nframes, jlen = PREFIX.unpack_from(head)
    if nframes or kind or version != VERSION or magic != MAGIC:
        return None
    end = PREFIX_LEN + jlen
    plan = _PLANS.get(head[PREFIX_LEN:end])
    if plan is None or len(head) != plan[3]:
        return None
    _LAST_IN = plan
    return np.ndarray(plan[1], plan[2], head, plan[4])


def _remember_plan(head: memoryview, key: bytes, tree: Any, layout: list) -> None:
    if len(layout) == 1 and type(layout[0]) is int and layout[0] > 0 and type(tree) is dict:
        spec = tree.get("n")
        if spec and spec[3] == "C" and spec[0] == 0:
            if len(_PLANS) > CACHE_MAX:
                _PLANS.clear()
            end = PREFIX_LEN + len(key)
            _PLANS[key] = (
                head[:end].tobytes(),
                tuple(spec[2]),
                dtype_from_json(spec[1]),
                end + layout[0],
                end,
            )


def _rebuild(head: memoryview, bufs: list[memoryview], jlen: int, kind: int, total: int) -> Any:
    end = PREFIX_LEN + jlen
    if end > head.nbytes:
        raise MalformedMessage(f"header truncated: needs {end} bytes, frame has {head.nbytes}")
    key = head[PREFIX_LEN:end].tobytes()
    parsed = _PARSED.get(key)
    if parsed is None:
        tree, layout = _loads(key.decode())
        parsed = (tree, layout)
        if jlen < 1024:
            if len(_PARSED) > CACHE_MAX:
                _PARSED.clear()
            _PARSED[key] = parsed
    tree, layout = parsed
    out = _Decoder(_buffers(head, end, bufs, layout), total).decode(tree)
    if kind != KIND_DATA:
        return out  # the fast paths serve data messages only: never cache an error reply's plan
    if len(bufs) == 1 and jlen < 1024 and key not in _PLANS:
        _remember_plan(head, key, tree, layout)  # only after a full decode proved it consistent
    elif len(bufs) == 2 and layout == [-1] and end == head.nbytes and type(out) is np.ndarray:
        spec = tree.get("n") if type(tree) is dict else None
        if spec and spec[3] == "C" and len(_BIG) < CACHE_MAX:
            _BIG[head.tobytes()] = (out.dtype, out.shape, bufs[1].nbytes)
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
            out.append(head[offset : offset + size])
            offset += size
        else:
            if next_frame >= len(bufs):
                raise MalformedMessage(
                    f"message truncated: header names more than {len(bufs) - 1} buffer frames"
                )
            out.append(bufs[next_frame])
            next_frame += 1
    if next_frame != len(bufs) or offset != head.nbytes:
        raise MalformedMessage("message has trailing frames or bytes the header does not name")
    return out


class _Decoder:
    """Rebuilds the tree; ``budget`` caps what the result may hold (see :meth:`charge`)."""

    __slots__ = ("bufs", "budget")

    def __init__(self, bufs: list[memoryview], budget: int) -> None:
        self.bufs = bufs
        self.budget = budget

    def charge(self, units: int, what: str) -> None:
        """Count elements and copied bytes against the message's own size.

        A well-formed message never holds more array elements plus copied bytes than it has
        bytes (every element of a non-empty itemsize is at least a byte of some frame), so this
        bound holds whatever the itemsize: zero-byte items (``|S0``, ``[]``) or a buffer that
        the tree names twice cannot make a small message decode into a large object.
        """
        self.budget -= units
        if self.budget < 0:
            raise MalformedMessage(
                f"{what} asks for more elements than the message has bytes; a caraml message "
                "holds at most one array element or copied byte per byte received"
            )

    def decode(self, node: Any) -> Any:
        t = type(node)
        if t is list:
            return [self.decode(x) for x in node]
        if t is not dict:
            return node
        if len(node) != 1:
            raise MalformedMessage("tag objects have exactly one key")
        ((tag, val),) = node.items()
        if tag == "n":
            return self.array(*val)
        if tag == "d":
            return {k: self.decode(v) for k, v in val.items()}
        if tag == "t":
            return tuple(self.decode(x) for x in val)
        if tag == "m":
            return {self.decode(k): self.decode(v) for k, v in val}
        if tag == "b":
            buf = self.bufs[val]
            self.charge(buf.nbytes, "a bytes value")
            return buf.tobytes()
        if tag == "s":
            self.charge(1, "a numpy scalar")
            dt = dtype_from_json(val[1])
            check_dtype(dt)
            buf = self.bufs[val[0]]
            if buf.nbytes != dt.itemsize:
                raise MalformedMessage(f"scalar of dtype {dt} needs {dt.itemsize} bytes")
            if dt.itemsize == 0:
                return np.zeros((), dt)[()]
            return np.frombuffer(buf, dtype=dt)[0]
        if tag == "a":
            return self.arrow(*val)
        raise MalformedMessage(f"unknown tag {tag!r}")

    def array(self, index: int, dtype: Any, shape: list, order: str) -> np.ndarray:
        dt = dtype_from_json(dtype)
        check_dtype(dt)
        buf = self.bufs[index]
        if type(shape) is not list or any(type(n) is not int or n < 0 for n in shape):
            raise MalformedMessage(f"array shape must be a list of integers >= 0, got {shape!r}")
        count = 1
        for n in shape:
            count *= n
        self.charge(count, f"an array of shape {shape}")
        if count * dt.itemsize != buf.nbytes:
            raise MalformedMessage(
                f"array of shape {shape} and dtype {dt} needs "
                f"{count * dt.itemsize} bytes, frame has {buf.nbytes}"
            )
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
        self.charge(table.get_total_buffer_size(), "Arrow data")
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
