"""DataFetcher: worker processes fetch and preprocess batches into shared memory for the learner.

Each worker process takes every ``n_workers``-th request from ``requests``, sends it to a server
(round-robin over ``addresses``; caraml Servers or a router-dealer Proxy), runs ``process`` on the
reply, waits for a free slot (back-pressure: with every slot in use the workers wait), writes the
resulting ``dict[str, np.ndarray]`` into the slot and hands the slot's index and layout to the main
process. The main process only builds zero-copy views, so networking, deserialization and
preprocessing never run on it. Release each handle (``fetcher.release(h)`` or ``with h:``) once
its arrays are no longer needed; the slot is then overwritten.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import queue
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from caraml.errors import CaramlError, SlotTooSmall, WorkerDied
from caraml.shm import Layout, SlotPool

Process = Callable[[Any], dict[str, np.ndarray]]


@dataclass
class Handle:
    """One filled slot: ``data`` maps names to zero-copy arrays, valid until released."""

    slot: int
    data: dict[str, np.ndarray]
    worker: int
    _fetcher: DataFetcher | None = None

    def release(self) -> None:
        """Give the slot back to the workers (same as ``fetcher.release(handle)``)."""
        if self._fetcher is not None:
            self._fetcher.release(self)

    def __enter__(self) -> Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class DataFetcher:
    """Fetches batches in ``n_workers`` processes into ``n_slots`` shared-memory slots.

    Args:
        addresses: one server address or several (requests are spread round-robin).
        requests: a picklable iterable of request objects (a list, ``range``,
            ``itertools.repeat(req)``...); worker ``i`` sends items ``i, i + n_workers, ...``.
            The fetcher ends when every worker has used up its share.
        process: a picklable top-level function ``reply -> dict[str, np.ndarray]`` run in the
            worker; default: the reply itself must be such a dict.
        slot_bytes: bytes per slot; a batch that needs more raises SlotTooSmall in the main
            process (every array is 64-byte aligned).
        n_slots: slots in the pool (at most this many batches are in flight or held).
        n_workers: worker processes.
        timeout, retries: per-request settings of each worker's Client.
        start_method: "spawn" (default) or "forkserver"; never "fork" (ZeroMQ contexts do not
            survive a fork).
    """

    def __init__(self, addresses: str | Sequence[str], requests: Iterable[Any],
                 process: Process | None = None, *, slot_bytes: int, n_slots: int = 4,
                 n_workers: int = 1, timeout: float = 10.0, retries: int = 3,
                 start_method: str = "spawn") -> None:
        if start_method == "fork":
            raise CaramlError("DataFetcher cannot fork (ZeroMQ contexts break); use 'spawn' or "
                              "'forkserver'")
        addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        ctx = mp.get_context(start_method)
        self.pool = SlotPool(n_slots, slot_bytes)
        self._free, self._ready, self._stop = ctx.Queue(), ctx.Queue(), ctx.Event()
        for slot in range(n_slots):
            self._free.put(slot)
        self._held: set[int] = set()
        self._done: set[int] = set()
        self._closed = False
        args = (addresses, requests, process, self.pool.name, n_slots, slot_bytes, timeout,
                retries)
        self._workers = [ctx.Process(target=_worker_main, name=f"caraml-fetcher-{i}", daemon=True,
                                     args=(i, n_workers, *args, self._free, self._ready,
                                           self._stop)) for i in range(n_workers)]
        try:
            for proc in self._workers:
                proc.start()
        except Exception as exc:
            self.close()
            raise CaramlError(f"cannot start DataFetcher workers: {exc}; requests and process "
                              "must be picklable (a list or itertools.repeat, a top-level "
                              "function; not a generator or lambda)") from exc

    def get(self, timeout: float | None = None) -> Handle:
        """Return the next filled slot.

        Raises:
            StopIteration: every worker has used up its requests.
            WorkerDied: a worker raised (the text carries its traceback) or exited.
            CaramlError: nothing arrived within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(self._done) < len(self._workers):
            try:
                message = self._ready.get(timeout=0.2)
            except queue.Empty:
                message = self._check_workers()
                if message is None:
                    if deadline is not None and time.monotonic() > deadline:
                        raise CaramlError(f"no batch within {timeout} s; are the servers "
                                          "answering?") from None
                    continue
            handle = self._accept(message)
            if handle is not None:
                return handle
        raise StopIteration

    def _accept(self, message: tuple) -> Handle | None:
        kind, worker, slot, payload = message
        if kind == "batch":
            self._held.add(slot)
            return Handle(slot, self.pool.view(slot, payload), worker, self)
        if kind == "done":
            self._done.add(worker)
            return None
        name, text, trace = payload
        if name == "SlotTooSmall":
            raise SlotTooSmall(f"DataFetcher worker {worker}: {text}")
        raise WorkerDied(f"DataFetcher worker {worker} failed with {name}: {text}\n{trace}")

    def _check_workers(self) -> tuple | None:
        for index, proc in enumerate(self._workers):
            if index in self._done or proc.exitcode is None:
                continue
            try:  # its last message may still be in the pipe
                return self._ready.get(timeout=1.0)
            except queue.Empty:
                raise WorkerDied(f"DataFetcher worker {index} (pid {proc.pid}) exited with code "
                                 f"{proc.exitcode} without finishing; see its stderr, and check "
                                 "memory limits (a negative code is the signal that killed "
                                 "it)") from None
        return None

    def release(self, handle: Handle) -> None:
        """Return ``handle``'s slot to the workers; its arrays must not be used afterwards."""
        if handle.slot not in self._held:
            raise CaramlError(f"slot {handle.slot} is not held (released twice?)")
        self._held.discard(handle.slot)
        handle._fetcher = None
        self._free.put(handle.slot)

    def __iter__(self) -> DataFetcher:
        return self

    def __next__(self) -> Handle:
        return self.get()

    def close(self) -> None:
        """Stop and join the workers (killing stragglers) and unlink the shared memory."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        for proc in self._workers:
            if proc.pid is not None:
                proc.join(timeout=3.0)
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=3.0)
        for q in (self._free, self._ready):
            q.cancel_join_thread()
            q.close()
            q.join_thread()
        self.pool.close()

    def __enter__(self) -> DataFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


def _take_slot(free: Any, stop: Any) -> int | None:
    while not stop.is_set():
        try:
            return free.get(timeout=0.1)
        except queue.Empty:
            continue
    return None


def _worker_main(index: int, n_workers: int, addresses: list[str], requests: Iterable[Any],
                 process: Process | None, shm_name: str, n_slots: int, slot_bytes: int,
                 timeout: float, retries: int, free: Any, ready: Any, stop: Any) -> None:
    """Worker process body: request, process, wait for a slot, write, announce."""
    from caraml.req_rep import Client

    pool = clients = None
    try:
        pool = SlotPool(n_slots, slot_bytes, name=shm_name)
        clients = [Client(a, timeout=timeout, retries=retries) for a in addresses]
        for k, request in enumerate(itertools.islice(requests, index, None, n_workers)):
            if stop.is_set():
                break
            reply = clients[(index + k) % len(clients)].request(request)
            batch = reply if process is None else process(reply)
            slot = _take_slot(free, stop)
            if slot is None:
                break
            try:
                layout: Layout = pool.write(slot, batch)
            except BaseException:
                free.put(slot)
                raise
            ready.put(("batch", index, slot, layout))
        ready.put(("done", index, None, None))
    except BaseException as exc:
        ready.put(("error", index, None, (type(exc).__name__, str(exc), traceback.format_exc())))
    finally:
        for client in clients or ():
            client.close()
        if pool is not None:
            pool.close()
