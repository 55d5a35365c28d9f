"""The ES experiment: a master and an array of workers; parameter server + evaluator for progress.

    es-worker-i --(seeds and returns)--> es-master --pub--> param-server <-- evaluator
    everyone --push--> metrics

Workers of one process group share a machine and so one noise table in /dev/shm.
"""

from __future__ import annotations

import sys
from typing import Any


def command(run_dir: Any, role: str, index: int = 0) -> list[str]:
    """The command line of one ES process."""
    return [sys.executable, "-m", "surreal.algos.es.processes", role,
            str(run_dir.path.resolve()), "--index", str(index)]


def build_experiment(plan: Any) -> Any:
    """A validated symphony Experiment for an ES launch plan (`surreal.launch.LaunchPlan`)."""
    from surreal.launch import _command as runtime_command
    from symphony import Experiment, Process, ProcessGroup, RestartPolicy

    cfg = plan.config
    env = {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    again = RestartPolicy(mode="on-failure", max_restarts=20, backoff_s=0.5, max_backoff_s=5.0)
    exp = Experiment(plan.experiment_name, metadata={"algo": plan.algo_ref, "env": cfg.env.id,
                                                     "run_dir": str(plan.run_dir.path.resolve())})
    exp.add(Process("metrics", runtime_command(plan.run_dir, "metrics"), env=dict(env),
                    restart=again).binds("metrics"))
    # Named "learner": the master is what `surreal launch` watches to know the run ended.
    exp.add(Process("learner", command(plan.run_dir, "master"), env=dict(env))
            .binds("es-master", "params-pub").connects("metrics"))
    exp.add(Process("param-server", runtime_command(plan.run_dir, "param-server"), env=dict(env),
                    restart=again).binds("params").connects("params-pub", "metrics"))
    if cfg.eval.every_s > 0:
        exp.add(Process("evaluator", runtime_command(plan.run_dir, "evaluator"), env=dict(env),
                        restart=again).connects("params", "metrics"))
    size = cfg.actor.group_size
    for g, start in enumerate(range(0, cfg.run.actors, size)):
        group = ProcessGroup(f"workers-{g}")
        for i in range(start, min(start + size, cfg.run.actors)):
            group.add(Process(f"es-worker-{i}", command(plan.run_dir, "worker", i), env=dict(env),
                              restart=again).connects("es-master", "metrics"))
        exp.add(group)
    return exp.validate()
