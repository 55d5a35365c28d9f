"""The DDPG experiment: actors -> K replay shards (proxied) -> learner -> K parameter servers (proxied).

    actor-i --push--> replay-proxy --> replay-k --(sample)--> replay-proxy <--req-- learner
    learner --pub--> param-server-k <--req-- param-proxy <--req-- actors, evaluator
    everyone --push--> metrics

Processes run `python -m surreal.algos.ddpg.processes ROLE RUN_DIR --index I`; metrics and the
evaluator are the runtime's own components.
"""

from __future__ import annotations

import sys
from typing import Any

ROLES = ("actor", "learner", "replay-proxy", "replay-shard", "param-proxy", "param-shard")


def command(run_dir: Any, role: str, index: int = 0) -> list[str]:
    """The command line of one DDPG process."""
    return [sys.executable, "-m", "surreal.algos.ddpg.processes", role,
            str(run_dir.path.resolve()), "--index", str(index)]


def build_experiment(plan: Any) -> Any:
    """A validated symphony Experiment for a DDPG launch plan (`surreal.launch.LaunchPlan`)."""
    from surreal.launch import _command as runtime_command
    from symphony import Experiment, Process, ProcessGroup, Resources, RestartPolicy

    cfg = plan.config
    env = {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    again = RestartPolicy(mode="on-failure", max_restarts=20, backoff_s=0.5, max_backoff_s=5.0)

    def proc(role: str, index: int = 0, name: str | None = None, **kw: Any) -> Process:
        return Process(name or role, command(plan.run_dir, role, index), env=dict(env), **kw)

    exp = Experiment(plan.experiment_name, metadata={"algo": plan.algo_ref, "env": cfg.env.id,
                                                     "run_dir": str(plan.run_dir.path.resolve())})
    exp.add(Process("metrics", runtime_command(plan.run_dir, "metrics"), env=dict(env),
                    restart=again).binds("metrics"))
    exp.add(proc("replay-proxy", restart=again)
            .binds("replay", "replay-shards", "replay-sample", "replay-sample-shards").connects("metrics"))
    for k in range(cfg.algo.replay_shards):
        exp.add(proc("replay-shard", k, name=f"replay-{k}", restart=again)
                .connects("replay-shards", "replay-sample-shards", "metrics"))
    learner_env = dict(env, OMP_NUM_THREADS=str(cfg.run.torch_threads))
    exp.add(Process("learner", command(plan.run_dir, "learner"), env=learner_env,
                    resources=Resources(cpu=max(1, cfg.run.torch_threads)))
            .binds("params-pub").connects("replay-sample", "metrics"))
    exp.add(proc("param-proxy", restart=again).binds("params", "params-shards").connects("metrics"))
    for k in range(cfg.algo.param_shards):
        exp.add(proc("param-shard", k, name=f"param-server-{k}", restart=again)
                .connects("params-pub", "params-shards", "metrics"))
    if cfg.eval.every_s > 0:
        exp.add(Process("evaluator", runtime_command(plan.run_dir, "evaluator"), env=dict(env),
                        restart=again).connects("params", "metrics"))
    size = cfg.actor.group_size
    for g, start in enumerate(range(0, cfg.run.actors, size)):
        group = ProcessGroup(f"actors-{g}")
        for i in range(start, min(start + size, cfg.run.actors)):
            group.add(proc("actor", i, name=f"actor-{i}", restart=again)
                      .connects("params", "replay", "metrics"))
        exp.add(group)
    return exp.validate()
