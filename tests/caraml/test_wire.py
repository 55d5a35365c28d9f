"""Wire format: round trips over nested structures and dtypes, zero-copy, and rejected garbage."""

from __future__ import annotations

import math
import struct

import hypothesis.extra.numpy as hnp
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import caraml
from caraml.reader import decode, fast_single
from caraml.testing import _prefixed, garbled_messages
from caraml.wire import INLINE_MAX, KIND_DATA, KIND_ERROR, MAGIC, VERSION

pytestmark = pytest.mark.timeout(120)


def roundtrip(obj):
    frames = caraml.serialize(obj)
    # what a socket would deliver: plain bytes per frame
    return caraml.deserialize([bytes(memoryview(f)) for f in frames])


def same(a, b) -> bool:
    """Equal in type and value; arrays compare dtype, shape and bytes (NaN payloads too)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def any_dtype() -> st.SearchStrategy:
    return st.one_of(
        hnp.boolean_dtypes(),
        hnp.integer_dtypes(endianness="?"),
        hnp.unsigned_integer_dtypes(endianness="?"),
        hnp.floating_dtypes(endianness="?"),
        hnp.complex_number_dtypes(endianness="?"),
        hnp.datetime64_dtypes(endianness="?"),
        hnp.byte_string_dtypes(min_len=1, max_len=4),
        hnp.unicode_string_dtypes(endianness="?", min_len=1, max_len=4),
    )


@st.composite
def arrays(draw) -> np.ndarray:
    """Arrays of any dtype and shape (zero-size included), C, Fortran or strided."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6))
    arr = draw(hnp.arrays(any_dtype(), shape))
    layout = draw(st.sampled_from(["c", "f", "strided"]))
    if layout == "f":
        arr = np.asfortranarray(arr)
    elif layout == "strided" and arr.ndim:
        arr = np.concatenate([arr, arr], axis=0)[::2]
    return arr


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=16),
)
leaves = st.one_of(scalars, arrays())
trees = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.lists(kids, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=6), kids, max_size=4),
        st.dictionaries(st.integers(), kids, max_size=3),
    ),
    max_leaves=12,
)


@given(trees)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.integration
def test_nested_structures_round_trip(obj):
    assert same(roundtrip(obj), obj)


@given(arrays())
@settings(max_examples=200, deadline=None)
@pytest.mark.integration
def test_arrays_of_every_dtype_and_layout_round_trip(arr):
    assert same(roundtrip(arr), np.ascontiguousarray(arr).reshape(arr.shape))
    big = np.resize(arr, (INLINE_MAX // max(arr.itemsize, 1) + 7,)) if arr.size else arr
    assert same(roundtrip(big), big)  # large enough to travel as its own frame


@pytest.mark.parametrize("order", ["C", "F"])
def test_large_big_endian_arrays_keep_dtype_and_values(order):
    arr = np.asarray(np.arange(30000, dtype=">f8").reshape(100, 300), order=order)
    out = roundtrip(arr)
    assert out.dtype == np.dtype(">f8") and np.array_equal(out, arr)


def test_numpy_scalars_and_structured_arrays_round_trip():
    rec = np.zeros(5, dtype=[("a", "<i4"), ("b", ">f8", (2,))])
    rec["a"] = np.arange(5)
    obj = {"x": np.float32(2.5), "y": np.int64(-3), "rec": rec, "big": np.resize(rec, 5000)}
    assert same(roundtrip(obj), obj)


def test_large_arrays_are_sent_and_received_without_copying():
    arr = np.arange(1 << 16, dtype=np.float32)
    frames = caraml.serialize({"a": arr})
    assert np.shares_memory(np.asarray(frames[1]), arr)
    received = [frames[0], bytearray(bytes(memoryview(frames[1])))]
    out = caraml.deserialize(received)["a"]
    received[1][:4] = np.float32(42.0).tobytes()
    assert out[0] == 42.0  # the array is a view of the received frame


def test_arrow_tables_batches_and_arrays_round_trip():
    table = pa.table({"x": [1, 2, 3], "s": ["a", None, "c"]})
    batch = table.to_batches()[0]
    chunked = pa.chunked_array([[1.0, 2.0], [3.0]])
    obj = {
        "t": table,
        "b": batch,
        "a": pa.array([1, None, 3]),
        "c": chunked,
        "empty": pa.table({"z": pa.array([], pa.int64())}),
    }
    out = roundtrip(obj)
    assert out["t"].equals(table) and out["b"].equals(batch)
    assert out["a"].equals(obj["a"]) and out["c"].equals(chunked)
    assert out["empty"].equals(obj["empty"])


def test_unsupported_objects_raise_clear_errors():
    with pytest.raises(caraml.CaramlError, match="cannot serialize"):
        caraml.serialize({"f": object()})
    with pytest.raises(caraml.CaramlError, match="pickle"):
        caraml.serialize(np.array([object()]))


def test_foreign_truncated_and_garbled_messages_raise_malformed():
    good = [bytes(memoryview(f)) for f in caraml.serialize({"a": np.arange(5000)})]
    with pytest.raises(caraml.MalformedMessage, match="bad magic"):
        caraml.deserialize([b"hello world, not caraml"])
    with pytest.raises(caraml.MalformedMessage, match="truncated"):
        caraml.deserialize(good[:1])
    with pytest.raises(caraml.MalformedMessage, match="version"):
        caraml.deserialize([MAGIC + struct.pack("<B", VERSION + 1) + good[0][4:], good[1]])
    with pytest.raises(caraml.MalformedMessage):
        caraml.deserialize([])
    for frames in garbled_messages(2000, seed=1):
        with pytest.raises(caraml.MalformedMessage):
            caraml.deserialize(frames)


def test_max_size_rejects_large_messages():
    frames = caraml.serialize(np.zeros(100_000, np.uint8))
    with pytest.raises(caraml.MessageTooLarge, match="max_size"):
        caraml.deserialize(frames, max_size=50_000)
    assert caraml.deserialize(frames, max_size=200_000).shape == (100_000,)


def test_cached_fast_paths_still_reject_wrong_sizes():
    for arr in (np.arange(10, dtype=np.int16), np.arange(100_000, dtype=np.int16)):
        frames = [bytes(memoryview(f)) for f in caraml.serialize(arr)]
        assert np.array_equal(caraml.deserialize(frames), arr)  # decoded once: now cached
        assert np.array_equal(caraml.deserialize(frames), arr)  # through the fast path
        short = [*frames[:-1], frames[-1][:-2]]
        with pytest.raises(caraml.MalformedMessage):
            caraml.deserialize(short)
        with pytest.raises(caraml.MessageTooLarge):
            caraml.deserialize(frames, max_size=arr.nbytes // 2)


def wire(obj, kind=KIND_DATA):
    return [bytes(memoryview(f)) for f in caraml.serialize(obj, kind=kind)]


@pytest.mark.parametrize("size", [4, 1024])
def test_error_replies_are_never_taken_for_data_even_when_seen_again(size):
    arr = np.arange(size, dtype=np.float64)
    error, data = wire(arr, KIND_ERROR), wire(arr)
    for _ in range(3):  # every decode cache has seen both by the second round
        with pytest.raises(caraml.MalformedMessage, match="error reply"):
            caraml.deserialize(error)
        assert decode(error)[0] == KIND_ERROR
        if len(error) == 1:
            assert fast_single(error[0]) is None  # the Puller's shortcut
        assert np.array_equal(caraml.deserialize(data), arr)


@pytest.mark.parametrize("dtype", ["|S0", "<U0", []])
def test_zero_byte_items_cannot_make_a_small_message_decode_large(dtype):
    message = [_prefixed(KIND_DATA, [{"n": [0, dtype, [1 << 29], "C"]}, [0]])]
    assert len(message[0]) <= 120
    with pytest.raises(caraml.MalformedMessage, match="more elements than the message has bytes"):
        caraml.deserialize(message)


def test_one_buffer_named_by_many_values_is_refused():
    buf = bytes(2000)
    message = [_prefixed(KIND_DATA, [[{"b": 0}] * 500, [len(buf)]], buf)]
    with pytest.raises(caraml.MalformedMessage, match="more elements"):
        caraml.deserialize(message)


def test_small_arrays_of_zero_byte_items_and_empty_strings_round_trip():
    assert roundtrip(np.zeros(3, dtype=[])).shape == (3,)
    assert roundtrip(np.str_("")) == "" and roundtrip(np.bytes_(b"")) == b""
    assert roundtrip([np.str_(""), np.zeros((2, 0), np.float32)])[1].shape == (2, 0)
