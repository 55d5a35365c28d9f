"""Per-policy run folders: `RUN/policies/<name>/`, each a complete run folder (config, run record,
checkpoints, metrics) that the policy's buffer, learner, parameter server and metrics sink use
exactly as a single-agent run's processes use theirs. `RUN/policies.json` lists them."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surreal.api.config import Config
from surreal.api.spaces import EnvInfo
from surreal.envs.multiagent import is_multiagent, make_multiagent_env
from surreal.multiagent.mapping import policy_groups
from surreal.runtime.runfolder.rundir import RunDir, read_json, write_json

CENTRAL_MODEL = "surreal.multiagent.central:CentralValueActorCritic"


@dataclass
class PolicySpec:
    """One policy of a multi-agent run."""

    name: str
    agents: list[str]
    """The agents that run it, in the env's agent order."""
    env_info: EnvInfo
    """What its network reads: an agent's observation (+ the global state with central_value)."""
    columns_per_env: int
    """Trajectories it learns from per env: its agents, or 1 (the learning seat) in self-play."""
    actor_obs_dim: int

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "env_info": self.env_info.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicySpec:
        return cls(**{**data, "env_info": EnvInfo.from_dict(data["env_info"])})


def policy_specs(config: Config) -> list[PolicySpec]:
    """The policies of a run config (building its env once).

    Raises:
        ValueError: the env is not multi-agent, a policy's agents differ in spaces, or self-play
            settings that cannot work (saying what to set).
    """
    algo = config.algo
    if not is_multiagent(config.env.id):
        raise ValueError(
            f"env {config.env.id!r} is single-agent: multi-agent algorithms need "
            "--env pettingzoo:<module> or ma:<name>"
        )
    env = make_multiagent_env(config.env.id, seed=0)
    try:
        state_dim = env.state(env.reset()).size if algo.central_value else 0
        infos = env.infos
    finally:
        env.close()
    groups = policy_groups(algo.policy_mapping, list(infos))
    if algo.self_play and (len(groups) != 1 or len(infos) < 2):
        raise ValueError(
            "algo.self_play needs every agent on one policy (algo.policy_mapping=shared) "
            f"and at least two agents; got policies {sorted(groups)}"
        )
    specs = []
    for name, agents in groups.items():
        first = infos[agents[0]]
        different = [a for a in agents if infos[a] != first]
        if different:
            raise ValueError(
                f"policy {name!r} runs agents {agents} whose spaces differ ({agents[0]}: "
                f"{first.obs_shape}, {different[0]}: {infos[different[0]].obs_shape}); map them "
                "to different policies (algo.policy_mapping=per-agent or a function)"
            )
        own = first.obs_shape[0]
        info = dataclasses.replace(first, obs_shape=(own + state_dim,))
        columns = 1 if algo.self_play else len(agents)
        specs.append(PolicySpec(name, agents, info, columns, own if state_dim else 0))
    return specs


def policy_config(config: Config, spec: PolicySpec) -> Config:
    """The run config a policy's processes read: its env count is envs x its columns, no
    evaluator, and with central_value the centralized-value network."""
    sub = copy.deepcopy(config)
    sub.env.num_envs = config.env.num_envs * spec.columns_per_env
    sub.eval.every_s = 0.0
    sub.algo.actor_obs_dim = spec.actor_obs_dim
    if config.algo.central_value and not config.algo.model:
        sub.algo.model = CENTRAL_MODEL
    return sub


def policy_run(run: RunDir, name: str) -> RunDir:
    """The run folder of policy `name` inside multi-agent run `run`."""
    return RunDir(run.path / "policies" / name)


def write_policy_runs(run: RunDir, config: Config, specs: list[PolicySpec]) -> None:
    """Write (or, on resume, rewrite the configs of) every policy's run folder and
    `RUN/policies.json`; checkpoints and metrics already there are kept."""
    info = run.info()
    copy_ref = info.get("algo_copy")
    for spec in specs:
        sub = policy_run(run, spec.name)
        record = {
            "algo": info["algo"],
            "env_info": spec.env_info.to_dict(),
            "experiment": info.get("experiment"),
            "policy": spec.name,
            "agents": spec.agents,
        }
        if copy_ref:  # the parent run's copy of a file learner, as an absolute path
            record["algo_copy"] = str(run.path.resolve() / copy_ref)
        sub.create(policy_config(config, spec), record)
    write_json(run.path / "policies.json", [s.to_dict() for s in specs])


def read_policy_specs(run: RunDir) -> list[PolicySpec]:
    """The policies `write_policy_runs` recorded for `run`."""
    data = read_json(Path(run.path) / "policies.json")
    if not data:
        raise FileNotFoundError(f"{run.path}/policies.json is missing: not a multi-agent run")
    return [PolicySpec.from_dict(d) for d in data]
