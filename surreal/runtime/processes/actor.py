"""Actor process: steps `env.num_envs` environments, pushes segments, follows the parameters."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import caraml
from surreal.api.recipe import recipe_of
from surreal.monitoring import logs
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.pacing import Pacer
from surreal.runtime.processes.split_actor import build_actor
from surreal.runtime.wire.parameter_client import ParameterClient
from surreal.runtime.wire.remote_policy import actor_inference

NO_VERSION = "no new parameters"
"""What an actor that paces on the learner's versions waits for (`surreal.runtime.wire.waits`)."""


@dataclass
class _ActorLoop:
    """The acting loop's parts and running counts (env steps, episodes, the last report)."""

    comp: Component
    policy: Any
    params: ParameterClient
    pusher: Any
    env: Any
    actor: Any
    rollout: Callable[[], dict]
    per_batch: int
    clock: float
    env_steps: int = 0
    steps_at_report: int = 0
    last_report: float = field(default_factory=time.monotonic)
    episodes: int = 0
    recent: list = field(default_factory=list)

    @property
    def segment_steps(self) -> int:
        """Environment steps in one segment (`actor.rollout_length` x `env.num_envs`)."""
        return self.comp.config.actor.rollout_length * self.env.num_envs

    def run(self) -> None:
        """Wait for the first parameters, then act, push and follow the parameters until stopped."""
        comp, params, cfg = self.comp, self.params, self.comp.config
        fresh = _wait_for(params, 1, comp)
        pacer = None
        if cfg.actor.max_ahead is not None:
            pacer = Pacer(self.per_batch, cfg.run.actors, cfg.actor.max_ahead, params.version)
        if fresh is not None:
            comp.log.info("first parameters: version %d; acting", params.version)
        while fresh is not None and not comp.stopping.is_set():
            self.segment(fresh)
            fresh = params.fetch()
            if pacer is not None:
                fresh = _pace(pacer, params, fresh, comp)
                if fresh is None:
                    break
            fresh = fresh if fresh is not None else {}
            self.account()

    def segment(self, fresh: dict) -> None:
        """Load `fresh` parameters (if any), roll out one segment and push it, timing each phase."""
        prom, env = self.comp.prom, self.env
        if fresh:
            self.policy.load_params(fresh)
            prom.port_traffic("params", "in", fresh)
        self.clock = _phase(prom, "params", self.clock)
        segment = self.rollout()
        segment["version"] = np.full(env.num_envs, self.params.version, np.int64)
        self.clock = _phase(prom, "rollout", self.clock)
        self.pusher.push(segment)
        prom.port_traffic("experience", "out", segment)
        self.clock = _phase(prom, "push", self.clock)

    def account(self) -> None:
        """Count the segment's steps and finished episodes; progress line and report when due."""
        comp, prom, params = self.comp, self.comp.prom, self.params
        self.env_steps += self.segment_steps
        prom.count("surreal_env_steps_total", self.segment_steps)
        prom.set("surreal_policy_version", params.version)
        now = time.monotonic()
        returns, lengths = self.actor.pop_episodes()
        prom.count("surreal_episodes_total", len(returns))
        self.episodes, self.recent = (
            self.episodes + len(returns),
            (self.recent + list(returns))[-20:],
        )
        comp.tick(
            {"env steps": self.env_steps, "segments": self.env_steps // self.segment_steps},
            {
                "episodes": self.episodes,
                "return": logs.rate(sum(self.recent) / len(self.recent)) if self.recent else None,
                "version": params.version,
            },
        )
        if returns or now - self.last_report > 2.0:
            sps = (self.env_steps - self.steps_at_report) / max(now - self.last_report, 1e-6)
            comp.report(
                params.step,
                {"actor/sps": sps},
                env_steps=self.env_steps,
                episode_returns=returns,
                episode_lengths=lengths,
                version=params.version,
            )
            self.last_report, self.steps_at_report = now, self.env_steps

    def close(self) -> None:
        """The closing log line; then close the env, the parameter client, the pusher, comp."""
        self.comp.log.info(
            "acted %s env steps (%s segments, %s episodes); last version %d",
            f"{self.env_steps:,}",
            f"{self.env_steps // self.segment_steps:,}",
            f"{self.episodes:,}",
            self.params.version,
        )
        self.env.close()
        self.params.close()
        self.pusher.close()
        self.comp.close()


def main(run_dir: str, index: int = 0) -> None:
    """Collect experience until stopped."""
    torch.set_num_threads(1)
    comp = Component(run_dir, "actor", index)
    cfg = comp.config
    seed = cfg.run.seed + 1000 * (index + 1)
    np.random.seed(seed)
    torch.manual_seed(seed)
    policy, params = actor_inference(comp, index)  # actor.inference: local or remote
    pusher = caraml.Pusher(comp.address("experience").tcp, hwm=4)
    env, actor = build_actor(comp, policy, seed)  # two halves: actor.double_buffer (remote)
    feeding = recipe_of(comp.algo)
    rollout = actor.rollout_episodes if feeding.episode_aligned else actor.rollout
    per_batch = feeding.per_batch(cfg)
    loop = _ActorLoop(
        comp, policy, params, pusher, env, actor, rollout, per_batch, clock=time.perf_counter()
    )
    comp.progress = logs.Progress(comp.log, logs.progress_every(cfg.run.actors))  # 1,000 actors
    comp.log.info(
        "connects experience %s (segments of %d steps x %d envs), params %s (inference %s)",
        comp.address("experience").tcp,
        cfg.actor.rollout_length,
        env.num_envs,
        comp.address("params").tcp,
        cfg.actor.inference,
    )
    try:
        loop.run()
    finally:
        loop.close()


def _phase(prom, phase: str, since: float) -> float:
    """Add the time since `since` to `phase`'s seconds; returns now (the next phase's start)."""
    now = time.perf_counter()
    prom.count("surreal_phase_seconds_total", now - since, phase=phase)
    return now


def _pace(
    pacer: Pacer, params: ParameterClient, fresh: dict | None, comp: Component, give_up_s=15.0
) -> dict | None:
    """One segment was sent: wait while this actor is ahead of its share of the learner's
    batches (`surreal.runtime.processes.pacing`), asking for the version it wants in long polls.
    Returns the newest parameters got (or `fresh`; {} for none), None when stopped."""
    fresh = fresh if fresh is not None else {}
    pacer.sent()
    pacer.observe(params.version, params.live, params.stalls)
    started = said = time.monotonic()
    while pacer.ahead():
        if comp.stopping.is_set():
            return None
        wanted = pacer.wanted_version()
        got = params.fetch(wait_for=wanted, wait_s=2.0)  # 2 s: a stop is seen that soon
        fresh = got if got is not None else fresh
        pacer.observe(params.version, params.live, params.stalls)
        now = time.monotonic()
        comp.waits.waiting("learner", NO_VERSION)  # since the first wait for this version
        if pacer.ahead() and now - started > give_up_s:  # segments lost: pace from here on
            comp.warnings.warn(
                "lost-segments",
                f"waited {now - started:.0f} s for parameters version {wanted}, still at "
                f"{params.version}: segments were lost on the way; pacing from here",
            )
            pacer.restart(params.version)
            return fresh  # one more segment; the wait for the learner goes on
        if now - said >= comp.progress.every_s:  # a stuck run says so in its log
            said = now
            comp.log.info(
                "still waiting for parameters version %d after %.0f s (have %d)",
                wanted,
                now - started,
                params.version,
            )
    comp.waits.over("learner")
    return fresh


def _wait_for(
    params: ParameterClient, target: int, comp: Component, give_up_s: float = 15.0
) -> dict | None:
    """Wait for parameters of version >= `target` (long polls); None if stopped.

    Once parameters are held, waiting ends after `give_up_s` seconds even without the target
    version (returning {}: nothing new): segments lost on the way (a restarted buffer, a lost
    batch) would otherwise leave the learner waiting for this actor and this actor for it.
    """
    started = said = time.monotonic()
    every_s = getattr(getattr(comp, "progress", None), "every_s", None) or logs.progress_s()
    while not comp.stopping.is_set():
        try:  # a long poll: answered when the version arrives (2 s: a stop is seen that soon)
            return params.wait_for(target, deadline_s=2.0)
        except TimeoutError:
            if params.version >= 1 and time.monotonic() - started > give_up_s:
                return {}
            if time.monotonic() - said >= every_s:  # a stuck run says so in its log
                said = time.monotonic()
                getattr(comp, "log", logs.get()).info(
                    "still waiting for parameters version %d after %.0f s (have %d)",
                    target,
                    said - started,
                    params.version,
                )
            continue
    return None
