"""Test fixtures for code built on caraml: free loopback ports, a thread/socket/shm/process leak
check, fuzzing input (garbled messages, junk TCP connections), and the CPU cost of receiving
large arrays against raw pyzmq (:func:`receive_cost`)."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import zmq

from caraml.errors import MalformedMessage
from caraml.reader import deserialize
from caraml.shm import SEGMENT_PREFIX
from caraml.sockets import make_socket, open_sockets
from caraml.wire import KIND_DATA, KIND_ERROR, MAGIC, PREFIX, VERSION, serialize

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


def _prefixed(kind: int, tree: object, inline: bytes = b"", nframes: int = 0) -> bytes:
    """A frame 0 written by hand (to craft messages the encoder never makes)."""
    body = json.dumps(tree, separators=(",", ":")).encode()
    return PREFIX.pack(MAGIC, VERSION, kind, nframes, len(body)) + body + inline


def _crafted(rng: random.Random, samples: list[list[bytes]]) -> list[bytes]:
    """Invalid by construction: each is a case a decoder once got wrong."""
    choice = rng.randrange(7)
    if choice == 0:  # a whole valid one-frame message, then parts the header does not name
        extra = [rng.randbytes(rng.randrange(1, 16)) for _ in range(rng.randrange(1, 3))]
        return [samples[0][0], *extra]
    if choice == 1:  # a junk frame, then a whole valid message as the later parts
        return [rng.randbytes(rng.randrange(1, 16)), *rng.choice(samples)]
    if choice == 2:  # a lone small array in an error reply (same bytes every time: caches)
        return [serialize(np.arange(4, dtype=np.int32), kind=KIND_ERROR)[0]]
    if choice == 3:  # a lone large array in an error reply
        head, data = serialize(np.arange(1024, dtype=np.float64), kind=KIND_ERROR)
        return [head, bytes(memoryview(data))]
    if choice == 4:  # zero-byte items: 2^29 elements of |S0 in ~70 bytes
        dtype = rng.choice(["|S0", "<U0", []])
        return [_prefixed(KIND_DATA, [{"n": [0, dtype, [1 << 29], "C"]}, [0]])]
    if choice == 5:  # one inline buffer named by many bytes values (decodes to copies)
        buf = rng.randbytes(2000)
        return [_prefixed(KIND_DATA, [[{"b": 0}] * 500, [len(buf)]], buf)]
    # an array that names the same large frame many times over with zero-byte items
    return [_prefixed(KIND_DATA, [[{"n": [0, "|S0", [1 << 20], "C"]}] * 50, [0]])]


def garbled_messages(count: int, seed: int = 0) -> Iterator[list[bytes]]:
    """Yield ``count`` multipart messages that are all invalid caraml messages (for fuzzing).

    They mix random bytes, foreign data with the right magic, truncated and bit-flipped headers,
    missing and extra frames (each checked to be rejected by :func:`caraml.deserialize`), and,
    one in four, cases invalid by construction that decoders once accepted: a valid message
    followed or preceded by parts its header does not name (a receiver must drop the whole
    multipart message), a lone array in an error reply (repeated, so decode caches see it
    again), and small messages that would decode into huge objects (zero-byte items such as
    ``|S0`` with a shape of 2^29, or one buffer named by hundreds of values).
    """
    rng = random.Random(seed)
    samples = _valid_samples()
    made = 0
    while made < count:
        if rng.randrange(4) == 0:
            made += 1
            yield _crafted(rng, samples)
            continue
        frames = _mutate(rng, rng.choice(samples))
        try:
            deserialize(frames)
        except MalformedMessage:
            made += 1
            yield frames


def junk_connections(address: str, count: int, seed: int = 0) -> None:
    """Open ``count`` raw TCP connections to a caraml endpoint's ``tcp://127.0.0.1:PORT``, send
    each up to 200 random bytes and close it: what a port scanner or a confused peer does.

    Only loopback addresses are accepted (this is a test tool, not a load generator).
    """
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    if host not in ("127.0.0.1", "localhost"):
        raise ValueError(f"junk_connections only targets 127.0.0.1, not {address!r}")
    rng = random.Random(seed)
    for _ in range(count):
        with socket.create_connection(("127.0.0.1", int(port)), timeout=5) as sock:
            try:
                sock.sendall(rng.randbytes(rng.randrange(1, 200)))
            except OSError:  # the peer may hang up first: that is fine
                pass


def _cost_sender(caraml_address: str, raw_address: str, size: int, count: int, ctrl) -> None:
    """Sender process of :func:`receive_cost`: ``count`` arrays down the path it is told."""
    from caraml.push_pull import Pusher

    arr = np.ones(size, np.uint8)
    pusher = Pusher(caraml_address, hwm=count)
    raw = make_socket(zmq.PUSH, hwm=count)
    raw.connect(raw_address)
    try:
        while (path := ctrl.recv()) is not None:
            for _ in range(count):
                if path == "caraml":
                    pusher.push(arr)
                else:
                    raw.send(arr, copy=False)
        ctrl.send("bye")  # every message was taken: closing now loses nothing
    finally:
        pusher.close()
        raw.close()


def receive_cost(size: int = 16 << 20, count: int = 4, rounds: int = 7) -> dict[str, dict]:
    """What receiving ``size``-byte uint8 arrays costs this process with a caraml ``Puller``
    and with raw pyzmq ``recv(copy=False)`` + ``np.frombuffer``, over ipc from one sender process.

    Rounds alternate the two paths (and their order); in each, the sender streams ``count``
    arrays on one path while this process times receiving them: CPU seconds from
    ``time.process_time`` (every thread of this process, libzmq's I/O thread included, which
    does the copying) and wall seconds, per message. One warm-up round is left out.

    Returns:
        ``{"caraml": {"cpu": [...], "wall": [...]}, "raw": {...}}``, one entry per round.
    """
    import multiprocessing
    import tempfile

    from caraml.push_pull import Puller

    ctx = multiprocessing.get_context("spawn")
    out: dict[str, dict] = {p: {"cpu": [], "wall": []} for p in ("caraml", "raw")}
    with tempfile.TemporaryDirectory() as tmp:
        puller = Puller(f"ipc://{tmp}/caraml", hwm=count)
        raw = make_socket(zmq.PULL, hwm=count)
        raw.bind(f"ipc://{tmp}/raw")
        ctrl, child = ctx.Pipe()
        proc = ctx.Process(
            target=_cost_sender, args=(puller.address, f"ipc://{tmp}/raw", size, count, child)
        )
        proc.start()
        try:
            for r in range(rounds + 1):
                for path in ("raw", "caraml") if r % 2 else ("caraml", "raw"):
                    cpu, wall = time.process_time(), time.perf_counter()
                    ctrl.send(path)
                    for _ in range(count):
                        if path == "caraml":
                            arr = puller.pull(timeout=120)
                        else:
                            if not raw.poll(120_000):
                                raise TimeoutError("the sender process stopped sending")
                            arr = np.frombuffer(raw.recv(copy=False).buffer, np.uint8)
                        assert arr.nbytes == size
                    if r:
                        out[path]["cpu"].append((time.process_time() - cpu) / count)
                        out[path]["wall"].append((time.perf_counter() - wall) / count)
            ctrl.send(None)
            ctrl.poll(30)
        finally:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join()
            puller.close()
            raw.close()
            ctrl.close()
            child.close()
    return out
