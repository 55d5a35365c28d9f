"""Multi-agent actor process: steps `env.num_envs` joint envs, sends each policy its agents'
segments, follows each policy's parameters, reports returns per agent and per policy."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

import caraml
from surreal.api.core import Policy
from surreal.api.recipe import recipe_of
from surreal.envs.multiagent import make_multiagent_env
from surreal.multiagent.policy_runs import PolicySpec, policy_run, read_policy_specs
from surreal.multiagent.rollout import JointRollout
from surreal.multiagent.selfplay import OpponentPool
from surreal.runtime.processes.actor import _wait_for
from surreal.runtime.processes.common import Component
from surreal.runtime.wire.parameter_client import ParameterClient


@dataclass
class Stream:
    """One policy's links: its parameters, its experience port, its metrics sink."""

    spec: PolicySpec
    policy: Policy
    params: ParameterClient
    pusher: Any
    metrics: Any
    per_batch: int
    budget: int
    sent: int = 0
    start_version: int = 0
    steps: int = 0

    def done(self) -> bool:
        """Whether its learner has used its step budget (then nobody waits for it)."""
        return self.params.step >= self.budget

    def close(self) -> None:
        for link in (self.params, self.pusher, self.metrics):
            link.close()


def report_to(pusher: Any, comp: Component, source: str, step: int, **fields: Any) -> None:
    """Push a report like `Component.report` to another metrics sink (or as another source)."""
    message = {"source": source, "index": comp.index, "step": int(step), "time": time.time()}
    message["scalars"] = {k: float(v) for k, v in fields.pop("scalars", {}).items()}
    pusher.push(comp.signed({**message, **fields}))


def main(run_dir: str, index: int = 0) -> None:
    """Collect experience until stopped."""
    torch.set_num_threads(1)
    comp = Component(run_dir, "actor", index)
    cfg, algo = comp.config, comp.config.algo
    seed = cfg.run.seed + 1000 * (index + 1)
    np.random.seed(seed)
    torch.manual_seed(seed)
    streams: dict[str, Stream] = {}
    envs = [make_multiagent_env(cfg.env.id, seed + i) for i in range(cfg.env.num_envs)]
    try:
        for spec in read_policy_specs(comp.run):
            sub = policy_run(comp.run, spec.name)
            sub_cfg = sub.load_config()
            streams[spec.name] = Stream(
                spec,
                comp.algo.make_policy(sub_cfg.algo, spec.env_info),
                ParameterClient(comp.address(f"params-{spec.name}").tcp, timeout=5.0),
                caraml.Pusher(comp.address(f"experience-{spec.name}").tcp, hwm=4),
                caraml.Pusher(comp.address(f"metrics-{spec.name}").tcp, hwm=10_000),
                recipe_of(comp.algo).per_batch(sub_cfg),
                sub_cfg.run.steps,
            )
        pool = None
        if algo.self_play:
            (only,) = streams.values()
            sub_algo = policy_run(comp.run, only.spec.name).load_config().algo
            pool = OpponentPool(
                lambda: comp.algo.make_policy(sub_algo, only.spec.env_info),
                algo.pool_size,
                algo.pool_every,
                algo.pool_latest,
                seed,
            )
        joint = JointRollout(
            envs,
            [s.spec for s in streams.values()],
            {name: s.policy for name, s in streams.items()},
            cfg.actor.rollout_length,
            algo.central_value,
            pool,
            seed,
        )
        _loop(comp, streams, joint, pool)
    finally:
        for env in envs:
            env.close()
        for stream in streams.values():
            stream.close()
        comp.close()


def _loop(comp: Component, streams: dict[str, Stream], joint: Any, pool: Any) -> None:
    cfg = comp.config
    for stream in streams.values():
        fresh = _wait_for(stream.params, 1, comp)
        if fresh is None:
            return
        _load(stream, fresh, pool)
        stream.start_version = stream.params.version
    env_steps, last_report, steps_at_report = 0, time.monotonic(), 0
    while not comp.stopping.is_set():
        segments = joint.rollout()
        for name, segment in segments.items():
            stream = streams[name]
            segment["version"] = np.full(segment["reward"].shape[1], stream.params.version)
            stream.pusher.push(segment)
            stream.sent += 1
            stream.steps += segment["reward"].size
            if not _follow(stream, comp, pool):
                return
        env_steps += cfg.actor.rollout_length * cfg.env.num_envs
        episodes = joint.pop_episodes()
        now = time.monotonic()
        if episodes or now - last_report > 2.0:
            sps = (env_steps - steps_at_report) / max(now - last_report, 1e-6)
            _report(comp, streams, joint, episodes, env_steps, sps)
            last_report, steps_at_report = now, env_steps


def _load(stream: Stream, fresh: dict, pool: Any) -> None:
    if fresh:
        stream.policy.load_params(fresh)
        if pool is not None:
            pool.offer(stream.params.version, fresh)


def _follow(stream: Stream, comp: Component, pool: Any) -> bool:
    """Fetch newer parameters; wait (`actor.max_ahead`) while too far ahead of its learner.
    False: stopped."""
    cfg = comp.config
    fresh = stream.params.fetch()
    if cfg.actor.max_ahead is not None and not stream.done():
        share = stream.sent * cfg.run.actors // stream.per_batch
        needed = stream.start_version + share - cfg.actor.max_ahead
        if stream.params.version < needed:
            waited = _wait_for(stream.params, needed, comp)
            if waited is None:
                return False
            fresh = waited or fresh
            if stream.params.version < needed:  # segments were lost: pace from here on
                stream.start_version, stream.sent = stream.params.version, 0
    _load(stream, fresh or {}, pool)
    return True


def _report(
    comp: Component,
    streams: dict[str, Stream],
    joint: Any,
    episodes: list[dict[str, Any]],
    env_steps: int,
    sps: float,
) -> None:
    """Joint episodes to the run's sink (return: the agents' mean), each agent's returns as
    `agents/<agent>/episodic_return`, each policy's trajectories to its own sink."""
    team = [float(np.mean(list(e["returns"].values()))) for e in episodes]
    lengths = [e["length"] for e in episodes]
    first = next(iter(streams.values()))
    comp.report(
        first.params.step,
        {"actor/sps": sps},
        env_steps=env_steps,
        episode_returns=team,
        episode_lengths=lengths,
        version=first.params.version,
    )
    per_agent: dict[str, list[float]] = {}
    for e in episodes:
        for agent, ret in e["returns"].items():
            per_agent.setdefault(agent, []).append(ret)
    if per_agent:
        scalars = {f"agents/{a}/episodic_return": float(np.mean(r)) for a, r in per_agent.items()}
        report_to(comp._metrics, comp, "agents", first.params.step, scalars=scalars)
    for stream in streams.values():
        pairs = [(r, e["length"]) for e in episodes for r in joint.policy_returns(stream.spec, e)]
        returns = [r for r, _ in pairs]
        scalars = {}
        if joint.pool is not None and returns:
            scalars["selfplay/win_rate"] = float(np.mean([r > 0 for r in returns]))
            scalars["selfplay/pool_size"] = float(len(joint.pool.entries))
        report_to(
            stream.metrics,
            comp,
            "actor",
            stream.params.step,
            scalars=scalars,
            env_steps=stream.steps,
            episode_returns=returns,
            episode_lengths=[n for _, n in pairs],
            version=stream.params.version,
        )
