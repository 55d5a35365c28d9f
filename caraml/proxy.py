"""Proxies that spread traffic over shards: router-dealer (requests), pull-push, xsub-xpub.

Delivery semantics: "router-dealer" sits between Clients (connect to ``frontend``) and Servers
started with ``bind=False`` (connect to ``backend``); each request goes to the next free server and
its reply back to the right client. "pull-push" fair-queues pushed messages from many pushers over
the pullers connected to ``backend`` (load-balanced replay shards). "xsub-xpub" fans publications
from publishers (connect to ``frontend``) out to subscribers (connect to ``backend``). The proxy
never parses messages, so garbage passes through to the receivers, which reject it. Under
``CARAML_CURVE_KEYS`` both sides are Curve servers (see `caraml.curve_env`).
"""

from __future__ import annotations

import itertools
import threading

import zmq

from caraml.auth import CurveGuard, CurveServer
from caraml.curve_env import env_curve
from caraml.errors import CaramlError
from caraml.sockets import attach, make_socket

KINDS = {
    "router-dealer": (zmq.ROUTER, zmq.DEALER),
    "pull-push": (zmq.PULL, zmq.PUSH),
    "xsub-xpub": (zmq.XSUB, zmq.XPUB),
}
_ids = itertools.count()


class Proxy:
    """Binds ``frontend`` and ``backend`` and forwards between them in a thread until stopped."""

    def __init__(
        self, frontend: str, backend: str, kind: str = "router-dealer", *, hwm: int | None = None
    ) -> None:
        if kind not in KINDS:
            raise CaramlError(f"unknown proxy kind {kind!r}; use one of {sorted(KINDS)}")
        self.kind = kind
        front_type, back_type = KINDS[kind]
        curve = env_curve(bind=True)  # both sides bind: Curve servers under CARAML_CURVE_KEYS
        self._guard = CurveGuard(curve) if isinstance(curve, CurveServer) else None
        ctx = self._guard.context if self._guard else None
        self._front = make_socket(front_type, ctx=ctx, hwm=hwm, curve=curve)
        self._back = make_socket(back_type, ctx=ctx, hwm=hwm, curve=curve)
        try:
            self.frontend = attach(self._front, frontend, True)
            self.backend = attach(self._back, backend, True)
        except CaramlError:
            self._front.close(linger=0)
            self._back.close(linger=0)
            self._close_guard()
            raise
        control = f"inproc://caraml-proxy-{id(self)}-{next(_ids)}"
        self._ctrl_recv = make_socket(zmq.PAIR)
        self._ctrl_recv.bind(control)
        self._ctrl_send = make_socket(zmq.PAIR)
        self._ctrl_send.connect(control)
        self._thread: threading.Thread | None = None

    def start(self) -> Proxy:
        """Start forwarding in a daemon thread; returns self."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name=f"caraml-proxy {self.frontend}"
            )
            self._thread.start()
        return self

    def _run(self) -> None:
        zmq.proxy_steerable(self._front, self._back, None, self._ctrl_recv)

    def stop(self) -> None:
        """Stop forwarding and close every socket (queued messages are dropped)."""
        if self._ctrl_send.closed:
            return
        if self._thread is not None:
            self._ctrl_send.send(b"TERMINATE")
            self._thread.join()
            self._thread = None
        for sock in (self._ctrl_send, self._ctrl_recv, self._front, self._back):
            sock.close(linger=0)
        self._close_guard()

    def _close_guard(self) -> None:
        if self._guard is not None:
            self._guard.close()
            self._guard = None

    close = stop

    def __enter__(self) -> Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
