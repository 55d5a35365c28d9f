"""DataFetcher: worker processes fetch and preprocess batches into shared memory for the learner.

Each worker process takes every ``n_workers``-th request from ``requests``, sends it to a server
(round-robin over ``addresses``; caraml Servers or a router-dealer Proxy), runs ``process`` on the
reply, waits for a free slot (back-pressure: with every slot in use the workers wait), writes the
resulting ``dict[str, np.ndarray]`` into the slot and hands the slot's index and layout to the main
process over a pipe of its own. The main process only reads that short message and builds
zero-copy views, so networking, deserialization and preprocessing never run on it. Release each handle (``fetcher.release(h)`` or ``with h:``) once
its arrays are no longer needed; the slot is then overwritten.
"""

from __future__ import annotations

import collections
import itertools
import json
import multiprocessing as mp
import os
import select
import struct
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from caraml.errors import CaramlError, SlotTooSmall, WorkerDied
from caraml.shm import Layout, SlotPool
from caraml.wire import dtype_from_json

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

    def __init__(
        self,
        addresses: str | Sequence[str],
        requests: Iterable[Any],
        process: Process | None = None,
        *,
        slot_bytes: int,
        n_slots: int = 4,
        n_workers: int = 1,
        timeout: float = 10.0,
        retries: int = 3,
        start_method: str = "spawn",
    ) -> None:
        if start_method == "fork":
            raise CaramlError(
                "DataFetcher cannot fork (ZeroMQ contexts break); use 'spawn' or 'forkserver'"
            )
        addresses = [addresses] if isinstance(addresses, str) else list(addresses)
        ctx = mp.get_context(start_method)
        self.pool = SlotPool(n_slots, slot_bytes)
        # free slots travel as 4-byte records on one pipe that every worker reads: records of
        # at most PIPE_BUF bytes are written and read atomically, so no lock is needed
        self._free_read, self._free_write = ctx.Pipe(duplex=False)
        for slot in range(n_slots):
            self._put_free(slot)
        self._poller = select.poll()
        self._by_fd: dict[int, tuple[Connection, int]] = {}
        self._held: set[int] = set()
        self._view_cache: dict[tuple[int, bytes], dict[str, np.ndarray]] = {}
        self._closed = False
        self._workers: list[Any] = []
        self._inbox: collections.deque = collections.deque()  # (worker, message or None=EOF)
        self._partial: dict[int, bytes] = {}
        self._finished: set[int] = set()
        try:
            for index in range(n_workers):
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_worker_main,
                    name=f"caraml-fetcher-{index}",
                    daemon=True,
                    args=(
                        index,
                        n_workers,
                        addresses,
                        requests,
                        process,
                        self.pool.name,
                        n_slots,
                        slot_bytes,
                        timeout,
                        retries,
                        self._free_read,
                        writer,
                    ),
                )
                self._workers.append(proc)
                self._by_fd[reader.fileno()] = (reader, index)
                self._poller.register(reader.fileno(), select.POLLIN)
                proc.start()
                writer.close()  # the worker holds the only write end: its death reads as EOF
        except Exception as exc:
            self.close()
            raise CaramlError(
                f"cannot start DataFetcher workers: {exc}; requests and process "
                "must be picklable (a list or itertools.repeat, a top-level "
                "function; not a generator or lambda)"
            ) from exc

    def get(self, timeout: float | None = None) -> Handle:
        """Return the next filled slot.

        Raises:
            StopIteration: every worker has used up its requests.
            WorkerDied: a worker raised (the text carries its traceback) or exited.
            CaramlError: nothing arrived within ``timeout`` seconds.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            while self._inbox:
                handle = self._accept(*self._inbox.popleft())
                if handle is not None:
                    return handle
            if not self._by_fd:
                raise StopIteration
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready = self._poller.poll(None if left is None else int(left * 1000))
            if not ready:
                raise CaramlError(f"no batch within {timeout} s; are the servers answering?")
            for fd, _ in ready:
                self._fill(fd)

    def _fill(self, fd: int) -> None:
        """Read what a worker's pipe holds (often several messages in one system call)."""
        reader, index = self._by_fd[fd]
        data = os.read(fd, 1 << 16)
        if not data:  # the worker's end closed: fine after "done", a death otherwise
            self._forget(reader)
            self._inbox.append((index, None))
            return
        buf = self._partial.pop(fd, b"") + data
        pos = 0
        while len(buf) - pos >= _LEN.size:
            size = _LEN.unpack_from(buf, pos)[0]
            if len(buf) - pos - _LEN.size < size:
                break
            self._inbox.append((index, buf[pos + _LEN.size : pos + _LEN.size + size]))
            pos += _LEN.size + size
        if pos < len(buf):
            self._partial[fd] = buf[pos:]

    def _accept(self, index: int, message: bytes | None) -> Handle | None:
        if message is None:
            if index in self._finished:
                return None
            proc = self._workers[index]
            proc.join(5)
            raise WorkerDied(
                f"DataFetcher worker {index} (pid {proc.pid}) exited with code "
                f"{proc.exitcode} without finishing; see its stderr, and check "
                "memory limits (a negative code is the signal that killed it)"
            )
        kind = message[:1]
        if kind == b"B":
            slot = _SLOT.unpack_from(message, 1)[0]
            self._held.add(slot)
            return Handle(slot, self._views(slot, message[1 + _SLOT.size :]), index, self)
        self._finished.add(index)
        if kind == b"D":
            return None
        name, text, trace = json.loads(message[1:])
        if name == "SlotTooSmall":
            raise SlotTooSmall(f"DataFetcher worker {index}: {text}")
        raise WorkerDied(f"DataFetcher worker {index} failed with {name}: {text}\n{trace}")

    def _views(self, slot: int, layout_json: bytes) -> dict[str, np.ndarray]:
        # A slot's memory never moves, so the arrays over (slot, layout) are made once and
        # handed out again (as a new dict) each time that slot comes back with that layout.
        views = self._view_cache.get((slot, layout_json))
        if views is None:
            layout = [
                (name, dtype_from_json(dt), tuple(shape), off)
                for name, dt, shape, off in json.loads(layout_json)
            ]
            if len(self._view_cache) > 256:
                self._view_cache.clear()
            views = self._view_cache[(slot, layout_json)] = self.pool.view(slot, layout)
        return dict(views)

    def release(self, handle: Handle) -> None:
        """Return ``handle``'s slot to the workers; its arrays must not be used afterwards."""
        if handle.slot not in self._held:
            raise CaramlError(f"slot {handle.slot} is not held (released twice?)")
        self._held.discard(handle.slot)
        handle._fetcher = None
        if not self._closed:  # after close() there is nobody to hand the slot to
            self._put_free(handle.slot)

    def _put_free(self, slot: int) -> None:
        os.write(self._free_write.fileno(), _SLOT.pack(slot))

    def _forget(self, reader: Connection) -> None:
        fd = reader.fileno()
        self._poller.unregister(fd)
        del self._by_fd[fd]
        reader.close()

    def __iter__(self) -> DataFetcher:
        return self

    def __next__(self) -> Handle:
        return self.get()

    def close(self) -> None:
        """Stop and join the workers (killing stragglers) and unlink the shared memory."""
        if self._closed:
            return
        self._closed = True
        for _ in self._workers:
            self._put_free(_STOP)
        for proc in self._workers:
            if proc.pid is not None:
                proc.join(timeout=3.0)
                if proc.is_alive():
                    proc.kill()
                    proc.join(timeout=3.0)
        for reader, _ in list(self._by_fd.values()):
            self._forget(reader)
        self._free_read.close()
        self._free_write.close()
        self._view_cache.clear()  # drop the cached views so the mapping can go with the pool
        self.pool.close()

    def __enter__(self) -> DataFetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


_SLOT = struct.Struct("<i")
_LEN = struct.Struct("<I")


def _send(out: Connection, message: bytes) -> None:
    data = memoryview(_LEN.pack(len(message)) + message)
    while data:
        data = data[os.write(out.fileno(), data) :]


_STOP = -1


def _worker_main(
    index: int,
    n_workers: int,
    addresses: list[str],
    requests: Iterable[Any],
    process: Process | None,
    shm_name: str,
    n_slots: int,
    slot_bytes: int,
    timeout: float,
    retries: int,
    free: Any,
    out: Connection,
) -> None:
    """Worker process body: request, process, wait for a slot, write, announce."""
    from caraml.req_rep import Client

    pool = clients = None
    try:
        pool = SlotPool(n_slots, slot_bytes, name=shm_name)
        clients = [Client(a, timeout=timeout, retries=retries) for a in addresses]
        for k, request in enumerate(itertools.islice(requests, index, None, n_workers)):
            reply = clients[(index + k) % len(clients)].request(request)
            batch = reply if process is None else process(reply)
            slot = _SLOT.unpack(os.read(free.fileno(), _SLOT.size))[0]  # waits: back-pressure
            if slot == _STOP:
                return
            layout: Layout = pool.write(slot, batch)  # SlotTooSmall ends the fetcher anyway
            _send(out, b"B" + _SLOT.pack(slot) + json.dumps(layout).encode())
        _send(out, b"D")
    except BaseException as exc:
        report = [type(exc).__name__, str(exc), traceback.format_exc()]
        try:
            _send(out, b"E" + json.dumps(report).encode())
        except OSError:
            pass
    finally:
        for client in clients or ():
            client.close()
        if pool is not None:
            pool.close()
