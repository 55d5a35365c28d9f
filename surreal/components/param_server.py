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


def main(run_dir: str, index: int = 0) -> None:
    """Serve until stopped."""
    import caraml

    comp = Component(run_dir, "param-server", index)
    store = ParameterStore()
    subscriber = caraml.Subscriber(comp.address("params-pub").tcp, topics=["params"], hwm=4)
    server = caraml.Server(comp.address("params").bind_tcp, store.handle).start()
    try:
        while not comp.stopping.is_set():
            try:
                _, message = subscriber.recv(timeout=0.5)
            except (caraml.RequestTimeout, caraml.MalformedMessage):
                continue
            store.update(message)
    finally:
        server.stop()
        server.close()
        subscriber.close()
        comp.close()
