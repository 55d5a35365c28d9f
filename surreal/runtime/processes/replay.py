"""Buffer process: actors push segments in; the learner's DataFetcher asks for batches."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

import caraml
from surreal.api import recipe
from surreal.api.replay import Replay
from surreal.monitoring import logs
from surreal.runtime.processes.common import Component
from surreal.runtime.wire.batch_protocol import ReplyCache
from surreal.runtime.wire.guard import PortGuard
from surreal.runtime.wire.ports import NOTHING, GuardedServer, receive
from surreal.runtime.wire.schemas import (
    REQUEST_MAX_BYTES,
    SegmentSchema,
    batch_request,
    segment_max_bytes,
)


def make_replay(comp: Component) -> Replay:
    """The replay the run's recipe wants (`Recipe.make_replay`; FIFO by default). The recipe,
    recorded at launch (`run.json` "recipe"), is loaded without the learner's module, so the
    buffer never imports torch; only a recipe made around a learner's own hooks asks the learner
    (`surreal.api.recipe.recipe_of`)."""
    info = comp.run.info()
    if info.get("recipe"):
        return recipe.load(info["recipe"]).make_replay(comp.config)
    fifo = info.get("fifo_replay")  # a run launched before recipes
    if fifo is not None:
        return recipe.fifo_replay(int(fifo["segments_per_batch"]), comp.config.run.actors)
    return recipe.recipe_of(comp.algo).make_replay(comp.config)


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


@dataclass
class _BufferLoop:
    """The buffer's serving loop: its replay, ports and guards, and when it last reported."""

    comp: Component
    replay: Replay
    segment: SegmentSchema
    experience: PortGuard
    handle: BatchHandler
    puller: Any
    server: GuardedServer
    last_report: float
    drops: logs.DropReport

    @property
    def invalid(self) -> int:
        """Messages dropped as invalid on either port."""
        return self.experience.total_dropped + self.handle.guard.total_dropped

    def run(self) -> None:
        """Take segments in (the batches port serves on its own thread) until stopped."""
        while not self.comp.stopping.is_set():
            self.take()
            self.tick()
            if time.monotonic() - self.last_report > 2.0:
                self.last_report = time.monotonic()
                self.report()

    def take(self) -> None:
        """Pull one segment (waiting up to 0.5 s), check it and add it to the replay."""
        comp, experience = self.comp, self.experience
        message = receive(lambda: self.puller.pull(timeout=0.5), experience)
        checked = None if message is NOTHING else experience.check(self.segment, message)
        if checked is not None:
            self.replay.add(checked)
            comp.prom.port_traffic("experience", "in", checked)
            comp.prom.count("surreal_buffer_added_total")
        comp.prom.set("surreal_buffer_fill", len(self.replay))

    def tick(self) -> None:
        """The buffer's `progress:` line when one is due (and the dropped-message report)."""
        replay = self.replay
        if self.comp.tick(
            {"segments in": replay.added, "batches out": self.handle.served},
            {
                "fill": len(replay),
                "overflowed": getattr(replay.storage, "dropped", None),
                "invalid": self.invalid,
            },
        ):
            self.drops.check()

    def report(self) -> None:
        """Report the buffer's fill, segments added, dropped and invalid, replayed replies."""
        replay = self.replay
        dropped = float(getattr(replay.storage, "dropped", 0))
        self.comp.prom.total("surreal_invalid_messages_total", self.invalid)
        self.comp.report(
            0,
            {
                "buffer/fill": len(replay),
                "buffer/added": replay.added,
                "buffer/dropped": dropped,
                "buffer/invalid": self.invalid,
                "buffer/replayed_replies": self.handle.replies.replayed,
            },
        )

    def close(self) -> None:
        """The closing log line; then stop the batches server, close the puller and comp."""
        self.drops.check()
        self.comp.log.info(
            "took %s segments, answered %s batches; held %s at the end",
            f"{self.replay.added:,}",
            f"{self.handle.served:,}",
            len(self.replay),
        )
        self.server.stop()
        self.server.close()
        self.puller.close()
        self.comp.close()


def main(run_dir: str, index: int = 0) -> None:
    """Serve until stopped. Every message is checked against its port's schema first
    (`surreal.runtime.wire.schemas`): a bad one is counted, logged once per kind and dropped."""
    comp = Component(run_dir, "buffer", index)
    cfg = comp.config
    replay = make_replay(comp)
    segment = SegmentSchema(comp.env_info, cfg.actor.rollout_length, cfg.env.num_envs)
    experience = PortGuard("experience")
    handle = BatchHandler(replay, comp.prom)
    limit = segment_max_bytes(comp.env_info, cfg.actor.rollout_length, cfg.env.num_envs)
    puller = caraml.Puller(comp.address("experience").bind_tcp, hwm=64, max_size=limit)
    server = GuardedServer(
        comp.address("batches").bind_tcp, handle, handle.guard, max_size=REQUEST_MAX_BYTES
    ).start()
    last_report = time.monotonic()
    comp.log.info(
        "binds experience %s (segments in), batches %s (batches out); %s of capacity %s",
        comp.address("experience").bind_tcp,
        comp.address("batches").bind_tcp,
        type(replay.storage).__name__,
        handle.capacity,
    )
    drops = logs.DropReport(comp.log, [experience, handle.guard])
    loop = _BufferLoop(
        comp, replay, segment, experience, handle, puller, server, last_report, drops
    )
    try:
        loop.run()
    finally:
        loop.close()


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
