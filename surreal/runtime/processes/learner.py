"""Learner process: batches from the buffer (DataFetcher) -> Learner.learn -> publish parameters."""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np
import torch

import caraml
from surreal.api.core import Learner
from surreal.api.device import learner_threads
from surreal.api.recipe import recipe_of
from surreal.monitoring import logs
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.member import Member
from surreal.runtime.processes.replay import batch_arrays
from surreal.runtime.processes.replicas import join as join_replicas
from surreal.runtime.processes.stall_watch import StallWatch
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.wire.batch_protocol import BatchRequests
from surreal.runtime.wire.goal import GoalInbox
from surreal.runtime.wire.parameter_client import ParameterClient
from surreal.runtime.wire.waits import SILENT
from symphony.addresses import AddressError

RESTART_ASK_S = 10.0
"""How long a restarted learner asks the parameter server for the version it holds."""
NO_BATCH = "no batch in the buffer"
"""What a learner whose buffer answers empty waits for (from the actors)."""


def build_learner(comp: Component) -> tuple[Learner, dict[str, int]]:
    """The run's learner and its counters, resumed from the run's checkpoint if there is one.

    Sets torch's threads (`run.torch_threads`, 0: `surreal.api.device.learner_threads`) and the
    torch and numpy seeds (`run.seed`) first, so every learner process starts the same way.
    Counters: global_step, version, iterations.
    """
    cfg = comp.config
    torch.set_num_threads(learner_threads(cfg.run.torch_threads, cfg.run.actors))
    torch.manual_seed(cfg.run.seed)
    np.random.seed(cfg.run.seed)
    learner = comp.algo.create(cfg, comp.env_info)
    counters, _ = checkpoint.resume(comp, learner)  # a loaded checkpoint is a line on the log
    if comp.restarts:  # a restarted learner: its versions go on past the ones it published
        counters["version"] = restarted_version(comp, counters["version"])
    comp.started_at = counters["global_step"]  # every report says where this learner began
    return learner, counters


def restarted_version(comp: Component, version: int) -> int:
    """The first version of a learner restarted from a checkpoint of `version`: past every one
    the killed learner published since (the parameter server keeps only newer ones, and actors
    fetch and pace on newer ones): one more than the server holds when it answers within
    `RESTART_ASK_S`, else past the most that `run.checkpoint_every` iterations publish between
    two checkpoints (one of which may have been unreadable) when it does not answer or holds
    less (it restarted too)."""
    held = held_version(comp)
    if held is not None and held >= version:
        first = held + 1
    else:  # no answer, or a parameter server restarted since (actors may hold more)
        first = version + 1 + 2 * comp.config.run.checkpoint_every
    comp.log.info(
        "restarted from the checkpoint's version %d: publishing from version %d (%s)",
        version,
        first,
        "the parameter server did not answer"
        if held is None
        else f"the parameter server holds {held}",
    )
    return first


def held_version(comp: Component) -> int | None:
    """The parameter version the run's parameter server holds; None when this learner does not
    connect to one (`params`) or it did not answer within `RESTART_ASK_S` seconds."""
    try:
        address = comp.address("params").tcp
    except AddressError:
        return None
    client = ParameterClient(address, timeout=2.0, outage_s=RESTART_ASK_S)
    client.version = 2**61  # "I hold everything": the reply carries the version, no params
    try:
        client.fetch()
        return client.latest_version
    except caraml.RequestTimeout:
        return None
    finally:
        client.close()


def env_steps(batch: dict[str, np.ndarray]) -> int:
    """Environment steps in a batch: its real steps (`mask`, episode-aligned) or every entry."""
    mask = batch.get("mask")
    return int(np.prod(batch["reward"].shape)) if mask is None else int(np.sum(mask))


class LearnerLoop:
    """Owns the learner, its counters, the parameter publisher and checkpoints."""

    def __init__(self, comp: Component) -> None:
        self.comp, cfg = comp, comp.config
        self.learner, self.counters = build_learner(comp)
        self.replicas = join_replicas(comp, self.learner)
        self.rank = self.replicas.rank if self.replicas else 0
        """Rank 0 publishes parameters, writes checkpoints and reports; every rank learns."""
        self.counters["version"] = max(self.counters["version"], 1)  # actors wait for >= 1
        self.publisher = None
        if self.rank == 0:
            self.publisher = caraml.Publisher(comp.address("params-pub").bind_tcp)
            comp.log.info("binds params-pub %s", comp.address("params-pub").bind_tcp)
        self._published: tuple[int, dict] | None = None
        self.per_batch = recipe_of(comp.algo).per_batch(cfg) // cfg.run.learner_replicas
        self.started = time.monotonic()
        self.start_step = self.counters["global_step"]
        self.requester = os.urandom(6).hex()  # batch request ids: see components.batch_protocol
        self.member = Member.attach(comp.run.path) if self.rank == 0 else None
        self.goal = GoalInbox(comp)
        """The evaluators' word that the run reached `run.stop_at_return` (when wired)."""
        if self.rank == 0:  # the ranks step together: one watch for all
            StallWatch(comp, lambda: self.counters["global_step"])
        """A population member's hook (`surreal.pbt`): round checkpoints, directives taken."""
        self.empty = 0
        """Replies without a batch (the buffer had none in time): a starved learner's sign."""
        self.save_failed = ""
        """Why the last checkpoint could not be written ("" while every one was)."""
        self.batch_at = time.monotonic()
        """When the last batch came (a wait for one past `waits.WAIT_SAY_S` is said)."""
        self.seen: dict[str, float] = {}
        """The last batch's policy lag and buffer fill (for the progress line)."""
        start = {"step": self.start_step, "updates": self.counters["iterations"]}
        comp.progress = logs.Progress(comp.log, start=start)  # a resumed run's rates are right
        # the sink's step is the learner's from now on (after a crash: back to the checkpoint's)
        self.report(self.start_step, {}, version=self.counters["version"])
        comp.own_progress = True  # `tick` (its first report comes before its first line)
        comp.log.info(
            "learning %s steps from step %s on %s (rank %d of %d)",
            f"{cfg.run.steps:,}",
            f"{self.start_step:,}",
            getattr(self.learner, "device", "cpu"),
            self.rank,
            cfg.run.learner_replicas,
        )

    def tick(self) -> None:
        """The learner's `progress:` line, when one is due: steps and updates with their rates,
        the version, the last batch's policy lag and buffer fill, replies without a batch."""
        counters = self.counters
        self.comp.tick(
            {"step": counters["global_step"], "updates": counters["iterations"]},
            {
                "budget": self.comp.config.run.steps,
                "version": counters["version"],
                "policy lag": None if "lag" not in self.seen else logs.rate(self.seen["lag"]),
                "buffer fill": self.seen.get("fill"),
                "empty replies": self.empty,
            },
        )

    def publish(self) -> None:
        """Send the current parameters to the parameter server(s); `Learner.params()` (a copy to
        numpy, from the GPU with `run.device=cuda`) runs once per version, re-sends reuse it."""
        if self.publisher is None:
            return
        version = self.counters["version"]
        if self._published is None or self._published[0] != version:
            self._published = (version, self.learner.params())
        self.publisher.publish(
            "params",
            {
                "version": version,
                "step": self.counters["global_step"],
                "params": self._published[1],
            },
        )
        self.comp.prom.port_traffic("params-pub", "out", self._published[1])

    def step(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        """One learner iteration on a batch; returns the metrics to report."""
        cfg = self.comp.config
        t0 = time.perf_counter()
        self.learner.progress = self.counters["global_step"] / cfg.run.steps
        metrics = self.learner.learn(batch)
        learned = time.perf_counter()
        self.batch_at = time.monotonic()
        self.comp.waits.over("actors")
        steps = env_steps(batch)
        self.counters["global_step"] += int(self.replicas.sum(steps)) if self.replicas else steps
        self.counters["iterations"] += 1
        lag = self.counters["version"] - float(np.mean(batch["version"]))
        self.seen = {"lag": lag, "fill": float(batch["fill"][0])}
        self.counters["version"] += 1
        self.publish()
        self._count(batch, steps, lag, t0, learned)
        elapsed = time.monotonic() - self.started
        metrics.update(
            {
                "charts/sps": (self.counters["global_step"] - self.start_step) / max(elapsed, 1e-6),
                "charts/learn_time": time.perf_counter() - t0,
                "charts/policy_lag": lag,
                "buffer/fill": float(batch["fill"][0]),
            }
        )
        if self.counters["iterations"] % cfg.run.checkpoint_every == 0:
            self.save()
        if self.member is not None:
            self.member.after_step(self)
        return metrics

    def _count(
        self, batch: dict[str, np.ndarray], steps: int, lag: float, t0: float, learned: float
    ) -> None:
        """This iteration's Prometheus series (`surreal.monitoring.prometheus`)."""
        prom = self.comp.prom
        prom.port_traffic("batches", "in", batch)
        prom.count("surreal_learner_iterations_total")
        prom.count("surreal_learner_steps_total", steps)
        prom.set("surreal_global_step", self.counters["global_step"])
        prom.set("surreal_policy_version", self.counters["version"])
        prom.set("surreal_policy_lag", lag)
        prom.set("surreal_buffer_fill", float(batch["fill"][0]))
        prom.count("surreal_phase_seconds_total", learned - t0, phase="learn")
        prom.count("surreal_phase_seconds_total", time.perf_counter() - learned, phase="publish")

    def report(self, step: int, scalars: dict[str, float], **extra: object) -> None:
        """Send metrics (rank 0 reports for all replicas)."""
        if self.rank == 0:
            self.comp.report(step, scalars, **extra)

    def save(self) -> None:
        """Write the checkpoint (rank 0). One that cannot be written (a full disk) stops the
        learner with one error line; the checkpoint before it stays as it was."""
        if not (self.rank or self.save_failed):
            self.save_failed = checkpoint.save_or_stop(self.comp, self.learner, self.counters)

    def done(self) -> bool:
        """Whether the run reached its step budget, or an evaluation its `run.stop_at_return`."""
        return self.counters["global_step"] >= self.comp.config.run.steps or self.goal.reached()


def _first_batch_bytes(loop: LearnerLoop, address: str) -> int:
    """Size the DataFetcher's slots from the first batch (re-publishing params while waiting)."""
    client = caraml.Client(address, timeout=30.0, retries=100)
    requests = iter(BatchRequests(loop.per_batch, requester=loop.requester))
    comp = loop.comp
    comp.log.info("connects batches %s; waiting for the first batch", address)
    started = said = time.monotonic()
    try:
        while not comp.stopping.is_set():
            loop.publish()
            reply = client.request(next(requests))
            if reply.get("batch") is not None:
                arrays = batch_arrays(reply)
                loop.pending = arrays
                comp.log.info("first batch after %.1f s", time.monotonic() - started)
                return sum(a.nbytes + 64 for a in arrays.values())
            comp.waits.waiting("actors", NO_BATCH, time.monotonic() - started)
            if time.monotonic() - said >= comp.progress.every_s:  # a stuck run says so
                said = time.monotonic()
                comp.log.info(
                    "still waiting for the first batch after %.0f s (the buffer holds %s)",
                    said - started,
                    reply.get("fill"),
                )
        return 0
    finally:
        client.close()


def main(run_dir: str, index: int = 0) -> None:
    """Learn until the step budget is used or stopped; checkpoint at exit."""
    comp = Component(run_dir, "learner", index)
    loop = LearnerLoop(comp)
    address = comp.address("batches").tcp
    fetcher = None
    try:
        nbytes = _first_batch_bytes(loop, address)
        if nbytes:
            metrics = loop.step(loop.pending)  # reported at the step it reached, as every batch
            loop.report(loop.counters["global_step"], metrics)
            fetcher = caraml.DataFetcher(
                address,
                BatchRequests(loop.per_batch, requester=f"{loop.requester}-fetcher"),
                batch_arrays,
                slot_bytes=int(nbytes * 1.25) + 4096,
                n_slots=2,
                timeout=10.0,  # a resent request is answered from the buffer's reply cache
                retries=1000,
            )
        last_report = time.monotonic()
        while fetcher is not None and not comp.stopping.is_set() and not loop.done():
            try:
                handle = _next_batch(comp, fetcher)
            except caraml.CaramlError:
                if comp.stopping.wait(2.0):  # its worker got the same stop signal first
                    break
                raise
            last_report = _learn_from(loop, handle, last_report)
    finally:
        _shut_down(loop, fetcher)
    if loop.save_failed:
        raise SystemExit(checkpoint.UNWRITABLE_EXIT)  # never restarted (a full disk stays full)


def _next_batch(comp: Component, fetcher: Any) -> Any:
    """The DataFetcher's next batch handle, its wait counted as the `wait` phase; a buffer
    that gives no reply for `waits.WAIT_SAY_S` is said (`surreal.runtime.wire.waits`)."""
    waited = time.perf_counter()
    while True:
        try:
            handle = fetcher.get(timeout=2.0)
            break
        except (caraml.WorkerDied, caraml.SlotTooSmall):
            raise
        except caraml.CaramlError:  # nothing within 2 s: the buffer is silent so far
            if comp.stopping.is_set():
                raise
            comp.waits.waiting("buffer", SILENT, time.perf_counter() - waited)
    comp.waits.over("buffer")
    comp.prom.count("surreal_phase_seconds_total", time.perf_counter() - waited, phase="wait")
    return handle


def _learn_from(loop: LearnerLoop, handle: Any, last_report: float) -> float:
    """Learn from (or, empty, re-publish on) one batch; returns the last report's time."""
    with handle:
        if "empty" in handle.data:
            loop.publish()  # subscribers that joined late get the current version
            loop.empty += 1
            loop.comp.waits.waiting("actors", NO_BATCH, time.monotonic() - loop.batch_at)
            loop.tick()
            return last_report
        metrics = loop.step(handle.data)
    loop.tick()
    now = time.monotonic()
    metrics["charts/learner_its"] = 1.0 / max(now - last_report, 1e-6)
    loop.report(
        loop.counters["global_step"],
        metrics,
        version=loop.counters["version"],
        finished=loop.done(),
        why=loop.goal.why(),
    )
    return now


def _shut_down(loop: LearnerLoop, fetcher: Any) -> None:
    """Checkpoint, log where it stopped, close fetcher, publisher, replicas; report the exit."""
    comp = loop.comp
    loop.save()
    comp.log.info(
        "%s at step %s of %s (version %d, %d updates); checkpoint %s",
        loop.goal.why() if loop.done() else "stopping",
        f"{loop.counters['global_step']:,}",
        f"{comp.config.run.steps:,}",
        loop.counters["version"],
        loop.counters["iterations"],
        comp.run.checkpoint if loop.rank == 0 else "written by rank 0",
    )
    if fetcher is not None:
        fetcher.close()
    if loop.publisher is not None:
        loop.publisher.close()
    if loop.replicas is not None:
        loop.replicas.close()
    loop.goal.close()
    loop.report(
        loop.counters["global_step"],
        {},
        version=loop.counters["version"],
        finished=loop.done(),
        why=loop.goal.why(),
        exiting=True,
    )
    comp.close()
