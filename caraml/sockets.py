"""Socket helpers: one shared context per process, LINGER=0, size limits, and a base endpoint."""

from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

import zmq

from caraml.auth import Curve, CurveGuard, CurveServer, apply_curve
from caraml.errors import CaramlError, MalformedMessage, RequestTimeout
from caraml.wire import DEFAULT_MAX_SIZE

log = logging.getLogger("caraml")
_OPEN: weakref.WeakSet = weakref.WeakSet()
_LOCK = threading.Lock()


def context() -> zmq.Context:
    """The process-wide ZeroMQ context (re-created automatically in a forked child)."""
    return zmq.Context.instance()


def open_sockets() -> list[zmq.Socket]:
    """Sockets made by caraml in this process that are still open (for leak checks)."""
    with _LOCK:
        return [s for s in list(_OPEN) if not s.closed]


def make_socket(
    kind: int,
    *,
    ctx: zmq.Context | None = None,
    max_size: int | None = None,
    curve: Curve | None = None,
    hwm: int | None = None,
) -> zmq.Socket:
    """Create a socket with LINGER=0, MAXMSGSIZE and optional Curve settings applied.

    Args:
        kind: a zmq socket type such as ``zmq.PUSH``.
        ctx: the context (default: the shared one).
        max_size: peers sending a frame larger than this many bytes are disconnected.
        curve: Curve server or client settings, or None for plain TCP.
        hwm: send and receive high-water mark in messages (default: ZeroMQ's 1000).
    """
    sock = (ctx or context()).socket(kind)
    sock.linger = 0
    if max_size is not None:
        sock.setsockopt(zmq.MAXMSGSIZE, max_size)
    if hwm is not None:
        sock.sndhwm = hwm
        sock.rcvhwm = hwm
    apply_curve(sock, curve)
    with _LOCK:
        _OPEN.add(sock)
    return sock


def attach(sock: zmq.Socket, address: str, bind: bool) -> str:
    """Bind or connect ``sock``; returns the resolved address (port 0 becomes the real port)."""
    try:
        if bind:
            sock.bind(address)
            return sock.last_endpoint.decode()
        sock.connect(address)
        return address
    except zmq.ZMQError as exc:
        sock.close(linger=0)
        verb = "bind" if bind else "connect"
        hint = (
            (
                " (is another process using the port? pick a free one with "
                "caraml.testing.free_port() or bind to port 0)"
            )
            if exc.errno == zmq.EADDRINUSE
            else ""
        )
        raise CaramlError(
            f"cannot {verb} {address!r}: {exc}{hint}; addresses look like "
            "'tcp://127.0.0.1:5555', 'tcp://*:5555' or 'ipc:///tmp/name'"
        ) from None


def send_frames(sock: zmq.Socket, frames: list, flags: int = 0) -> None:
    """Send a multipart message: bytes frames copied (they are small), buffers zero-copy."""
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        sock.send(frame, flags | (zmq.SNDMORE if i < last else 0), copy=type(frame) is bytes)


def recv_frames(sock: zmq.Socket) -> list:
    """Receive one whole multipart message: frame 0 as bytes, later frames zero-copy as zmq.Frame.

    Every part is consumed, whatever frame 0 claims, so the parts of a garbled multipart message
    can never be taken for messages of their own.
    """
    head = sock.recv()
    if not sock.getsockopt(zmq.RCVMORE):
        return [head]
    return recv_parts(sock, head)


def recv_parts(sock: zmq.Socket, head: Any) -> list:
    """``[head, *the frames that follow it]``, for a ``head`` after which RCVMORE was set."""
    frames: list[Any] = [head]
    while True:
        frame = sock.recv(copy=False)
        frames.append(frame)
        if not frame.more:
            return frames


class Endpoint:
    """Base of every caraml socket owner: one socket, closed with LINGER=0, usable with ``with``."""

    def __init__(
        self,
        kind: int,
        address: str,
        bind: bool,
        *,
        max_size: int | None = None,
        curve: Curve | None = None,
        hwm: int | None = None,
    ) -> None:
        self._guard = CurveGuard(curve) if isinstance(curve, CurveServer) else None
        ctx = self._guard.context if self._guard else None
        self.max_size = DEFAULT_MAX_SIZE if max_size is None else max_size
        self._sock = make_socket(kind, ctx=ctx, max_size=max_size, curve=curve, hwm=hwm)
        self.malformed = 0  # count of rejected messages
        try:
            self.address = attach(self._sock, address, bind)
        except CaramlError:
            self._close_guard()
            raise

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran."""
        return self._sock.closed

    def close(self) -> None:
        """Close the socket (LINGER=0: unsent messages are dropped). Safe to call twice."""
        if not self._sock.closed:
            self._sock.close(linger=0)
        self._close_guard()

    def _close_guard(self) -> None:
        if self._guard is not None:
            self._guard.close()
            self._guard = None

    def _poll(self, timeout: float | None) -> None:
        if timeout is not None and not self._sock.poll(int(timeout * 1000), zmq.POLLIN):
            raise RequestTimeout(
                f"nothing arrived on {self.address} within {timeout} s; is the "
                "peer running and connected to this address?"
            )

    def _count_malformed(self, exc: MalformedMessage) -> None:
        self.malformed += 1
        if self.malformed <= 10 or self.malformed % 1000 == 0:
            log.warning(
                "%s rejected malformed message #%d: %s", type(self).__name__, self.malformed, exc
            )

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
