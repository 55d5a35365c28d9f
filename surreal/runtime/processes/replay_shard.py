"""One uniform-replay shard: pulls actors' chunks, answers the learner's sample requests.

A shard connects (never binds) to the two backends of the replay proxies (`surreal.runtime.
sharding`): chunks arrive fair-queued from the pull-push proxy, sample requests round-robin from the
router-dealer proxy. So K shards run the same code and a restarted shard simply reconnects.

Requests: {"op": "sample", "batch_size": B} -> {"ready": False, ...} before the shard holds its
sampling-start size, else {"ready": True, "batch": {obs, act, rew, next_obs, discount}, ...};
{"op": "stats"} -> {..., "chunks"}. Every reply carries "size", "added" (transitions this
incarnation stored: the learner sums them over shards as its env-step count; a part loaded at the
start is not counted again), "shard" (the index) and "boot" (a random id of this incarnation,
so a restarted shard is told apart).

With `algo.save_replay` (the default) a shard keeps its part of the replay beside the run's
checkpoint (`surreal.runtime.processes.replay_save`): it loads the last one when it starts (a `--resume`,
a restart after a crash), writes a new one whenever the learner publishes `checkpoint` on
`params-pub` (a thread of its own; the lock is held only to copy the arrays), and writes one
more when it is stopped.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import caraml
from surreal.monitoring import logs
from surreal.runtime.processes import replay_save
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.replay_uniform import UniformSampler, UniformStorage
from surreal.runtime.processes.sharding import shard_seed
from surreal.runtime.wire.guard import Invalid, PortGuard
from surreal.runtime.wire.ports import NOTHING, GuardedServer, receive
from surreal.runtime.wire.schemas import (
    REQUEST_MAX_BYTES,
    ChunkSchema,
    as_array,
    as_dict,
    as_int,
    sample_request,
)


def _any_chunk(message: Any) -> dict:
    """Without an env spec: a dict of numeric arrays (the storage checks the rest)."""
    chunk = as_dict(message, "a replay chunk")
    for key, value in chunk.items():
        as_array(value, key)
    if "rew" not in chunk:
        raise Invalid("a replay chunk needs 'rew'", "missing-keys")
    return chunk


class ReplayShard:
    """Storage + sampler behind a lock, fed by a Puller and read through a Server."""

    def __init__(
        self,
        capacity: int,
        start: int,
        dedup: bool = False,
        seed: int | None = None,
        index: int = 0,
        chunk_schema: Callable[[Any], dict] | None = None,
    ) -> None:
        self.index = index
        self.chunk_schema = chunk_schema  # checks pushed chunks (None: any dict of arrays)
        self.chunk_guard, self.request_guard = PortGuard("replay"), PortGuard("replay-sample")
        self.boot = int.from_bytes(os.urandom(6), "little")  # tells this incarnation from a restart
        self.storage = UniformStorage(capacity, dedup=dedup)
        self.sampler = UniformSampler(start, seed)
        self.lock = threading.Lock()
        self.chunks = 0
        self.restored = 0
        """Transitions loaded from a saved part (`load_part`): not counted as new env steps."""
        self.loaded_step = 0
        """The learner's step of the loaded part (until the learner says another)."""
        self.merged_before: tuple[str, ...] = ()
        """The loaded part's `merged`: the sha256 of other shards' parts it took in."""
        self.stopped = threading.Event()
        self.on_stored: Callable[[], None] = lambda: None
        """Called after a chunk was stored (`serve`: the server's wake when a request waits)."""

    @property
    def added(self) -> int:
        """Transitions this incarnation stored (a loaded part's not counted)."""
        return self.storage.added - self.restored

    def load_part(
        self, path: Path, check: Callable[[Any], Any] | None = None, keep: int | None = None
    ) -> str:
        """Load the saved part at `path` into this (still empty) shard, verified
        (`replay_save.read`), only its newest `keep` transitions if given (room for parts it
        merges next: `replay_save.shares`); returns the one line that says what happened (""
        when there is no part). A part that fails its checks is left out: the shard starts
        empty."""
        if not path.is_file():
            return ""
        t0 = time.perf_counter()
        try:
            meta, arrays = replay_save.read(path, self.storage, check)
        except replay_save.ReplayPartError as err:
            return f"{err}; starting empty"
        if keep is not None:
            meta, arrays = replay_save.newest(meta, arrays, keep, self.storage)
        with self.lock:
            replay_save.restore(self.storage, meta, arrays)
            self.restored = self.storage.added
        self.loaded_step = int(meta["step"])
        merged = meta.get("merged")
        self.merged_before = tuple(m for m in merged if isinstance(m, str)) if merged else ()
        was = meta.get("converted") or meta.get("resized") or meta  # the part as saved
        line = (
            f"loaded the replay part {path}: {len(self.storage):,} transitions of "
            f"{was['added']:,} added (saved at learner step {meta['step']:,}, sha256 "
            f"{meta['sha256'][:12]}, verified) in {time.perf_counter() - t0:.2f} s"
        )
        if "converted" in meta:
            line += (
                f"; algo.dedup_obs was {str(was['dedup']).lower()}, now "
                f"{str(self.storage.dedup).lower()}: converted"
            )
        if "kept_of" in meta:
            line += (
                f"; kept its newest {len(self.storage):,} of {meta['kept_of']:,} for the parts "
                "it merges (algo.replay_capacity holds no more)"
            )
        if was["capacity"] != self.storage.capacity:
            line += (
                f"; algo.replay_capacity was {was['capacity']:,}, now "
                f"{self.storage.capacity:,}: kept the newest {len(self.storage):,} of "
                f"{was['rows']:,}"
            )
        return line

    def merge_part(
        self,
        path: Path,
        check: Callable[[Any], Any] | None = None,
        skip: tuple[str, ...] = (),
        keep: int | None = None,
    ) -> tuple[str, str | None]:
        """Add the transitions of another shard's part at `path` (a run resumed with fewer
        `algo.replay_shards`) after what this shard holds, oldest first, verified; they are not
        counted as env steps. Returns (the line that says what happened, the part's sha256 if
        its transitions are now here); a part whose sha256 is in `skip` (merged into this
        shard's own part before) is not added again; `keep`: only its newest that many."""
        t0 = time.perf_counter()
        try:
            meta, arrays = replay_save.read(path, self.storage, check)
        except replay_save.ReplayPartError as err:
            return f"{err}; left out", None
        if meta["sha256"] in skip:
            return f"the replay part {path} is already in this shard's own part", meta["sha256"]
        if keep is not None:
            meta, arrays = replay_save.newest(meta, arrays, keep, self.storage)
        chunk = replay_save.as_chunk(meta, arrays)
        with self.lock:
            kept = self.storage.add(chunk)
            self.restored = self.storage.added
        return (
            f"merged the replay part {path} of a run with more replay shards: {kept:,} "
            f"transitions (saved at learner step {meta['step']:,}, verified) in "
            f"{time.perf_counter() - t0:.2f} s; this shard holds {len(self.storage):,}",
            meta["sha256"],
        )

    def handle(self, message: Any) -> dict | caraml.Later:
        """Answer a sample or stats request (the caraml Server handler); a request that is
        neither is counted and answered {"ready": False, "error": ...}, never raised. A stats
        request with "wait_s" is answered once the next chunk is stored (or after wait_s)."""
        request = self.request_guard.check(sample_request, message)
        op = None if request is None else request["op"]
        if op == "stats" and request.get("wait_s"):
            with self.lock:
                seen = self.storage.added
            return caraml.Later(
                lambda: self.storage.added > seen, self._stats, float(request["wait_s"])
            )
        with self.lock:
            info = self._info()
            if op == "stats":
                return {**info, "chunks": self.chunks}
            if op != "sample":
                return {**info, "ready": False, "error": "send op 'sample' or 'stats'"}
            if not self.sampler.ready(self.storage):
                return {**info, "ready": False}
            return {
                **info,
                "ready": True,
                "batch": self.sampler.sample(self.storage, int(request["batch_size"])),
            }

    def _info(self) -> dict:
        """What every reply carries (call with the lock held)."""
        return {
            "size": len(self.storage),
            "added": self.added,
            "shard": self.index,
            "boot": self.boot,
        }

    def _stats(self) -> dict:
        """The reply to a stats request."""
        with self.lock:
            return {**self._info(), "chunks": self.chunks}

    def add(self, message: Any) -> None:
        """Store one pushed chunk if it fits the shard's schema (else count and drop it)."""
        chunk = self.chunk_guard.check(self.chunk_schema or _any_chunk, message)
        if chunk is None:
            return
        with self.lock:
            stored = self.chunk_guard.guarded("store-failed", lambda: self.storage.add(chunk))
            self.chunks += stored is not None
        if stored is not None:
            self.on_stored()

    def serve(self, push_backend: str, sample_backend: str, poll_s: float = 0.2) -> None:
        """Pull and serve until `stop()` (connects to the proxies' backends); the shard is
        stopped when this returns or raises."""
        puller = caraml.Puller(push_backend, bind=False)
        server = GuardedServer(
            sample_backend, self.handle, self.request_guard, bind=False, max_size=REQUEST_MAX_BYTES
        ).start()
        self.on_stored = lambda: server.parked and server.wake()  # a paced learner waits
        try:
            while not self.stopped.is_set():
                chunk = receive(lambda: puller.pull(timeout=poll_s), self.chunk_guard)
                if chunk is not NOTHING:
                    self.add(chunk)
        finally:  # on a failure too: the part keeper's listener ends, and the process with it
            self.stopped.set()  # (symphony restarts it) rather than hanging on its join
            server.stop()
            puller.close()

    def stop(self) -> None:
        """Make `serve` return after its current poll."""
        self.stopped.set()


def checkpoint_note(message: Any) -> int:
    """The learner's `checkpoint` publication on `params-pub`: {"step": global step}."""
    return as_int(as_dict(message, "a checkpoint note").get("step"), "step", 0, 2**62)


class PartKeeper:
    """Saves a shard's part (`replay_save`): whenever the learner publishes `checkpoint`
    (`listen`, a thread of its own: the shard's lock is held only to copy the arrays) and once
    more when the shard stops (`close`). A part that cannot be written is one error line; the
    last whole part stays and the shard serves on."""

    def __init__(
        self, shard: ReplayShard, path: Path, log: Any, merged: dict[Path, str] | None = None
    ) -> None:
        self.shard, self.path, self.log = shard, path, log
        self.merged = dict(merged or {})
        """Parts of a run with more shards whose transitions this shard took (path: sha256):
        listed in every part it writes, and removed once one is written."""
        self.guard = PortGuard("checkpoint")
        self.saved_added = shard.storage.added  # what the part on disk holds (a loaded one)
        self.step = shard.loaded_step  # the learner's step at its last checkpoint
        self.saves = 0

    def save(self) -> None:
        """Write the part now unless it already holds everything the shard stored."""
        shard = self.shard
        with shard.lock:
            unchanged = shard.storage.added == self.saved_added
        snap = (
            None
            if unchanged
            else replay_save.snapshot(shard.storage, shard.lock, shard.index, self.step)
        )
        if snap is None:
            return
        if self.merged:
            snap.meta["merged"] = sorted(set(self.merged.values()))
        t0 = time.perf_counter()
        try:
            size = replay_save.write(self.path, snap)
        except replay_save.ReplayPartError as err:
            self.log.error("%s", err)
            return
        self.saved_added, self.saves = snap.meta["added"], self.saves + 1
        self.log.info(
            "saved the replay part %s: %s transitions, %.1f MB in %.2f s (sampling paused "
            "%.3f s for the copy)",
            self.path,
            f"{snap.meta['rows']:,}",
            size / 1e6,
            time.perf_counter() - t0,
            snap.pause_s,
        )
        self.remove_merged()

    def remove_merged(self) -> None:
        """Remove the merged parts (their transitions are in this shard's own part now), so a
        later resume with more shards does not load them as its own."""
        for path in self.merged:
            replay_save.remove(path)
            self.log.info("removed %s: its transitions are in %s", path, self.path)
        self.merged = {}

    def listen(self, address: str) -> None:
        """Save on every `checkpoint` the learner publishes at `address` until the shard stops
        (notes that queued during a save are taken as one)."""
        subscriber = caraml.Subscriber(address, topics=["checkpoint"], hwm=4)
        try:
            while not self.shard.stopped.is_set():
                note = receive(lambda: subscriber.recv(timeout=0.5), self.guard)
                if note is NOTHING:
                    continue
                step = self.guard.check(lambda m: checkpoint_note(m[1]), note)
                if step is not None:
                    self.step = max(self.step, step)
                    self.save()
        finally:
            subscriber.close()

    def close(self, listener: threading.Thread | None) -> None:
        """The shard has stopped: wait for a save under way, then write the last part."""
        if listener is not None:
            listener.join()
        self.save()


def _keep_parts(comp: Component, shard: ReplayShard) -> tuple[PartKeeper, threading.Thread]:
    """`algo.save_replay`: load the shard's last part, then save on the learner's checkpoints."""
    algo = comp.config.algo
    path = replay_save.part_path(comp.run.checkpoint.parent, shard.index)
    for stale in replay_save.remove_stale_temporaries(path):
        comp.log.info("removed %s (a save cut short by a kill)", stale)
    check = ChunkSchema(comp.env_info, algo.dedup_obs, max_rows=max(algo.replay_capacity, 1))
    others = replay_save.orphans(path.parent, shard.index, algo.replay_shards)
    shares = replay_save.shares(path, others, algo.replay_capacity) if others else {}
    said = shard.load_part(path, check, shares.get(path))
    if said:
        (comp.log.info if said.startswith("loaded") else comp.log.warning)("%s", said)
    skip = shard.merged_before
    merged = {}
    for orphan in others:
        said, sha = shard.merge_part(orphan, check, skip, shares.get(orphan))
        (comp.log.info if sha else comp.log.warning)("%s", said)
        if sha:
            merged[orphan] = sha
    keeper = PartKeeper(shard, path, comp.log, merged)
    if merged and set(merged.values()) <= set(skip):
        keeper.remove_merged()  # a kill came between the save of the merged part and this
    listener = threading.Thread(
        target=keeper.listen, args=(comp.address("params-pub").tcp,), daemon=True
    )
    listener.start()
    return keeper, listener


def sampling_start(replay_start: int, shards: int) -> int:
    """Transitions one of `shards` replay shards holds before it answers samples: a single
    shard, `replay_start` itself (as the single-process loop); each of K > 1 shards, half its
    share, so a shard that got a few chunks less than the others (round robin) never holds the
    learner back. (A single shard once started at half as well: TD3 on HalfCheetah sampled
    from 5k transitions where its recipe says 10k.)"""
    if shards <= 1:
        return max(1, replay_start)
    return max(1, replay_start // (2 * shards))


def main(run_dir: str, index: int = 0) -> None:
    """Replay shard `index` of a run: serve until stopped, reporting fill to the metrics sink."""
    comp = Component(run_dir, "buffer", index)
    algo = comp.config.algo
    start = sampling_start(algo.replay_start, algo.replay_shards)
    shard = ReplayShard(
        algo.replay_capacity,
        start,
        algo.dedup_obs,
        shard_seed(comp.config.run.seed, index),
        index,
        chunk_schema=ChunkSchema(comp.env_info, algo.dedup_obs),
    )
    comp.stopping = shard.stopped  # SIGTERM ends serve()
    keeper, listener = _keep_parts(comp, shard) if algo.save_replay else (None, None)
    reporter = threading.Thread(target=_report_loop, args=(comp, shard), daemon=True)
    reporter.start()
    comp.log.info(
        "replay shard %d connects replay-shards %s (chunks in), replay-sample-shards %s "
        "(samples out); capacity %s, sampling from %s",
        index,
        comp.address("replay-shards").tcp,
        comp.address("replay-sample-shards").tcp,
        f"{algo.replay_capacity:,}",
        f"{start:,}",
    )
    try:
        shard.serve(comp.address("replay-shards").tcp, comp.address("replay-sample-shards").tcp)
    finally:
        if keeper is not None:
            keeper.close(listener)
        with shard.lock:
            comp.log.info(
                "took %s chunks (%s transitions); held %s at the end",
                f"{shard.chunks:,}",
                f"{shard.added:,}",
                f"{len(shard.storage):,}",
            )
        comp.close()


def _report_loop(comp, shard: ReplayShard, every_s: float = 2.0) -> None:
    started = time.time()  # tells a restarted shard's reports from its predecessor's
    log = getattr(comp, "log", None) or logs.get()
    tick = getattr(comp, "tick", None) or logs.Progress(log).tick  # (tests pass a bare comp)
    drops = logs.DropReport(log, [shard.chunk_guard, shard.request_guard])
    while not shard.stopped.wait(every_s):
        with shard.lock:
            size, added, chunks = len(shard.storage), shard.added, shard.chunks
        if tick({"chunks in": chunks, "transitions": added}, {"size": size}):
            drops.check()
        comp.report(
            0,
            {
                "buffer/fill": size / shard.storage.capacity,
                f"buffer/shard{shard.index}_size": size,
                f"buffer/shard{shard.index}_added": added,
                f"buffer/shard{shard.index}_started": started,
            },
        )
