"""The DDPG learner process: sampled batches (DataFetcher over the replay shards) -> update -> publish."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import caraml
from caraml.errors import WorkerDied
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.learner import build_learner
from surreal.runtime.processes.replay_shard import sampling_start
from surreal.runtime.processes.stall_watch import StallWatch
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.wire.goal import GoalInbox

REPUBLISH_AFTER_S = 2.0
"""Seconds without a reply from the replay after which the learner publishes its parameters
again (every second while it lasts)."""
STALL_S = 2.0
"""Seconds the paced learner waits without a new env step before it paces from where it stands
(steps it counted on were lost, so every actor waits too: `UpdatePace`)."""


def sample_reply_to_arrays(reply: dict) -> dict[str, np.ndarray]:
    """DataFetcher `process` (runs in the fetch worker): a replay reply -> arrays for a slot."""
    meta = {
        "added": np.array([reply.get("added", 0)], np.int64),
        "shard": np.array([reply.get("shard", 0)], np.int64),
        "boot": np.array([reply.get("boot", 0)], np.int64),
        "size": np.array([reply.get("size", 0)], np.int64),
    }
    if not reply.get("ready"):
        return {"empty": np.zeros(1, np.int8), **meta}
    return {**{k: np.ascontiguousarray(v) for k, v in reply["batch"].items()}, **meta}


class StepCounter:
    """Env steps = transitions stored over all shards, counting every incarnation of a shard.

    Replies may arrive out of order (several fetch workers), so each (shard, boot) keeps the
    largest count seen; a restarted shard has a new boot id and counts from zero again.
    `restarted`: this learner restarted while the shards lived on, so what each shard had added
    when first seen is already in `start` (its checkpoint's step) and only what it adds after
    counts (a learner kill otherwise counted every stored transition twice).
    """

    def __init__(self, start: int = 0, restarted: bool = False) -> None:
        self.base, self.restarted = start, restarted
        self.latest: dict[tuple[int, int], int] = {}
        self.first: dict[tuple[int, int], int] = {}

    def update(self, shard: int, added: int, boot: int = 0) -> int:
        key = (shard, boot)
        if self.restarted:
            self.first.setdefault(key, added)
        self.latest[key] = max(self.latest.get(key, 0), added)
        return self.total

    @property
    def total(self) -> int:
        return self.base + sum(n - self.first.get(key, 0) for key, n in self.latest.items())


def main(run_dir: str, index: int = 0) -> None:
    """Learn until run.steps env steps were stored (or stopped); checkpoint periodically and at exit."""
    comp = Component(run_dir, "learner", index)
    loop = _Loop(comp)
    algo_cfg, obs_dim = comp.config.algo, int(np.prod(comp.env_info.obs_shape))
    rows = algo_cfg.batch_size * algo_cfg.fetch_batches
    slot = 4 * rows * (2 * obs_dim + comp.env_info.action_dim + 2) + 8192
    request = {"op": "sample", "batch_size": rows}
    fetcher = caraml.DataFetcher(
        comp.address("replay-sample").tcp,
        itertools.repeat(request),
        sample_reply_to_arrays,
        slot_bytes=slot,
        n_slots=4,
        n_workers=2,
        timeout=5.0,
        retries=1000,
    )
    try:
        while not comp.stopping.is_set() and not loop.done():
            try:
                handle = fetcher.get(timeout=1.0)
            except WorkerDied:
                raise
            except caraml.CaramlError:  # no reply within 1 s (a shard restarting): say so, wait on
                loop.waiting()
                continue
            with handle:
                loop.consume(handle.data)
    finally:
        loop.save()
        fetcher.close()
        loop.close()
    if loop.save_failed:
        raise SystemExit(checkpoint.UNWRITABLE_EXIT)  # never restarted (a full disk stays full)


def slack(algo: Any, actors: int) -> float:
    """Updates the paced learner may be ahead of `updates_per_step` x the env steps it has seen
    stored: what the actors hold unpushed (`chunk_size + n_step` each) and the updates their
    pacing does not see until the next version (`publish_every`), so that the learner never waits
    for steps the actors wait to take; plus one."""
    unpushed = actors * (algo.chunk_size + algo.n_step) * algo.updates_per_step
    return algo.publish_every + unpushed + 1


class UpdatePace:
    """Keeps the learner's updates within `algo.updates_per_step` per env step stored: it may
    have taken (env steps stored - the sampling start) x updates_per_step updates, counted from
    where this learner started (a resumed or restarted one goes on from its checkpoint's
    counters), plus `slack(algo, actors)`. The actors keep the other side of the ratio
    (`actor.Pacer`); without this side a learner whose actors were slowed (a loaded machine)
    took more updates per env step than the config says (Pendulum: 732 updates where 724 were
    due).

    While at its limit the learner asks the replay for its count in a long poll (`stats` with
    `wait_s`, answered when a chunk is stored). If the count stands still for STALL_S, the
    steps it waits for will not come: the actors took them, but they were lost (pushed to a
    replay shard that was killed, or held by an actor that was), so the actors wait for the
    learner as it waits for them. It then paces from where it stands (its allowance counted
    from now), which gives it the slack's updates at once and the actors room with the next
    version: pacing never stops a run. (It first went on by a version's worth only; a chaos
    run that lost 240 steps then stalled again and again, 309 times, at ~10 updates/s.)"""

    def __init__(self, comp, counters: dict, steps: StepCounter) -> None:
        algo = comp.config.algo
        self.comp, self.counters, self.steps = comp, counters, steps
        self.per_step = float(algo.updates_per_step)
        self.slack = slack(algo, comp.config.run.actors)
        total_start = algo.replay_shards * sampling_start(algo.replay_start, algo.replay_shards)
        self.from_step = max(counters["global_step"], total_start)
        self.from_its = counters["iterations"]
        self.waited_s = 0.0  # seconds spent waiting for env steps (reported, then reset)
        self.stalls = 0  # times it went on without a new env step
        self.client: caraml.Client | None = None  # made at the first wait

    def allowed(self) -> float:
        """Updates this learner may have taken at the env steps counted now."""
        if self.per_step <= 0:
            return float("inf")
        new_steps = max(0, self.counters["global_step"] - self.from_step)
        return self.from_its + new_steps * self.per_step + self.slack

    def room(self, stop: Callable[[], bool], tick: Callable[[], None]) -> bool:
        """True once the learner may take its next update (at once while within the ratio);
        False when `stop()` holds first. `tick()` runs after each poll (reports, checkpoints)."""
        c = self.counters
        still_since = time.monotonic()
        while c["iterations"] >= self.allowed():
            if stop():
                return False
            now = time.monotonic()
            if now - still_since >= STALL_S:
                self.stalls += 1
                self.from_step, self.from_its = c["global_step"], c["iterations"]
                return True
            before = c["global_step"]
            self._poll()
            self.waited_s += time.monotonic() - now
            tick()
            if c["global_step"] != before:
                still_since = time.monotonic()
        return True

    def _poll(self) -> None:
        """One long poll of the replay's count (a shard that does not answer: nothing new)."""
        if self.client is None:
            self.client = caraml.Client(
                self.comp.address("replay-sample").tcp, timeout=STALL_S, retries=0
            )
        try:
            reply = self.client.request({"op": "stats", "wait_s": STALL_S / 4})
        except caraml.CaramlError:
            return
        if isinstance(reply, dict) and "added" in reply:
            self.counters["global_step"] = self.steps.update(
                int(reply["shard"]), int(reply["added"]), int(reply.get("boot", 0))
            )

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


class _Loop:
    """The learner, its counters, publications, reports and checkpoints."""

    def __init__(self, comp) -> None:
        self.comp = comp
        self.learner, self.counters = build_learner(comp)
        self.steps = StepCounter(self.counters["global_step"], restarted=comp.restarts > 0)
        self.pace = UpdatePace(comp, self.counters, self.steps)
        self.publisher = caraml.Publisher(comp.address("params-pub").bind_tcp)
        self.goal = GoalInbox(comp)  # the evaluators' word: run.stop_at_return reached
        StallWatch(comp, lambda: self.counters["global_step"])  # ends a run that stands still
        self.last_report = self.last_ckpt = self.started = time.monotonic()
        self.start_step, self.its_at_report = (
            self.counters["global_step"],
            self.counters["iterations"],
        )
        self.busy_s = 0.0  # seconds spent updating and publishing since the last report
        self.refill_logged = 0.0  # when the learner last said which shard it waits for
        self.silence_logged = 0.0  # ... and that the replay did not answer (its own clock: a
        # shard that comes back then says `refilling` at once)
        self.last_batch = self.republished = time.monotonic()  # a reply; a republication
        self.starved = False  # what the last publication said
        self.save_failed = ""
        """Why the last checkpoint could not be written ("" while every one was)."""
        comp.report(self.start_step, {}, version=self.counters["version"])  # the sink's step
        self.publish()

    def publish(self, starved: bool = False) -> None:
        """The current parameters to the parameter servers; `starved`: the replay had no batch
        for the learner (a shard refilling after a restart): actors then act without waiting
        for a new version (`surreal.algos.ddpg.actor.Pacer`)."""
        c = self.counters
        self.starved = starved
        message = {
            "version": c["version"],
            "step": c["global_step"],
            "params": self.learner.params(),
        }
        self.publisher.publish("params", {**message, "starved": int(starved)})

    def done(self) -> bool:
        """Whether the run used its step budget, or an evaluation reached `run.stop_at_return`."""
        return self.counters["global_step"] >= self.comp.config.run.steps or self.goal.reached()

    def _stop_now(self) -> bool:
        return self.comp.stopping.is_set() or self.done()

    def consume(self, data: dict[str, np.ndarray]) -> None:
        """`fetch_batches` learner updates on one reply (or a re-publication if it was empty)."""
        c, algo = self.counters, self.comp.config.algo
        self.last_batch = time.monotonic()
        c["global_step"] = self.steps.update(
            int(data["shard"][0]), int(data["added"][0]), int(data["boot"][0])
        )
        if "empty" in data:  # a shard below its warm-up (new, or refilling after a restart)
            self.publish(starved=True)  # late parameter servers get it; actors stop waiting
            self._refilling(int(data["shard"][0]), int(data["size"][0]))
            return
        if self.starved:  # batches again: say so now, not at the next version
            self.publish()
        metrics: dict[str, Any] = {}
        t0, waited = time.perf_counter(), self.pace.waited_s
        for j in range(len(data["rew"]) // algo.batch_size):
            if not self.pace.room(self._stop_now, lambda: self.report({})):
                break
            part = slice(j * algo.batch_size, (j + 1) * algo.batch_size)
            metrics = self.learner.learn(
                {k: data[k][part] for k in ("obs", "act", "rew", "next_obs", "discount")}
            )
            c["iterations"] += 1
            if c["iterations"] % algo.publish_every == 0:
                c["version"] += 1
                self.publish()
        self.busy_s += time.perf_counter() - t0 - (self.pace.waited_s - waited)
        self.report(metrics)

    def waiting(self) -> None:
        """No reply from the replay for a while (its shard killed, restarting): publish the
        parameters again, at most once a second from REPUBLISH_AFTER_S on, so that a parameter
        server that restarted meanwhile (it starts empty) gets them now rather than after the
        learner's next update, which waits for the replay; meanwhile the actors stay paced by
        the versions they get. Not marked starved: a dead shard takes no transitions, and actors
        let loose would spend the step budget into the queues in front of it. Logged every 10 s."""
        now = time.monotonic()
        if now - self.last_batch < REPUBLISH_AFTER_S or now - self.republished < 1.0:
            return
        self.publish()
        self.republished = now
        if now - self.silence_logged > 10.0:
            self.comp.log.info(
                "no reply from the replay for %.0f s (a shard restarting?); waiting",
                now - self.last_batch,
            )
            self.silence_logged = now

    def _refilling(self, shard: int, size: int) -> None:
        """Log, at most every 10 s, which shard the learner waits for and how full it is."""
        now = time.monotonic()
        if now - self.refill_logged > 10.0:
            algo = self.comp.config.algo  # the shard's own sampling start, not the run's total
            warmup = sampling_start(algo.replay_start, algo.replay_shards)
            self.comp.log.info("replay-%d refilling (%d/%d)", shard, size, warmup)
            self.refill_logged = now

    def report(self, metrics: dict[str, Any]) -> None:
        now, c = time.monotonic(), self.counters
        if now - self.last_report > 1.0:
            metrics = {k: float(v) for k, v in metrics.items()}  # a compiled step's: tensors
            metrics["charts/sps"] = (c["global_step"] - self.start_step) / max(
                now - self.started, 1e-6
            )
            its = c["iterations"] - self.its_at_report
            metrics["charts/learner_its"] = its / (now - self.last_report)
            # seconds per update (as PPO's learner reports): its x learn_time is the busy share
            metrics["charts/learn_time"] = self.busy_s / max(its, 1)
            # the share of the time the learner waited for env steps (`UpdatePace`)
            metrics["charts/learner_paced"] = self.pace.waited_s / (now - self.last_report)
            metrics["charts/learner_pace_stalls"] = float(self.pace.stalls)
            self.comp.report(c["global_step"], metrics, version=c["version"], finished=False)
            self.last_report, self.its_at_report, self.busy_s = now, c["iterations"], 0.0
            self.pace.waited_s = 0.0
        if now - self.last_ckpt > self.comp.config.algo.checkpoint_every_s:
            self.save()
            self.last_ckpt = now

    def save(self) -> None:
        """Write the checkpoint, then tell the replay shards (`checkpoint` on `params-pub`:
        each saves its part of the replay on its own, `surreal.runtime.processes.replay_shard`). One that
        cannot be written (a full disk, a state that is not finite) stops the learner with one
        error line; the checkpoints before it stay."""
        if not self.save_failed:
            self.save_failed = checkpoint.save_or_stop(self.comp, self.learner, self.counters)
            if not self.save_failed:
                self.publisher.publish("checkpoint", {"step": self.counters["global_step"]})

    def close(self) -> None:
        c = self.counters
        self.pace.close()
        self.publisher.close()
        self.goal.close()
        self.comp.report(
            c["global_step"],
            {},
            version=c["version"],
            finished=self.done(),
            why=self.goal.why(),
            exiting=True,
        )
        self.comp.close()
