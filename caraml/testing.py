"""Test fixtures for code built on caraml: free loopback ports and a thread/socket/shm/process leak check."""

from __future__ import annotations

import multiprocessing
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from caraml.errors import MalformedMessage
from caraml.reader import decode
from caraml.shm import SEGMENT_PREFIX
from caraml.sockets import open_sockets
from caraml.wire import MAGIC, serialize

SHM_DIR = "/dev/shm"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now (ask the kernel for one)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def free_address(host: str = "127.0.0.1") -> str:
    """``tcp://host:port`` with a free port, for servers in tests."""
    return f"tcp://{host}:{free_port(host)}"


def caraml_segments(all_processes: bool = False) -> set[str]:
    """Names of the caraml shared-memory segments this process created (or, with
    ``all_processes``, that any process on the machine created)."""
    prefix = SEGMENT_PREFIX if all_processes else f"{SEGMENT_PREFIX}{os.getpid()}_"
    try:
        return {n for n in os.listdir(SHM_DIR) if n.startswith(prefix)}
    except FileNotFoundError:
        return set()


def _is_zmq_gc(thread: threading.Thread) -> bool:
    """pyzmq's zero-copy garbage collector thread lives for the whole process by design."""
    return type(thread).__name__ == "GarbageCollectorThread"


@dataclass
class Snapshot:
    """What a process holds at one moment: threads, caraml sockets, segments, child processes."""

    threads: set[int] = field(default_factory=set)
    sockets: int = 0
    segments: set[str] = field(default_factory=set)
    children: set[int] = field(default_factory=set)

    @classmethod
    def take(cls) -> Snapshot:
        """Record the current state."""
        return cls(
            threads={t.ident for t in threading.enumerate() if t.ident is not None},
            sockets=len(open_sockets()),
            segments=caraml_segments(),
            children={p.pid for p in multiprocessing.active_children()},
        )


class LeakChecker:
    """Fails when threads, caraml sockets, shm segments or child processes outlive a block.

    Example::

        with LeakChecker():
            with Server(addr, handler) as server: ...
    """

    def __init__(self, timeout: float = 5.0) -> None:
        self.timeout = timeout
        self.before = Snapshot.take()

    def leaks(self) -> list[str]:
        """Describe what exists now that did not exist at construction."""
        now = Snapshot.take()
        out = []
        threads = [
            t.name
            for t in threading.enumerate()
            if t.ident not in self.before.threads and not _is_zmq_gc(t)
        ]
        if threads:
            out.append(f"threads still running: {threads}")
        if now.sockets > self.before.sockets:
            out.append(f"{now.sockets - self.before.sockets} caraml socket(s) not closed")
        if now.segments - self.before.segments:
            out.append(f"shared memory not unlinked: {sorted(now.segments - self.before.segments)}")
        if now.children - self.before.children:
            out.append(f"child processes alive: {sorted(now.children - self.before.children)}")
        return out

    def check(self) -> None:
        """Wait up to ``timeout`` for things to wind down, then raise AssertionError on leaks."""
        deadline = time.monotonic() + self.timeout
        while True:
            leaks = self.leaks()
            if not leaks or time.monotonic() > deadline:
                break
            time.sleep(0.02)  # polling with a deadline, not synchronization
        if leaks:
            raise AssertionError(
                "caraml leak check failed: "
                + "; ".join(leaks)
                + " (close every endpoint, proxy and DataFetcher)"
            )

    def __enter__(self) -> LeakChecker:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.check()


def _valid_samples() -> list[list[bytes]]:
    big = np.arange(1024, dtype=np.float64)
    objs = [
        {"obs": np.zeros((2, 3), np.float32), "r": 1.5},
        [1, "a", b"xy", None],
        big,
        (big, {"k": b"v" * 4000}),
    ]
    return [[bytes(memoryview(f)) for f in serialize(o)] for o in objs]


def _mutate(rng: random.Random, frames: list[bytes]) -> list[bytes]:
    frames = list(frames)
    choice = rng.randrange(7)
    if choice == 0:  # random bytes, 0 to 3 frames
        return [rng.randbytes(rng.randrange(64)) for _ in range(rng.randrange(1, 4))]
    if choice == 1:  # right magic, random rest
        return [MAGIC + rng.randbytes(rng.randrange(40))]
    if choice == 2 and len(frames) > 1:  # a buffer frame missing
        del frames[rng.randrange(1, len(frames))]
        return frames
    if choice == 3:  # truncated header
        return [frames[0][: rng.randrange(len(frames[0]))], *frames[1:]]
    if choice == 4:  # one flipped byte in the header
        head = bytearray(frames[0])
        i = rng.randrange(len(head))
        head[i] ^= 1 << rng.randrange(8)
        return [bytes(head), *frames[1:]]
    if choice == 5:  # an extra frame
        return [*frames, rng.randbytes(rng.randrange(16))]
    head = bytearray(frames[0])  # a random run of garbage written into the header
    start = rng.randrange(len(head))
    head[start : start + 8] = rng.randbytes(8)
    return [bytes(head), *frames[1:]]


def garbled_messages(count: int, seed: int = 0) -> Iterator[list[bytes]]:
    """Yield ``count`` multipart messages that are all invalid caraml messages (for fuzzing).

    They mix random bytes, foreign data with the right magic, truncated and bit-flipped headers,
    missing and extra frames; each one is checked to be rejected by :func:`caraml.deserialize`.
    """
    rng = random.Random(seed)
    samples = _valid_samples()
    made = 0
    while made < count:
        frames = _mutate(rng, rng.choice(samples))
        try:
            decode(frames)
        except MalformedMessage:
            made += 1
            yield frames
