"""DataFetcher: batches land in shared memory, back-pressure holds, failures surface, nothing leaks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import caraml
from caraml.testing import caraml_segments

from .fetch_helpers import die_on_three, make_batch, raise_on_two, to_arrays

pytestmark = pytest.mark.timeout(120)


def requests(count, rows=4):
    return [{"n": n, "rows": rows} for n in range(count)]


def test_every_request_becomes_one_preprocessed_batch(addr):
    with (
        caraml.Server(addr, make_batch),
        caraml.DataFetcher(
            addr, requests(12), to_arrays, slot_bytes=4096, n_slots=3, n_workers=2
        ) as fetcher,
    ):
        seen = []
        for handle in fetcher:
            with handle:
                n = int(handle.data["n"][0])
                assert np.array_equal(handle.data["obs"], np.full((4, 3), 2.0 * n, np.float32))
                seen.append(n)
        assert sorted(seen) == list(range(12))
        assert caraml_segments()  # the pool lives while the fetcher is open
    assert not caraml_segments()


def test_workers_wait_when_every_slot_is_held(addr):
    with (
        caraml.Server(addr, make_batch) as server,
        caraml.DataFetcher(
            addr, itertools.repeat({"n": 1}), to_arrays, slot_bytes=4096, n_slots=2
        ) as fetcher,
    ):
        held = [fetcher.get(timeout=30), fetcher.get(timeout=30)]
        with pytest.raises(caraml.CaramlError, match="no batch within"):
            fetcher.get(timeout=0.5)
        assert server.served <= 3  # two in slots, at most one fetched and waiting for a slot
        fetcher.release(held[0])
        assert fetcher.get(timeout=30).data["n"][0] == 1


def test_batches_of_different_shapes_use_the_same_slots(addr):
    reqs = [{"n": n, "rows": rows} for n, rows in enumerate([1, 50, 7, 120])]
    with (
        caraml.Server(addr, make_batch),
        caraml.DataFetcher(addr, reqs, to_arrays, slot_bytes=2048, n_slots=1) as fetcher,
    ):
        shapes = []
        for handle in fetcher:
            shapes.append(handle.data["obs"].shape)
            fetcher.release(handle)
        assert shapes == [(1, 3), (50, 3), (7, 3), (120, 3)]


def test_batch_larger_than_a_slot_is_a_clear_error(addr):
    with (
        caraml.Server(addr, make_batch),
        caraml.DataFetcher(addr, requests(2, rows=1000), to_arrays, slot_bytes=1024) as fetcher,
    ):
        with pytest.raises(caraml.SlotTooSmall, match="raise slot_bytes to at least"):
            fetcher.get(timeout=60)


def test_worker_that_dies_is_an_error_not_a_hang(addr):
    with (
        caraml.Server(addr, make_batch),
        caraml.DataFetcher(addr, requests(10), die_on_three, slot_bytes=4096, n_slots=8) as fetcher,
    ):
        with pytest.raises(caraml.WorkerDied, match="exited with code 7"):
            for handle in fetcher:
                fetcher.release(handle)


def test_worker_exception_carries_its_traceback(addr):
    with (
        caraml.Server(addr, make_batch),
        caraml.DataFetcher(addr, requests(10), raise_on_two, slot_bytes=4096) as fetcher,
    ):
        with pytest.raises(caraml.WorkerDied, match="bad batch 2"):
            for handle in fetcher:
                fetcher.release(handle)


def test_unreachable_server_surfaces_as_request_timeout(addr):
    with caraml.DataFetcher(
        addr, requests(1), to_arrays, slot_bytes=4096, timeout=0.2, retries=0
    ) as fetcher:
        with pytest.raises(caraml.WorkerDied, match="RequestTimeout"):
            fetcher.get(timeout=60)


def test_generator_requests_are_refused_with_a_fix(addr):
    with pytest.raises(caraml.CaramlError, match="picklable"):
        caraml.DataFetcher(addr, (r for r in requests(2)), to_arrays, slot_bytes=4096)


def test_requests_are_spread_over_several_servers():
    from caraml.testing import free_address

    with (
        caraml.Server(free_address(), make_batch) as a,
        caraml.Server(free_address(), make_batch) as b,
        caraml.DataFetcher(
            [a.address, b.address], requests(8), to_arrays, slot_bytes=4096, n_workers=2
        ) as fetcher,
    ):
        seen = sorted(int(h.data["n"][0]) for h in _released(fetcher))
        assert seen == list(range(8))
        assert a.served > 0 and b.served > 0 and a.served + b.served == 8


def _released(fetcher):
    for handle in fetcher:
        yield handle
        fetcher.release(handle)


def test_handle_released_after_close_is_harmless(addr):
    with caraml.Server(addr, make_batch):
        fetcher = caraml.DataFetcher(addr, requests(2), to_arrays, slot_bytes=4096)
        with fetcher.get(timeout=60) as handle:
            fetcher.close()
            assert handle.data["obs"].shape == (4, 3)  # the mapping outlives the unlinked name
        assert not caraml_segments()
