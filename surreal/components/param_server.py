"""Parameter server: holds the learner's latest parameters; actors ask only when they changed."""

from __future__ import annotations

import threading

from surreal.components.common import Component


class ParameterStore:
    """The latest published parameters; answers `{"version": have}` requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.latest: dict = {"version": 0, "step": 0, "params": None}
        self.requests = 0

    def update(self, message: dict) -> None:
        """Keep a publication if it is newer than what is held."""
        with self._lock:
            if int(message["version"]) >= int(self.latest["version"]):
                self.latest = message

    def handle(self, request: dict) -> dict:
        """Reply with params only when the requester's version is older than the latest."""
        with self._lock:
            latest = self.latest
            self.requests += 1
        reply = {"version": int(latest["version"]), "step": int(latest["step"])}
        if latest["params"] is not None and int(request.get("version", -1)) < reply["version"]:
            reply["params"] = latest["params"]
        return reply


def serve(comp: Component, address: str, bind: bool = True) -> None:
    """Answer parameter requests on `address` from a store fed by the learner's publications.

    Runs until `comp` is stopping, then closes the sockets and `comp`. `bind=True` binds `address`
    (a single parameter server); `bind=False` connects to a router-dealer proxy's backend (a shard).
    """
    import caraml

    store = ParameterStore()
    subscriber = caraml.Subscriber(comp.address("params-pub").tcp, topics=["params"], hwm=4)
    server = caraml.Server(address, store.handle, bind=bind).start()
    try:
        while not comp.stopping.is_set():
            try:
                _, message = subscriber.recv(timeout=0.5)
            except (caraml.RequestTimeout, caraml.MalformedMessage):
                continue
            store.update(message)
    finally:
        server.stop()  # also closes its sockets
        subscriber.close()
        comp.close()


def main(run_dir: str, index: int = 0) -> None:
    """Serve until stopped."""
    comp = Component(run_dir, "param-server", index)
    serve(comp, comp.address("params").bind_tcp)
