"""Buffer process: actors push segments in; the learner's DataFetcher asks for batches."""

from __future__ import annotations

import time

import numpy as np

from surreal.components.common import Component
from surreal.replay import Replay


def make_replay(comp: Component) -> Replay:
    """The replay the run's algorithm wants (`Learner.make_replay`; FIFO by default)."""
    return comp.algo.make_replay(comp.config)


def main(run_dir: str, index: int = 0) -> None:
    """Serve until stopped."""
    import caraml

    comp = Component(run_dir, "buffer", index)
    replay = make_replay(comp)
    puller = caraml.Puller(comp.address("experience").bind_tcp, hwm=64)

    def handle(request: dict) -> dict:
        batch = replay.take(int(request["segments"]), float(request.get("timeout", 1.0)))
        return {"batch": batch, "fill": len(replay)}

    server = caraml.Server(comp.address("batches").bind_tcp, handle).start()
    last_report = time.monotonic()
    try:
        while not comp.stopping.is_set():
            try:
                replay.add(puller.pull(timeout=0.5))
            except caraml.RequestTimeout:
                pass
            except caraml.MalformedMessage:
                continue
            if time.monotonic() - last_report > 2.0:
                last_report = time.monotonic()
                dropped = float(getattr(replay.storage, "dropped", 0))
                comp.report(
                    0,
                    {
                        "buffer/fill": len(replay),
                        "buffer/added": replay.added,
                        "buffer/dropped": dropped,
                    },
                )
    finally:
        server.stop()
        server.close()
        puller.close()
        comp.close()


def batch_arrays(reply: dict) -> dict[str, np.ndarray]:
    """DataFetcher `process` function (runs in its worker): the reply's batch as flat arrays.

    An empty reply (no data in time) becomes {"empty": [1]} so the learner can tell.
    """
    if reply.get("batch") is None:
        return {"empty": np.ones(1, np.int8), "fill": np.asarray([reply.get("fill", 0)])}
    return {**reply["batch"], "fill": np.asarray([reply.get("fill", 0)])}
