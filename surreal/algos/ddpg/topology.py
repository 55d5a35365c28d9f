"""The DDPG experiment: actors -> K replay shards (proxied) -> learner -> K parameter servers (proxied).

    actor-i --push--> replay-proxy --> replay-k --(sample)--> replay-proxy <--req-- learner
    learner --pub--> param-server-k <--req-- param-proxy <--req-- actors, evaluator
    everyone --push--> metrics

Processes run `python -m surreal.algos.ddpg.processes ROLE RUN_DIR --index I`; metrics and the
evaluator are the runtime's own components.
"""

from __future__ import annotations

from typing import Any

ROLES = ("actor", "learner", "replay-proxy", "replay-shard", "param-proxy", "param-shard")


def command(run_dir: Any, role: str, index: int = 0) -> list[str]:
    """The command line of one DDPG process."""
    from surreal.launch import module_command

    return module_command("surreal.algos.ddpg.processes", run_dir, role, index)


def build_experiment(plan: Any) -> Any:
    """A validated symphony Experiment for a DDPG launch plan (`surreal.launch.LaunchPlan`)."""
    from surreal.launch import (
        PROCESS_ENV,
        add_evaluator,
        learner_process,
        new_experiment,
        restart_policy,
    )
    from symphony import Process, ProcessGroup

    cfg = plan.config
    again = restart_policy()

    def proc(role: str, index: int = 0, name: str | None = None, **kw: Any) -> Process:
        return Process(
            name or role, command(plan.run_dir, role, index), env=dict(PROCESS_ENV), **kw
        )

    exp = new_experiment(plan)
    exp.add(
        proc("replay-proxy", restart=again)
        .binds("replay", "replay-shards", "replay-sample", "replay-sample-shards")
        .connects("metrics")
    )
    for k in range(cfg.algo.replay_shards):
        exp.add(
            proc("replay-shard", k, name=f"replay-{k}", restart=again).connects(
                "replay-shards", "replay-sample-shards", "metrics"
            )
        )
    exp.add(
        learner_process(plan, command(plan.run_dir, "learner"))
        .binds("params-pub")
        .connects("replay-sample", "metrics")
    )
    exp.add(proc("param-proxy", restart=again).binds("params", "params-shards").connects("metrics"))
    for k in range(cfg.algo.param_shards):
        exp.add(
            proc("param-shard", k, name=f"param-server-{k}", restart=again).connects(
                "params-pub", "params-shards", "metrics"
            )
        )
    add_evaluator(exp, plan)
    size = cfg.actor.group_size
    for g, start in enumerate(range(0, cfg.run.actors, size)):
        group = ProcessGroup(f"actors-{g}")
        for i in range(start, min(start + size, cfg.run.actors)):
            group.add(
                proc("actor", i, name=f"actor-{i}", restart=again).connects(
                    "params", "replay", "metrics"
                )
            )
        exp.add(group)
    return exp.validate()
