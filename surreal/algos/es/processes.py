"""The ES processes: the master and a worker (roles `es-master`, `es-worker` of `surreal component`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch  # noqa: F401  (checkpoints need it: imported as the process starts, not in a hurried exit)

import caraml
from surreal.algos.es.master import ESMaster, serve
from surreal.algos.es.worker import run_worker
from surreal.envs import make_env
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.stall_watch import StallWatch
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.wire.goal import GoalInbox


@dataclass
class _MasterRun:
    """The ES master's run: its learner, counters and parameter publisher, and how it saves."""

    comp: Any
    learner: Any
    counters: dict[str, int]
    publisher: Any
    start_steps: int = 0
    save_failed: str = ""
    """Why the last checkpoint could not be written ("" while every one was)."""
    goal: Any = None
    """The evaluators' word that the run reached `run.stop_at_return` (a `GoalInbox`)."""

    def save(self) -> None:
        """Write the run's checkpoint (learner and counters). One that cannot be written (a full
        disk) is one error line and stops the master, as it stops the other learners; the
        checkpoints before it stay."""
        if not self.save_failed:
            self.save_failed = checkpoint.save_or_stop(self.comp, self.learner, self.counters)

    def publish(self) -> None:
        """Publish the current parameters with their version and step."""
        self.publisher.publish(
            "params",
            {
                "version": self.counters["version"],
                "step": self.counters["global_step"],
                "params": self.learner.params(),
            },
        )

    def on_generation(self, m: Any, i: int) -> bool:
        """`serve`'s callback: publish, checkpoint when due, report; whether to stop."""
        gen, env_steps, _, _ = m.finished[i]
        self.counters.update(global_step=env_steps, iterations=gen + 1, version=gen + 1)
        with m.lock:
            self.publish()
            if (gen + 1) % max(self.comp.config.run.checkpoint_every, 1) == 0 or m.done:
                self.save()
        self.report(m, i)
        return self.comp.stopping.is_set() or self.goal.reached()

    def report(self, m: Any, i: int) -> None:
        """Report generation `i`: population return, reissued tasks, rates, update time."""
        gen, env_steps, wall, pop_return = m.finished[i]
        previous_wall = m.finished[i - 1][2] if i > 0 else 0.0
        self.comp.report(
            env_steps,
            {
                "es/population_return": pop_return,
                "es/generation": gen + 1,
                "es/reissued_tasks": m.reissued,
                "charts/sps": (env_steps - self.start_steps) / max(wall, 1e-6),
                "charts/learner_its": 1.0 / max(wall - previous_wall, 1e-6),
                # the master's update per generation (its x learn_time: the share it is busy)
                "charts/learn_time": m.update_s[i],
                "charts/policy_lag": 0.0,  # every result it uses is the current generation's
            },
            version=self.counters["version"],
            finished=m.done,
        )

    def close(self) -> None:
        """Close the publisher, report the exit and close the component."""
        self.publisher.close()
        self.goal.close()
        budget = self.counters["global_step"] >= self.comp.config.run.steps
        self.comp.report(
            self.counters["global_step"],
            {},
            version=self.counters["version"],
            finished=budget or self.goal.reached(),
            why=self.goal.why(),
            exiting=True,
        )
        self.comp.close()


def master_main(run_dir: str, index: int = 0) -> None:
    """Run the ES master of a run: hand out pairs, step theta, publish, report, checkpoint."""
    comp = Component(run_dir, "learner", index)
    cfg = comp.config
    learner = comp.algo.create(cfg, comp.env_info, seed=cfg.run.seed)
    counters, _ = checkpoint.resume(comp, learner)
    comp.started_at = counters["global_step"]  # the sink's step is the master's from here
    comp.report(counters["global_step"], {}, version=counters["version"])
    master = ESMaster(
        learner.policy,
        learner.state,
        learner.noise,
        cfg.algo,
        generations=10**9,
        seed=cfg.run.seed,
        max_env_steps=cfg.run.steps,
        env_steps=counters["global_step"],
    )
    run = _MasterRun(
        comp,
        learner,
        counters,
        publisher=caraml.Publisher(comp.address("params-pub").bind_tcp),
        start_steps=counters["global_step"],
        goal=GoalInbox(comp),
    )
    StallWatch(comp, lambda: counters["global_step"])  # ends a run that stands still
    run.publish()
    # SIGTERM sets comp.stopping: tell the workers to stop and end serve() even between generations.
    threading.Thread(
        target=lambda: (comp.stopping.wait(), master.stop(abort=True)), daemon=True
    ).start()
    try:
        serve(master, comp.address("es-master").bind_tcp, run.on_generation)
    finally:
        learner.noise.unlink()  # first: the supervisor may SIGKILL a slow exit
        with master.lock:
            run.save()
        run.close()
    if run.save_failed:
        raise SystemExit(checkpoint.UNWRITABLE_EXIT)  # never restarted (a full disk stays full)


def worker_main(run_dir: str, index: int = 0) -> None:
    """Run ES worker `index` of a run until the master says stop."""
    comp = Component(run_dir, "es-worker", index)
    cfg = comp.config
    learner = comp.algo.create(cfg, comp.env_info, seed=cfg.run.seed)
    env = make_env(cfg.env.id, cfg.env, seed=cfg.run.seed + 1000 * (index + 1))
    try:
        run_worker(
            env,
            learner.policy,
            learner.state,
            learner.noise,
            cfg.algo,
            comp.address("es-master").tcp,
            f"worker-{index}",
            stopping=comp.stopping,
        )
    finally:
        env.close()
        comp.close()
