"""Fuzzing a run's ports: random objects, garbled caraml messages, raw junk TCP connections.

Test helpers (not part of the installed package): they only ever talk to 127.0.0.1.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import zmq

from caraml.wire import serialize

_KEYS = [
    "obs", "action", "reward", "terminated", "truncated", "version", "segments", "timeout", "id",
    "source", "step", "scalars", "index", "env_steps", "episode_returns", "op", "batch_size",
    "params", "act", "rew", "discount", "obs_table", "obs_idx", "next_obs_idx", "not",
]  # fmt: skip
_NUMBERS = [0, 1, -1, 2, 3, 7, 2**31, 2**62, -(2**40), 0.5, -0.0, 1e300, float("nan"), float("inf")]
_DTYPES = ["bool", "int8", "uint8", "int32", "int64", "uint64", "float16", "float32", "float64",
           "complex64", "S3", "U2"]  # fmt: skip


def junk_array(rng: random.Random) -> np.ndarray:
    """A small array of a random dtype and shape (0-d, empty and odd shapes included)."""
    shape = tuple(rng.choice([0, 1, 2, 3, 4, 5, 8]) for _ in range(rng.randint(0, 4)))
    dtype = np.dtype(rng.choice(_DTYPES))
    size = int(np.prod(shape))
    if dtype.kind in "SU":
        return np.array(["x"] * size, dtype).reshape(shape)
    values = np.array([rng.choice(_NUMBERS[:6]) for _ in range(size)], np.float64)
    with np.errstate(all="ignore"):
        return values.reshape(shape).astype(dtype)


def junk_object(rng: random.Random, depth: int = 0) -> Any:
    """A random object of the types caraml carries: scalars, strings, bytes, arrays, lists, dicts."""
    pick = rng.randint(0, 9 if depth < 3 else 5)
    if pick == 0:
        return rng.choice(_NUMBERS)
    if pick == 1:
        return rng.choice(["", "x", "learner", "evaluator", "sample", "stats", "a" * 300])
    if pick == 2:
        return rng.choice([None, True, False, b"", b"\x00" * 9])
    if pick in (3, 4, 5):
        return junk_array(rng)
    if pick == 6:
        return [junk_object(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return {rng.choice(_KEYS): junk_object(rng, depth + 1) for _ in range(rng.randint(0, 8))}


def junk_objects(rng: random.Random, n: int) -> Iterator[Any]:
    """`n` random objects."""
    for _ in range(n):
        yield junk_object(rng)


def garbled(rng: random.Random) -> list[bytes]:
    """The frames of a caraml message of random content, damaged one of several ways."""
    frames = [bytes(f) for f in serialize(junk_object(rng))]
    how = rng.randint(0, 4)
    if how == 0:  # flip bytes of the header
        head = bytearray(frames[0])
        for _ in range(rng.randint(1, 8)):
            head[rng.randrange(len(head))] = rng.randrange(256)
        frames[0] = bytes(head)
    elif how == 1:  # truncate the header
        frames[0] = frames[0][: rng.randrange(len(frames[0]))]
    elif how == 2:  # extra or missing frames
        extra = len(frames) == 1 or rng.random() < 0.5
        frames = frames + [rng.randbytes(rng.randint(0, 64))] if extra else frames[:-1]
    elif how == 3:  # not caraml at all
        frames = [rng.randbytes(rng.randint(0, 200)) for _ in range(rng.randint(1, 3))]
    elif how == 4:  # a header whose JSON tree is cut short
        frames = [frames[0][:12] + b'{"d":{"obs":'] + frames[1:]
    return frames


def socket_types(service: str) -> list[int]:
    """ZeroMQ socket types that can talk to the socket bound for `service`."""
    known = {
        "experience": [zmq.PUSH],
        "metrics": [zmq.PUSH],
        "replay": [zmq.PUSH],
        "batches": [zmq.DEALER],
        "params": [zmq.DEALER],
        "replay-sample": [zmq.DEALER],
        "params-pub": [zmq.XSUB],
        "learner-goal": [zmq.PUSH],
    }
    return known.get(service, [zmq.PUSH, zmq.DEALER, zmq.XSUB])


def flood(address: str, kind: int, messages: list[list[bytes]], deadline_s: float = 60.0) -> int:
    """Send `messages` (frame lists) to `address` from one socket of `kind`; returns how many
    went out before `deadline_s` (a DEALER's replies are drained and thrown away)."""
    ctx = zmq.Context.instance()
    sock = ctx.socket(kind)
    sock.linger = 0
    sock.sndtimeo = 200
    sock.connect(address)
    sent, deadline = 0, time.monotonic() + deadline_s
    try:
        for frames in messages:
            if kind == zmq.DEALER:
                frames = [b"", *frames]
            if kind == zmq.XSUB:
                frames = [b"\x01" + frames[0][:32], *frames[1:]]
            while time.monotonic() < deadline:  # a full queue (a slow server): try again
                while kind == zmq.DEALER and sock.poll(0, zmq.POLLIN):
                    sock.recv_multipart()
                try:
                    sock.send_multipart(frames)
                    sent += 1
                    break
                except zmq.Again:
                    continue
    finally:
        sock.close(linger=0)
    return sent


def junk_connections(host: str, port: int, count: int, rng: random.Random) -> int:
    """Open `count` raw TCP connections that send random bytes (some start like a ZMTP greeting)
    and close; returns how many connected (a refused or timed-out connect is tried again, up to
    5 times: a loaded listener's backlog can be full for a moment)."""
    greeting = b"\xff" + b"\x00" * 8 + b"\x7f\x03\x00NULL" + b"\x00" * 16
    connected = 0
    for _ in range(count):
        for _attempt in range(5):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.settimeout(2.0)
                try:
                    sock.connect((host, port))
                except OSError:
                    continue
                connected += 1
                head = greeting[: rng.randint(0, len(greeting))] if rng.random() < 0.5 else b""
                try:
                    sock.sendall(head + rng.randbytes(rng.randint(0, 512)))
                except OSError:
                    pass  # the peer closed first: it refused the junk, which is fine
                break
    return connected


def http_junk(host: str, port: int, count: int, rng: random.Random) -> int:
    """Send `count` junk HTTP requests (bad methods, huge or binary paths, broken headers,
    random bytes) to a `/metrics` port, one connection each; returns how many got an answer or a
    clean close. Afterwards a plain `GET /metrics` must still answer 200 (else AssertionError)."""
    import urllib.request

    answered = 0
    for _ in range(count):
        request = rng.choice(
            [
                b"GET /" + rng.randbytes(rng.randint(0, 200)) + b" HTTP/1.1\r\n\r\n",
                b"POST /metrics HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n" + rng.randbytes(64),
                b"BREW /metrics HTTP/1.1\r\nHost: \xff\xfe\r\n\r\n",
                b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 70_000 + b"\r\n\r\n",
                rng.randbytes(rng.randint(1, 512)),
            ]
        )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(5.0)
            try:
                sock.connect((host, port))
                sock.sendall(request)
                sock.shutdown(socket.SHUT_WR)
                sock.recv(4096)
                answered += 1
            except OSError:
                continue
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10) as reply:
        assert reply.status == 200 and b"surreal_process_restarts" in reply.read()
    return answered
