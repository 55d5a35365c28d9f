"""One uniform-replay shard: pulls actors' chunks, answers the learner's sample requests.

A shard connects (never binds) to the two backends of the replay proxies (`surreal.components.
sharding`): chunks arrive fair-queued from the pull-push proxy, sample requests round-robin from the
router-dealer proxy. So K shards run the same code and a restarted shard simply reconnects.

Requests: {"op": "sample", "batch_size": B} -> {"ready": False, ...} before the shard holds its
sampling-start size, else {"ready": True, "batch": {obs, act, rew, next_obs, discount}, ...};
{"op": "stats"} -> {..., "chunks"}. Every reply carries "size", "added" (transitions ever
stored: the learner sums them over shards as its env-step count), "shard" (the index) and
"boot" (a random id of this incarnation, so a restarted shard is told apart).
"""

from __future__ import annotations

import os
import threading
import time

from surreal.components.replay_uniform import UniformSampler, UniformStorage


class ReplayShard:
    """Storage + sampler behind a lock, fed by a Puller and read through a Server."""

    def __init__(
        self,
        capacity: int,
        start: int,
        dedup: bool = False,
        seed: int | None = None,
        index: int = 0,
    ) -> None:
        self.index = index
        self.boot = int.from_bytes(os.urandom(6), "little")  # tells this incarnation from a restart
        self.storage = UniformStorage(capacity, dedup=dedup)
        self.sampler = UniformSampler(start, seed)
        self.lock = threading.Lock()
        self.chunks = 0
        self.stopped = threading.Event()

    def handle(self, request: dict) -> dict:
        """Answer a sample or stats request (the caraml Server handler)."""
        op = request.get("op") if isinstance(request, dict) else None
        with self.lock:
            info = {
                "size": len(self.storage),
                "added": self.storage.added,
                "shard": self.index,
                "boot": self.boot,
            }
            if op == "stats":
                return {**info, "chunks": self.chunks}
            if op != "sample":
                raise ValueError(f"unknown replay request {op!r}; send op 'sample' or 'stats'")
            if not self.sampler.ready(self.storage):
                return {**info, "ready": False}
            return {
                **info,
                "ready": True,
                "batch": self.sampler.sample(self.storage, int(request["batch_size"])),
            }

    def add(self, chunk: dict) -> None:
        """Store one pushed chunk."""
        with self.lock:
            self.storage.add(chunk)
            self.chunks += 1

    def serve(self, push_backend: str, sample_backend: str, poll_s: float = 0.2) -> None:
        """Pull and serve until `stop()` (connects to the proxies' backends)."""
        import caraml

        puller = caraml.Puller(push_backend, bind=False)
        server = caraml.Server(sample_backend, self.handle, bind=False).start()
        try:
            while not self.stopped.is_set():
                try:
                    chunk = puller.pull(timeout=poll_s)
                except caraml.RequestTimeout:
                    continue
                except caraml.MalformedMessage:
                    continue  # counted by the puller; a foreign message never stops the shard
                self.add(chunk)
        finally:
            server.stop()
            puller.close()

    def stop(self) -> None:
        """Make `serve` return after its current poll."""
        self.stopped.set()


def main(run_dir: str, index: int = 0) -> None:
    """Replay shard `index` of a run: serve until stopped, reporting fill to the metrics sink."""
    from surreal.components.common import Component
    from surreal.components.sharding import shard_seed

    comp = Component(run_dir, "buffer", index)
    algo = comp.config.algo
    # Each of K shards starts sampling at half its share of the sampling-start size, so shards
    # that got a few chunks less than the others (round robin) never hold the learner back.
    start = max(1, algo.replay_start // (2 * algo.replay_shards))
    shard = ReplayShard(
        algo.replay_capacity, start, algo.dedup_obs, shard_seed(comp.config.run.seed, index), index
    )
    comp.stopping = shard.stopped  # SIGTERM ends serve()
    reporter = threading.Thread(target=_report_loop, args=(comp, shard), daemon=True)
    reporter.start()
    try:
        shard.serve(comp.address("replay-shards").tcp, comp.address("replay-sample-shards").tcp)
    finally:
        comp.close()


def _report_loop(comp, shard: ReplayShard, every_s: float = 2.0) -> None:
    started = time.time()  # tells a restarted shard's reports from its predecessor's
    while not shard.stopped.wait(every_s):
        with shard.lock:
            size, added = len(shard.storage), shard.storage.added
        comp.report(
            0,
            {
                "buffer/fill": size / shard.storage.capacity,
                f"buffer/shard{shard.index}_size": size,
                f"buffer/shard{shard.index}_added": added,
                f"buffer/shard{shard.index}_started": started,
            },
        )
