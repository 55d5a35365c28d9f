"""Which actors ask policy workers, and the checks `surreal launch` runs for them.

With `actor.inference=remote`, `surreal.runtime.plan.topology.add_actor_groups` adds `run.policy_workers`
processes `policy-worker-K` (binding `policy-K`, `surreal.runtime.plan.topology.add_policy_workers`) and
connects actor i to `policy-{i % K}` (`policy_services`), for actors that ask them
(`SUPPORTED_ACTORS`: they build their policy with
`surreal.runtime.wire.remote_policy.actor_inference`). Knows no algorithm, no component module
(it names them as strings) and not the topology, which builds on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from surreal.api.config import ConfigError
from surreal.api.recipe import recipe_of

INFERENCE = ("local", "remote")
SUPPORTED_ACTORS = frozenset(
    {"surreal.runtime.processes.actor:main", "surreal.algos.ddpg.actor:main"}
)
"""Actor components that build their policy with `actor_inference` (remote inference works)."""


def check_inference(config: Any, algo_class: type) -> None:
    """Raise ConfigError for settings remote inference cannot run with (before anything starts)."""
    mode, workers = config.actor.inference, config.run.policy_workers
    if mode not in INFERENCE:
        raise ConfigError(f"actor.inference must be local or remote, got {mode!r}")
    if workers < 1:
        raise ConfigError(f"run.policy_workers must be >= 1, got {workers}")
    if config.actor.inference_wait_ms < 0:
        raise ConfigError("actor.inference_wait_ms must be >= 0")


def check_remote_actors(plan: Any, build_experiment: Callable[[Any], Any]) -> None:
    """With `actor.inference=remote`, raise ConfigError unless the plan's experiment
    (`build_experiment(plan)`: `surreal.runtime.plan.topology.algorithm_experiment`) has policy workers, i.e.
    its actors are ones that ask them (`SUPPORTED_ACTORS`): ES workers and the multi-agent actor
    run their own policies."""
    if plan.config.actor.inference != "remote":
        return
    exp = build_experiment(plan)
    if not any(p.name.startswith("policy-worker-") for p in exp.processes()):
        raise ConfigError(
            f"actor.inference=remote: {plan.algo_class.__name__}'s actors run their own policy; "
            "remote inference works with the runtime's actor (ppo, your Learner) and DDPG/TD3"
        )


def policy_services(plan: Any, index: int, role: str = "actor") -> tuple[str, ...]:
    """The policy worker service actor `index` (running ROLE) connects to (none with local
    inference, or when ROLE's actors run their own policy)."""
    cfg = plan.config
    if cfg.actor.inference != "remote" or not serves(plan, role):
        return ()
    return (f"policy-{index % cfg.run.policy_workers}",)


def serves(plan: Any, role: str) -> bool:
    """Whether actors running component ROLE ask policy workers under remote inference."""
    return recipe_of(plan.algo_class).components().get(role) in SUPPORTED_ACTORS
