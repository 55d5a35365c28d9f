"""The ES experiment: a master and an array of workers; parameter server + evaluator for progress.

    es-worker-i --(seeds and returns)--> es-master --pub--> param-server <-- evaluator
    everyone --push--> metrics

Workers of one process group share a machine and so one noise table in /dev/shm. Every process
runs `python -m surreal component ROLE RUN_DIR --index I` (roles in `ESLearner.components()`).
"""

from __future__ import annotations

from typing import Any

from surreal.api.recipe import Recipe
from surreal.runtime.plan.topology import (
    LaunchPlan,
    add_actor_groups,
    add_evaluator,
    learner_process,
    new_experiment,
    process,
)

COMPONENTS = {
    "es-master": "surreal.algos.es.processes:master_main",
    "es-worker": "surreal.algos.es.processes:worker_main",
}
"""role -> "module:function(run_dir, index)" of the ES processes (beside the runtime's)."""


def build_experiment(plan: LaunchPlan) -> Any:
    """A validated symphony Experiment for an ES launch plan."""
    exp = new_experiment(plan)
    # Named "learner": the master is what `surreal launch` watches to know the run ended.
    exp.add(learner_process(plan, "es-master").binds("es-master", "params-pub").connects("metrics"))
    exp.add(process(plan, "param-server").binds("params").connects("params-pub", "metrics"))
    add_evaluator(exp, plan)
    add_actor_groups(
        exp, plan, ("es-master", "metrics"), "es-worker", "es-worker", group_prefix="workers"
    )
    return exp.validate()


class ESRecipe(Recipe):
    """ES: a master and `run.actors` workers exchanging seeds and returns (no replay, no batch
    for `learn` from actors: the launch check stops after `load_params(params())`)."""

    name = "es"

    @classmethod
    def build_experiment(cls, plan: Any) -> Any:
        """One master, `run.actors` workers (grouped per machine), parameter server, evaluator."""
        return build_experiment(plan)

    @classmethod
    def components(cls) -> dict[str, str]:
        return {**super().components(), **COMPONENTS}

    @classmethod
    def example_batch(cls, run_config: Any, env_info: Any, policy: Any) -> None:
        """None: ES learns from generation records that need the shared noise table."""
        return None
