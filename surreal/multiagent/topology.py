"""The multi-agent experiment: one stream of processes per policy, actors stepping joint envs.

    actor-i --experience-P--> buffer-P <--batches-P-- learner-P --params-pub-P--> param-server-P
    actor-i <--params-P-- param-server-P          (for every policy P)
    buffer-P, learner-P, param-server-P, actor-i --metrics-P--> metrics-P  (RUN/policies/P/)
    learner (the league: ends the run when every policy's learner is done), actors --> metrics

Policy P's processes run the runtime's own components on `RUN/policies/P/` (see
`surreal.multiagent.services`), so checkpoints, resume and metrics work per policy.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from surreal.api.recipe import Recipe
from surreal.multiagent.policy_runs import policy_run, policy_specs, write_policy_runs
from surreal.runtime.plan.topology import (
    PROCESS_ENV,
    LaunchPlan,
    add_actor_groups,
    command,
    learner_process,
    new_experiment,
    process,
)
from symphony import Process

POLICY_ROLES = {
    "policy-buffer": "surreal.multiagent.services:buffer",
    "policy-learner": "surreal.multiagent.services:learner",
    "policy-param-server": "surreal.multiagent.services:param_server",
    "policy-metrics": "surreal.multiagent.services:metrics",
}
COMPONENTS = {
    **POLICY_ROLES,
    "actor": "surreal.multiagent.actor:main",
    "learner": "surreal.multiagent.league:main",
}
"""Roles a multi-agent run adds to (or replaces in) the runtime's."""


def build_experiment(plan: LaunchPlan) -> Any:
    """A validated symphony Experiment for a multi-agent launch plan; writes the policies' run
    folders when the run folder exists (not for --dry-run)."""
    specs = policy_specs(plan.config)
    if plan.run_dir.exists():
        write_policy_runs(plan.run_dir, plan.config, specs)
    exp = new_experiment(plan)
    actor_services = ["metrics"]
    for spec in specs:
        name = spec.name
        sub = dataclasses.replace(plan, run_dir=policy_run(plan.run_dir, name))

        def svc(base: str, name: str = name) -> str:
            return f"{base}-{name}"

        exp.add(process(sub, "policy-metrics", name=svc("metrics")).binds(svc("metrics")))
        exp.add(
            process(sub, "policy-buffer", name=svc("buffer"))
            .binds(svc("experience"), svc("batches"))
            .connects(svc("metrics"))
        )
        exp.add(
            learner_process(sub, "policy-learner", name=svc("learner"))
            .binds(svc("params-pub"))
            .connects(svc("batches"), svc("metrics"))
        )
        exp.add(
            process(sub, "policy-param-server", name=svc("param-server"))
            .binds(svc("params"))
            .connects(svc("params-pub"), svc("metrics"))
        )
        actor_services += [svc("params"), svc("experience"), svc("metrics")]
    # the league is named `learner` and not restarted: its end is the run's end
    exp.add(
        Process("learner", command(plan.run_dir, "learner"), env=dict(PROCESS_ENV)).connects(
            "metrics"
        )
    )
    add_actor_groups(exp, plan, actor_services)
    return exp.validate()


class MAPPORecipe(Recipe):
    """mappo: one buffer, learner, parameter server and metrics sink per policy, joint-env
    actors and the league (`build_experiment`)."""

    name = "mappo"

    @classmethod
    def check_run(cls, run_config: Any) -> None:
        """`surreal launch` asks before anything starts: the env is multi-agent and its agents
        fit the policy mapping (`policy_specs`; ValueError saying what to set)."""
        policy_specs(run_config)

    @classmethod
    def build_experiment(cls, plan: Any) -> Any:
        """Checks the env and the mapping first (`build_experiment` above)."""
        return build_experiment(plan)

    @classmethod
    def components(cls) -> dict[str, str]:
        """The runtime's roles, with the multi-agent actor and league and the policy roles."""
        return {**super().components(), **COMPONENTS}
