"""Request-reply: a lazy-pirate Client (timeout, socket reset, retry) and a threaded Server.

Delivery semantics: lockstep. A Client sends one request and waits for its reply; when none comes
within ``timeout`` it closes and reopens its socket and sends the request again, up to ``retries``
more times, then raises RequestTimeout. A request may therefore be handled more than once: make
handlers idempotent or tolerate duplicates. A Server answers every request, one at a time: a
malformed request or a handler exception gets an error reply (the Client raises it as a
CaramlError) and is counted and logged; the server keeps serving. A message without a request
envelope (from a raw TCP peer speaking old ZMTP, say) cannot be answered: it is counted in
``.dropped`` and ``.malformed`` and dropped, and never disturbs the replies to other clients.

Long polls: a handler may return :class:`Later` instead of a reply ("not yet"). The server parks
the request (at most ``max_parked`` at once; past that it answers at once) and answers it when
``ready()`` holds after a :meth:`Server.wake` (called by another thread when its state changed),
or at the request's deadline, with ``answer()`` either way. Waiting clients then cost one
request per change, not one per poll interval.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from caraml.auth import Curve
from caraml.errors import MalformedMessage, RemoteError, RequestTimeout
from caraml.reader import decode, deserialize
from caraml.sockets import Endpoint, attach, make_socket, recv_frames, send_frames
from caraml.wire import KIND_DATA, KIND_ERROR, serialize

log = logging.getLogger("caraml")
_ids = itertools.count()


@dataclass
class Later:
    """A handler's "not yet": answer with ``answer()`` once ``ready()`` or after ``wait_s``.

    ``ready`` and ``answer`` run in the server's thread, on :meth:`Server.wake` and at the
    deadline; they must be cheap (the server checks every parked request on each wake).
    """

    ready: Callable[[], bool]
    answer: Callable[[], Any]
    wait_s: float


class Client(Endpoint):
    """Sends requests to a Server (or a router-dealer Proxy) and returns the replies."""

    def __init__(
        self,
        address: str,
        timeout: float = 5.0,
        retries: int = 3,
        *,
        max_size: int | None = None,
        curve: Curve | None = None,
    ) -> None:
        self._target = address
        self.timeout, self.retries = timeout, retries
        super().__init__(zmq.REQ, address, False, max_size=max_size, curve=curve)

    def request(self, obj: Any, timeout: float | None = None) -> Any:
        """Send ``obj`` and return the server's reply.

        Args:
            obj: any serializable object.
            timeout: seconds to wait per attempt (default: the client's ``timeout``).

        Raises:
            RequestTimeout: no reply after ``1 + retries`` attempts.
            RemoteError: the server rejected the request or its handler raised.
            MalformedMessage: the reply was not a valid caraml message.
        """
        frames = serialize(obj)
        wait_ms = int(1000 * (self.timeout if timeout is None else timeout))
        for _ in range(1 + self.retries):
            try:
                # a REQ socket with no peer to send to (e.g. between the reconnects of a refused
                # handshake) blocks in send for good: wait for it to be writable within the
                # attempt's time instead, so that a request always ends within its attempts
                sent = self._sock.poll(wait_ms, zmq.POLLOUT) and self._send_now(frames)
                ready = sent and self._sock.poll(wait_ms, zmq.POLLIN)
            except BaseException:  # e.g. Ctrl-C while waiting: leave a usable socket behind
                self._reset()
                raise
            if ready:
                kind, reply = decode(recv_frames(self._sock), self.max_size)
                if kind == KIND_DATA:
                    return reply
                raise RemoteError(f"server at {self._target} answered with an error: {reply}")
            self._reset()
        raise RequestTimeout(
            f"no reply from {self._target} after {1 + self.retries} attempts of {wait_ms / 1000} s;"
            " check that the server runs and listens there, or raise timeout/retries"
        )

    def _send_now(self, frames: list) -> bool:
        """Send without blocking; False when the peer that made the socket writable went away
        in between (e.g. its handshake was refused): the attempt failed, as with no reply."""
        try:
            send_frames(self._sock, frames, zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _reset(self) -> None:
        """Lazy pirate: a REQ socket that missed a reply is stuck, so replace it."""
        self._sock.close(linger=0)
        self._sock = make_socket(zmq.REQ, max_size=self.max_size, curve=self.curve)
        attach(self._sock, self._target, False)


class Server(Endpoint):
    """Answers requests with ``handler(request) -> reply``, in a thread or in the caller.

    Use ``start()``/``stop()`` (or ``with Server(...) as s:``) to serve in a background thread,
    or ``serve_forever()`` to serve in the calling thread until ``stop()`` is called elsewhere.
    ``bind=False`` connects to a router-dealer Proxy's backend instead of binding.
    """

    def __init__(
        self,
        address: str,
        handler: Callable[[Any], Any],
        bind: bool = True,
        *,
        max_size: int | None = None,
        curve: Curve | None = None,
        max_parked: int = 16384,
    ) -> None:
        # A ROUTER, not a REP: libzmq's REP can lose the state of its reply routing after a
        # garbled request from a peer that has already gone (junk TCP connections speaking
        # ZMTP 1.0), and then sends the next client's reply nowhere. Here the envelope is ours.
        super().__init__(zmq.ROUTER, address, bind, max_size=max_size, curve=curve)
        self.handler = handler
        self.served = 0
        self.handler_errors = 0
        self.dropped = 0  # messages without a reply envelope: counted in .malformed too, unanswered
        control = f"inproc://caraml-server-stop-{id(self)}-{next(_ids)}"
        self._ctrl_recv = make_socket(zmq.PAIR)
        self._ctrl_recv.bind(control)
        self._ctrl_send = make_socket(zmq.PAIR)
        self._ctrl_send.connect(control)
        self._ctrl_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()
        self._done = threading.Event()
        self.max_parked = max_parked
        self._parked: dict[int, tuple[list[bytes], Later]] = {}  # id -> (envelope, later)
        self._deadlines: list[tuple[float, int]] = []  # a heap of (deadline, id); lazily pruned
        self.answered_later = 0
        """Requests answered after they were parked (on a wake or at their deadline)."""

    def start(self) -> Server:
        """Serve in a daemon thread; returns self. The socket is already bound, so clients may
        connect and send as soon as the constructor returned."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self.serve_forever, daemon=True, name=f"caraml-server {self.address}"
            )
            self._thread.start()
            self._serving.wait()
        return self

    def serve_forever(self) -> None:
        """Answer requests in the calling thread until :meth:`stop` is called."""
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._ctrl_recv, zmq.POLLIN)
        self._serving.set()
        try:
            while True:
                events = dict(poller.poll(self._poll_ms()))
                if self._ctrl_recv in events:
                    if self._ctrl_recv.recv() == b"stop":
                        return
                    self._answer_ready()
                if self._sock in events:
                    self._serve_one()
                self._answer_due()
        finally:
            self._parked.clear()  # their clients time out and ask again
            self._deadlines.clear()
            self._done.set()

    def wake(self) -> None:
        """Answer the parked requests whose ``ready()`` now holds (thread-safe; from any thread)."""
        with self._ctrl_lock:
            if not self._ctrl_send.closed:
                self._ctrl_send.send(b"wake")

    @property
    def parked(self) -> int:
        """How many requests wait for an answer now."""
        return len(self._parked)

    def _poll_ms(self) -> int | None:
        while self._deadlines and self._deadlines[0][1] not in self._parked:
            heapq.heappop(self._deadlines)  # answered on a wake already
        if not self._deadlines:
            return None
        return max(0, int(1000 * (self._deadlines[0][0] - time.monotonic())) + 1)

    def _answer_ready(self) -> None:
        """On a wake: answer each parked request whose ``ready()`` holds."""
        for key, (_, later) in list(self._parked.items()):
            try:
                finished = later.ready()
            except Exception:  # noqa: BLE001 - a failing ready() answers now, not never
                log.exception("a parked request's ready() raised on server %s", self.address)
                finished = True
            if finished:
                self._answer_later(key)

    def _answer_due(self) -> None:
        """Answer the parked requests whose deadline passed (O(log n) each; none due: O(1))."""
        now = time.monotonic()
        while self._deadlines and self._deadlines[0][0] <= now:
            _, key = heapq.heappop(self._deadlines)
            if key in self._parked:
                self._answer_later(key)

    def _answer_later(self, key: int) -> None:
        envelope, later = self._parked.pop(key)
        reply = self._finish(later.answer, parked=True)
        self.answered_later += 1  # before the send: a client that has its answer sees it counted
        send_frames(self._sock, [*envelope, *reply])

    def _serve_one(self) -> None:
        """Answer one message: ``[routing ids..., b"", request frames...]`` on the ROUTER."""
        parts = self._sock.recv_multipart(copy=False)
        split = next((i for i, part in enumerate(parts) if len(part) == 0), -1)
        if split < 0:  # no envelope: not from a REQ/DEALER peer, and there is nobody to answer
            self.dropped += 1
            self._count_malformed(MalformedMessage("request without a reply envelope"))
            return
        envelope = [p.bytes for p in parts[: split + 1]]
        request = parts[split + 1 :]
        if request:
            request[0] = request[0].bytes
        answer = self._answer(request)
        if isinstance(answer, Later):
            try:
                park = len(self._parked) < self.max_parked and not answer.ready()
            except Exception:  # noqa: BLE001 - answered now by answer() instead
                log.exception("a new parked request's ready() raised on server %s", self.address)
                park = False
            if park:
                key = next(_ids)
                self._parked[key] = (envelope, answer)
                heapq.heappush(self._deadlines, (time.monotonic() + answer.wait_s, key))
                return
            answer = self._finish(answer.answer, parked=True)  # full, or ready: answer at once
        send_frames(self._sock, [*envelope, *answer])

    def _answer(self, frames: list) -> list | Later:
        try:
            request = deserialize(frames, self.max_size)
        except MalformedMessage as exc:
            self._count_malformed(exc)
            return serialize(f"malformed request: {exc}", kind=KIND_ERROR)
        return self._finish(lambda: self.handler(request))

    def _finish(self, handle: Callable[[], Any], parked: bool = False) -> Any:
        """The reply frames of ``handle()``, or an error reply; a Later passes through (unless
        the request was parked already: a Later's ``answer()`` must give a reply)."""
        try:
            reply = handle()
            if isinstance(reply, Later):
                if not parked:
                    return reply
                raise TypeError("a Later's answer() returned another Later")
            frames = serialize(reply)
            self.served += 1
            return frames
        except Exception as exc:  # a failing handler must not take the server down
            self.handler_errors += 1
            log.exception("handler of server %s raised", self.address)
            return serialize(f"handler raised {type(exc).__name__}: {exc}", kind=KIND_ERROR)

    def stop(self) -> None:
        """Stop serving and close every socket; returns when the loop has ended."""
        if self._ctrl_send.closed:
            return
        if self._serving.is_set() and not self._done.is_set():
            with self._ctrl_lock:
                self._ctrl_send.send(b"stop")
            self._done.wait()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._ctrl_lock:  # wake() from another thread may race the close
            self._ctrl_send.close(linger=0)
        self._ctrl_recv.close(linger=0)
        super().close()

    def close(self) -> None:
        """Same as :meth:`stop`."""
        self.stop()

    def __enter__(self) -> Server:
        return self.start()
