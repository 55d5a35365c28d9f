"""Parameter server: holds the learner's latest parameters; actors ask only when they changed."""

from __future__ import annotations

import threading
from typing import Any

from surreal.components.common import Component
from surreal.components.ports import NOTHING, GuardedServer, receive
from surreal.guard import PortGuard
from surreal.monitoring import logs
from surreal.schemas import REQUEST_MAX_BYTES, ParamsSchema, params_request


class ParameterStore:
    """The latest published parameters; answers `{"version": have}` requests.

    Requests and publications are checked against their port's schema
    (`surreal.schemas`): a bad one is counted, logged once per kind and dropped (a bad
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

    def update(self, message: Any) -> None:
        """Keep a publication if it is valid and newer than what is held."""
        checked = self.publication_guard.check(self._publication, message)
        if checked is None:
            return
        if self.prom is not None:
            self.prom.port_traffic("params-pub", "in", checked.get("params"))
            self.prom.set("surreal_policy_version", checked["version"])
        with self._lock:
            if checked["version"] >= int(self.latest["version"]):
                self.latest = checked

    def handle(self, request: Any) -> dict:
        """Reply with params only when the requester's version is older than the latest."""
        have = self.request_guard.check(params_request, request)
        with self._lock:
            latest = self.latest
            self.requests += 1
        reply = {"version": int(latest["version"]), "step": int(latest["step"])}
        if have is None:
            reply["error"] = "not a parameter request; send {'version': N}"
        elif latest["params"] is not None and have < reply["version"]:
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
    import caraml

    store = ParameterStore()
    store.prom = comp.prom
    subscriber = caraml.Subscriber(comp.address("params-pub").tcp, topics=["params"], hwm=4)
    server = GuardedServer(
        address, store.handle, store.request_guard, bind=bind, max_size=REQUEST_MAX_BYTES
    ).start()
    comp.log.info(
        "%s params %s (requests); subscribes params-pub %s",
        "binds" if bind else "serves through the proxy at",
        address,
        comp.address("params-pub").tcp,
    )
    drops = logs.DropReport(comp.log, [store.request_guard, store.publication_guard])
    try:
        while not comp.stopping.is_set():
            received = receive(lambda: subscriber.recv(timeout=0.5), store.publication_guard)
            if received is not NOTHING:
                first = store.latest["params"] is None
                store.update(received[1])
                if first and store.latest["params"] is not None:
                    comp.log.info("first parameters: version %d", store.latest["version"])
            if comp.tick(
                {"requests": store.requests},
                {"version": int(store.latest["version"]), "step": int(store.latest["step"])},
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
