"""Evaluator process: greedy episodes with each new parameter version, every `eval.every_s`; one
that reaches `run.stop_at_return` is told to the learner (`surreal.runtime.wire.goal`)."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from surreal.api.core import Policy
from surreal.envs import VectorEnv
from surreal.runtime.processes.common import Component
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import read_json
from surreal.runtime.wire.goal import GoalSender
from surreal.runtime.wire.parameter_client import ParameterClient


def evaluate(
    policy: Policy, env: object, episodes: int, stop: Callable[[], bool] = lambda: False
) -> list[float]:
    """Run `episodes` greedy episodes on a VectorEnv of `episodes` envs (one episode each).

    Returns fewer (the finished ones) when `stop()` turns true first.
    """
    returns: list[float | None] = [None] * episodes
    obs = env.reset()
    policy.reset(np.ones(len(obs), bool))
    while any(r is None for r in returns) and not stop():
        action, _ = policy.act(obs, deterministic=True)
        obs, _, terminated, truncated, info = env.step(action)
        ended = np.flatnonzero(terminated | truncated)
        for i, ret in zip(ended, info["episode_returns"], strict=False):
            if returns[i] is None:
                returns[i] = float(ret)
    return [float(r) for r in returns if r is not None]


def _keep_best(comp: Component, params: dict, result: tuple[float, int], best: float) -> float:
    """Write `checkpoints/best.pt` when `result` (mean return, step) beats `best`; the best
    return so far."""
    if result[0] <= best or comp.index != 0:
        return best
    try:
        checkpoint.save_best(comp.run.checkpoint.with_name(checkpoint.BEST), params, *result[::-1])
    except checkpoint.CheckpointError as err:
        comp.log.warning("%s", err)
    return result[0]


def _best_so_far(comp: Component) -> float:
    """The run's best evaluation before this process (a restart, `--resume`): its status's."""
    best = (read_json(comp.run.status_file, {}) or {}).get("best_eval_return")
    return float("-inf") if best is None else float(best)


def main(run_dir: str, index: int = 0) -> None:
    """Evaluate until stopped."""
    import torch

    torch.set_num_threads(1)
    comp = Component(run_dir, "evaluator", index)
    cfg = comp.config
    params = ParameterClient(comp.address("params").tcp, waits=comp.waits)
    goal = GoalSender(comp)  # run.stop_at_return: the learner ends there, watched or not
    policy = comp.algo.make_policy(cfg.algo, comp.env_info)
    env = VectorEnv(cfg.env.id, cfg.env, seed=cfg.run.seed + 10**6, num_envs=cfg.eval.episodes)
    comp.log.info(
        "connects params %s; %d greedy episodes per new version, every %g s at most",
        comp.address("params").tcp,
        cfg.eval.episodes,
        cfg.eval.every_s,
    )
    evaluations, last, best = 0, None, _best_so_far(comp)
    comp.own_progress = True  # `tick` (its first report comes before its first line)
    try:
        while not comp.stopping.is_set():
            started = time.monotonic()
            fresh = params.fetch()
            if fresh is not None:
                policy.load_params(fresh)
                returns = evaluate(policy, env, cfg.eval.episodes, comp.stopping.is_set)
                if len(returns) < cfg.eval.episodes:
                    break
                evaluations, last = evaluations + 1, (float(np.mean(returns)), params.step)
                best = _keep_best(comp, fresh, last, best)
                if evaluations == 1:
                    comp.log.info("first evaluation: return %.1f at step %s", *last)
                comp.prom.set("surreal_eval_return", float(np.mean(returns)))
                comp.prom.count("surreal_episodes_total", len(returns))
                comp.prom.set("surreal_policy_version", params.version)
                comp.report(
                    params.step,
                    {
                        "charts/eval_return": float(np.mean(returns)),
                        "charts/eval_return_std": float(np.std(returns)),
                    },
                    version=params.version,
                )
                # after the report: a learner told of its goal ends the run at once, and the
                # sink must already hold the evaluation that ended it (status's best return)
                goal.tell(*last)
            comp.tick(
                {"evaluations": evaluations},
                {
                    "last return": None if last is None else f"{last[0]:.1f} at step {last[1]:,}",
                    "version": params.version,
                },
            )
            comp.stopping.wait(max(cfg.eval.every_s - (time.monotonic() - started), 0.05))
    finally:
        comp.log.info("%d evaluations; the last: %s", evaluations, last and f"{last[0]:.1f}")
        env.close()
        params.close()
        goal.close()
        comp.close()
