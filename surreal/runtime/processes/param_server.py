"""Parameter server: holds the learner's latest parameters; actors ask only when they changed.

An actor that must wait for a newer version (its pacing, `surreal.runtime.processes.pacing`) asks once
with "wait_for": the server parks the request and answers it when the version arrives (a long
poll), so waiting costs one request per version per actor, not a poll every few milliseconds.

A stall: when actors wait and no version came for `STALL_INTERVALS` times the usual interval
between versions, the learner is waiting for segments that nobody sends (actors stopped before
the others knew, segments lost on the way). The server counts a stall and answers the waiting
actors; each counts it as one version for its credit, sends its share, and the learner goes on.
Only a learner that says it waits counts: one that re-published the version it holds since the
last one (it does so on every empty batch reply). A learner that is gone (killed, restarting)
or busy says nothing, and the actors keep waiting instead of filling the buffer with segments
of a policy that the restarted learner will not have.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import caraml
from surreal.monitoring import logs
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.pacing import LiveActors
from surreal.runtime.wire.guard import PortGuard
from surreal.runtime.wire.ports import NOTHING, GuardedServer, receive
from surreal.runtime.wire.schemas import REQUEST_MAX_BYTES, ParamsAsk, ParamsSchema, params_request

STALL_INTERVALS = 3.0
"""A stall: waiting actors, and no version for this many usual intervals between versions."""
STALL_MIN_S = 0.05
"""... and for at least this long."""


class ParameterStore:
    """The latest published parameters; answers `{"version": have}` requests.

    Requests and publications are checked against their port's schema
    (`surreal.runtime.wire.schemas`): a bad one is counted, logged once per kind and dropped (a bad
    request gets a reply saying so), never raised.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latest: dict = {"version": 0, "step": 0, "params": None}
        self.requests = 0
        self.request_guard = PortGuard("params")
        self.publication_guard = PortGuard("params-pub")
        self._publication = ParamsSchema()
        self.prom: Any = None
        """The process's Prometheus series (`surreal.monitoring.prometheus`), when it has them."""
        self.live = LiveActors()
        self.on_new_version: Callable[[], None] = lambda: None
        """Called after a newer version is kept (the server's wake: parked requests are due)."""
        self.stalls = 0
        """Stalls counted (see the module docstring); sent with every reply."""
        self.interval: float | None = None  # seconds between versions (a moving average)
        self.last_change = time.monotonic()  # the last new version, or the last stall
        self.repeated = float("-inf")
        """When the learner last re-published the version held (it waits for a batch)."""

    @property
    def version(self) -> int:
        return int(self.latest["version"])

    def live_actors(self) -> int:
        """How many actors asked lately (`LiveActors`)."""
        with self._lock:
            return self.live.count()

    def update(self, message: Any) -> None:
        """Keep a publication if it is valid and newer than what is held."""
        checked = self.publication_guard.check(self._publication, message)
        if checked is None:
            return
        if self.prom is not None:
            self.prom.port_traffic("params-pub", "in", checked.get("params"))
            self.prom.set("surreal_policy_version", checked["version"])
        with self._lock:
            held = int(self.latest["version"])
            newer = checked["version"] > held
            if checked["version"] >= held:
                self.latest = checked
        if checked["version"] == held:
            self.repeated = time.monotonic()
        if newer:
            now = time.monotonic()
            if held >= 1:  # from the first publication on: the learner's pace
                gap = (now - self.last_change) / (checked["version"] - held)
                self.interval = gap if self.interval is None else 0.8 * self.interval + 0.2 * gap
            self.last_change = now
            self.on_new_version()

    def check_stall(self, waiting: bool) -> float:
        """Count a stall if one is due (and wake the waiting requests): actors wait and the
        learner, re-publishing its version, says it waits too; returns the seconds until the
        next one could be (the serving loop checks again by then)."""
        if self.interval is None:
            return 0.5
        limit = max(STALL_MIN_S, STALL_INTERVALS * self.interval)
        now = time.monotonic()
        if now - self.last_change < limit:
            return self.last_change + limit - now
        if waiting and self.repeated > self.last_change:  # the learner said it waits
            with self._lock:
                self.stalls += 1
            self.last_change = now
            self.on_new_version()
        return limit

    def handle(self, request: Any) -> dict | caraml.Later:
        """Reply with params only when the requester's version is older than the latest; a
        request with "wait_for" above the latest version is answered when it arrives."""
        ask = self.request_guard.check(params_request, request)
        with self._lock:
            self.requests += 1
            if ask is not None and ask.actor is not None and not self.live.seen(ask.actor):
                self.request_guard.reject(f"actor id {ask.actor} past the id limit", "too-many")
        if ask is not None and ask.wait_for is not None and ask.wait_s > 0:
            want, stalls = ask.wait_for, self.stalls
            if self.version < want:
                return caraml.Later(
                    lambda: self.version >= want or self.stalls > stalls,
                    lambda: self._reply(ask),
                    ask.wait_s,
                )
        return self._reply(ask)

    def _reply(self, ask: ParamsAsk | None) -> dict:
        with self._lock:
            latest = self.latest
            live = self.live.count()
        reply = {
            "version": int(latest["version"]),
            "step": int(latest["step"]),
            "live": live,
            "stalls": self.stalls,
            "starved": int(latest.get("starved", 0)),
        }
        if ask is None:
            reply["error"] = "not a parameter request; send {'version': N}"
        elif latest["params"] is not None and ask.have < reply["version"]:
            reply["params"] = latest["params"]
        if self.prom is not None:
            self.prom.port_traffic("params", "in")
            self.prom.port_traffic("params", "out", reply.get("params"))
        return reply


def serve(comp: Component, address: str, bind: bool = True) -> None:
    """Answer parameter requests on `address` from a store fed by the learner's publications.

    Runs until `comp` is stopping, then closes the sockets and `comp`. `bind=True` binds `address`
    (a single parameter server); `bind=False` connects to a router-dealer proxy's backend (a shard).
    """
    store = ParameterStore()
    store.prom = comp.prom
    subscriber = caraml.Subscriber(comp.address("params-pub").tcp, topics=["params"], hwm=4)
    server = GuardedServer(
        address, store.handle, store.request_guard, bind=bind, max_size=REQUEST_MAX_BYTES
    ).start()
    store.on_new_version = server.wake
    comp.log.info(
        "%s params %s (requests); subscribes params-pub %s",
        "binds" if bind else "serves through the proxy at",
        address,
        comp.address("params-pub").tcp,
    )
    drops = logs.DropReport(comp.log, [store.request_guard, store.publication_guard])
    try:
        wait_s = 0.5
        while not comp.stopping.is_set():
            received = receive(
                lambda wait=wait_s: subscriber.recv(timeout=wait), store.publication_guard
            )
            if received is not NOTHING:
                first = store.latest["params"] is None
                store.update(received[1])
                if first and store.latest["params"] is not None:
                    comp.log.info("first parameters: version %d", store.latest["version"])
            wait_s = min(0.5, max(0.01, store.check_stall(server.parked > 0)))
            if comp.tick(
                {"requests": store.requests, "answered on arrival": server.answered_later},
                {
                    "version": int(store.latest["version"]),
                    "step": int(store.latest["step"]),
                    "live actors": store.live_actors(),
                    "waiting": server.parked,
                    "stalls": store.stalls,
                },
            ):
                drops.check()
    finally:
        drops.check()
        comp.log.info(
            "answered %s requests; held version %d at the end",
            f"{store.requests:,}",
            int(store.latest["version"]),
        )
        server.stop()  # also closes its sockets
        subscriber.close()
        comp.close()


def main(run_dir: str, index: int = 0) -> None:
    """Serve until stopped."""
    comp = Component(run_dir, "param-server", index)
    serve(comp, comp.address("params").bind_tcp)
