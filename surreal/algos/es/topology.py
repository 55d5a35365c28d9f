"""The ES experiment: a master and an array of workers; parameter server + evaluator for progress.

    es-worker-i --(seeds and returns)--> es-master --pub--> param-server <-- evaluator
    everyone --push--> metrics

Workers of one process group share a machine and so one noise table in /dev/shm.
"""

from __future__ import annotations

from typing import Any


def command(run_dir: Any, role: str, index: int = 0) -> list[str]:
    """The command line of one ES process."""
    from surreal.launch import module_command

    return module_command("surreal.algos.es.processes", run_dir, role, index)


def build_experiment(plan: Any) -> Any:
    """A validated symphony Experiment for an ES launch plan (`surreal.launch.LaunchPlan`)."""
    from surreal.launch import PROCESS_ENV, _command, add_evaluator, new_experiment, restart_policy
    from symphony import Process, ProcessGroup

    cfg = plan.config
    env, again = PROCESS_ENV, restart_policy()
    exp = new_experiment(plan)
    # Named "learner": the master is what `surreal launch` watches to know the run ended.
    exp.add(
        Process("learner", command(plan.run_dir, "master"), env=dict(env))
        .binds("es-master", "params-pub")
        .connects("metrics")
    )
    exp.add(
        Process(
            "param-server", _command(plan.run_dir, "param-server"), env=dict(env), restart=again
        )
        .binds("params")
        .connects("params-pub", "metrics")
    )
    add_evaluator(exp, plan)
    size = cfg.actor.group_size
    for g, start in enumerate(range(0, cfg.run.actors, size)):
        group = ProcessGroup(f"workers-{g}")
        for i in range(start, min(start + size, cfg.run.actors)):
            group.add(
                Process(
                    f"es-worker-{i}",
                    command(plan.run_dir, "worker", i),
                    env=dict(env),
                    restart=again,
                ).connects("es-master", "metrics")
            )
        exp.add(group)
    return exp.validate()
