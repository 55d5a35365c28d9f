"""Playing a multi-agent run's policies back (from their checkpoints) and against baselines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from surreal.envs.multiagent import JointEnv, make_multiagent_env
from surreal.multiagent.policy_runs import policy_run, read_policy_specs
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import resolve_run


def load_policies(path: Path | str) -> tuple[dict[str, Any], Any, dict[str, str]]:
    """(policy name -> Policy with its latest checkpoint's params, the run config, agent ->
    policy name) of the multi-agent run at `path`."""
    run = resolve_run(path)
    config, algo = run.load_config(), run.algo_class()
    policies, owner = {}, {}
    for spec in read_policy_specs(run):
        sub = policy_run(run, spec.name)
        policy = algo.make_policy(sub.load_config().algo, spec.env_info)
        policy.load_params(checkpoint.load(sub.checkpoint)["params"])
        policies[spec.name] = policy
        owner.update(dict.fromkeys(spec.agents, spec.name))
    return policies, config, owner


def _inputs(env: JointEnv, obs: dict[str, np.ndarray], agent: str, central: bool) -> np.ndarray:
    x = np.concatenate([obs[agent], env.state(obs)]) if central else obs[agent]
    return x[None].astype(np.float32)


def play(
    env_id: str,
    players: dict[str, Any],
    episodes: int,
    seed: int = 0,
    central: bool = False,
    deterministic: bool = False,
) -> list[dict[str, float]]:
    """Play `episodes` joint episodes; `players` maps agent -> Policy, or None to act uniformly
    at random. Returns each episode's agent -> return."""
    env = make_multiagent_env(env_id, seed)
    rng = np.random.default_rng(seed)
    for i, agent in enumerate(env.agents):
        env.env.action_space(agent).seed(seed + i)
    out = []
    try:
        for _ in range(episodes):
            obs, total = env.reset(), dict.fromkeys(env.agents, 0.0)
            while True:
                actions = {}
                for agent in env.agents:
                    policy = players.get(agent)
                    if policy is None:
                        actions[agent] = env.env.action_space(agent).sample()
                    else:
                        x = _inputs(env, obs, agent, central)
                        actions[agent] = policy.act(x, deterministic=deterministic)[0][0]
                obs, reward, terminated, truncated = env.step(actions)
                for agent in env.agents:
                    total[agent] += reward[agent]
                if any(terminated.values()) or any(truncated.values()):
                    break
            out.append(total)
            rng.random()
    finally:
        env.close()
    return out


def win_rate_vs_random(path: Path | str, games: int = 200, seed: int = 12345) -> float:
    """Fraction of two-player games the run's (first) policy wins against a uniformly random
    opponent, seats alternating (greedy actions)."""
    policies, config, _ = load_policies(path)
    policy = next(iter(policies.values()))
    agents = make_multiagent_env(config.env.id).agents
    wins = 0
    for seat in range(2):
        me = agents[seat]
        results = play(config.env.id, {me: policy}, games // 2, seed + seat, deterministic=True)
        wins += sum(r[me] > 0 for r in results)
    return wins / (2 * (games // 2))


def mean_return(path: Path | str | None, env_id: str, episodes: int = 50, seed: int = 777) -> float:
    """Mean over episodes of the agents' mean return: with the run's policies at `path`
    (sampling), or uniformly random actions for every agent when `path` is None."""
    players, central = {}, False
    if path is not None:
        policies, config, owner = load_policies(path)
        players = {agent: policies[name] for agent, name in owner.items()}
        central = config.algo.central_value
    results = play(env_id, players, episodes, seed, central=central)
    return float(np.mean([np.mean(list(r.values())) for r in results]))
