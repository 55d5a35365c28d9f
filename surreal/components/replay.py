"""Buffer process: actors push segments in; the learner's DataFetcher asks for batches."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from surreal.components.batch_protocol import ReplyCache
from surreal.components.common import Component
from surreal.components.ports import NOTHING, GuardedServer, receive
from surreal.core import fifo_replay
from surreal.guard import PortGuard
from surreal.monitoring import logs
from surreal.replay import Replay
from surreal.schemas import (
    REQUEST_MAX_BYTES,
    SegmentSchema,
    batch_request,
    segment_max_bytes,
)


def make_replay(comp: Component) -> Replay:
    """The replay the run's algorithm wants (`Learner.make_replay`; FIFO by default). The
    default, recorded at launch (`run.json` "fifo_replay"), is made without the learner's module,
    so the buffer never imports torch."""
    fifo = comp.run.info().get("fifo_replay")
    if fifo is not None:
        return fifo_replay(int(fifo["segments_per_batch"]), comp.config.run.actors)
    return comp.algo.make_replay(comp.config)


class BatchHandler:
    """The `batches` port's handler: checks each request, answers a resent one (same id) with
    the reply already sent (`components.batch_protocol`), never raises."""

    def __init__(self, replay: Replay, prom: Any = None) -> None:
        self.replay, self.prom = replay, prom
        self.capacity = getattr(replay.storage, "capacity", 1 << 16)
        self.guard, self.replies = PortGuard("batches"), ReplyCache()
        self.served = 0
        """Batches answered (for the log's progress lines)."""

    def __call__(self, message: Any) -> dict:
        request = self.guard.check(lambda m: batch_request(m, self.capacity), message)
        if request is None:
            return {"batch": None, "fill": len(self.replay), "error": "not a batch request"}

        def take() -> dict:
            batch = self.replay.take(request["segments"], request["timeout"])
            if self.prom is not None and batch is not None:
                self.prom.port_traffic("batches", "out", batch)
            self.served += batch is not None
            return {"batch": batch, "fill": len(self.replay)}

        return self.replies.answer(request.get("id"), take)


def main(run_dir: str, index: int = 0) -> None:
    """Serve until stopped. Every message is checked against its port's schema first
    (`surreal.schemas`): a bad one is counted, logged once per kind and dropped."""
    import caraml

    comp = Component(run_dir, "buffer", index)
    cfg = comp.config
    replay = make_replay(comp)
    segment = SegmentSchema(comp.env_info, cfg.actor.rollout_length, cfg.env.num_envs)
    experience = PortGuard("experience")
    handle = BatchHandler(replay, comp.prom)
    batches, replies = handle.guard, handle.replies
    limit = segment_max_bytes(comp.env_info, cfg.actor.rollout_length, cfg.env.num_envs)
    puller = caraml.Puller(comp.address("experience").bind_tcp, hwm=64, max_size=limit)
    server = GuardedServer(
        comp.address("batches").bind_tcp, handle, batches, max_size=REQUEST_MAX_BYTES
    ).start()
    last_report = time.monotonic()
    comp.log.info(
        "binds experience %s (segments in), batches %s (batches out); %s of capacity %s",
        comp.address("experience").bind_tcp,
        comp.address("batches").bind_tcp,
        type(replay.storage).__name__,
        handle.capacity,
    )
    drops = logs.DropReport(comp.log, [experience, batches])
    try:
        while not comp.stopping.is_set():
            message = receive(lambda: puller.pull(timeout=0.5), experience)
            checked = None if message is NOTHING else experience.check(segment, message)
            if checked is not None:
                replay.add(checked)
                comp.prom.port_traffic("experience", "in", checked)
                comp.prom.count("surreal_buffer_added_total")
            comp.prom.set("surreal_buffer_fill", len(replay))
            if comp.tick(
                {"segments in": replay.added, "batches out": handle.served},
                {
                    "fill": len(replay),
                    "overflowed": getattr(replay.storage, "dropped", None),
                    "invalid": experience.total_dropped + batches.total_dropped,
                },
            ):
                drops.check()
            if time.monotonic() - last_report > 2.0:
                last_report = time.monotonic()
                dropped = float(getattr(replay.storage, "dropped", 0))
                comp.prom.total(
                    "surreal_invalid_messages_total",
                    experience.total_dropped + batches.total_dropped,
                )
                comp.report(
                    0,
                    {
                        "buffer/fill": len(replay),
                        "buffer/added": replay.added,
                        "buffer/dropped": dropped,
                        "buffer/invalid": experience.total_dropped + batches.total_dropped,
                        "buffer/replayed_replies": replies.replayed,
                    },
                )
    finally:
        drops.check()
        comp.log.info(
            "took %s segments, answered %s batches; held %s at the end",
            f"{replay.added:,}",
            f"{handle.served:,}",
            len(replay),
        )
        server.stop()
        server.close()
        puller.close()
        comp.close()


def batch_arrays(reply: Any) -> dict[str, np.ndarray]:
    """DataFetcher `process` function (runs in its worker): the reply's batch as flat arrays.

    An empty reply (no data in time), or one that is not a batch at all, becomes
    {"empty": [1]} so the learner can tell (and never fails on it).
    """
    reply = reply if isinstance(reply, dict) else {}
    fill = reply.get("fill", 0)
    fill = np.asarray([fill if isinstance(fill, (int, float)) else 0])
    batch = reply.get("batch")
    if not isinstance(batch, dict) or not all(isinstance(a, np.ndarray) for a in batch.values()):
        return {"empty": np.ones(1, np.int8), "fill": fill}
    return {**batch, "fill": fill}
