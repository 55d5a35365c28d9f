"""The DDPG experiment: actors -> K replay shards (proxied) -> learner -> K parameter servers (proxied).

    actor-i --push--> replay-proxy --> replay-k --(sample)--> replay-proxy <--req-- learner
    learner --pub--> param-server-k <--req-- param-proxy <--req-- actors, evaluator
    learner --pub "checkpoint"--> replay-k (each saves its part of the replay)
    everyone --push--> metrics

Every process runs `python -m surreal component ROLE RUN_DIR --index I`; the DDPG roles are in
`DDPGLearner.components()`; metrics and the evaluator are the runtime's own components.
"""

from __future__ import annotations

from typing import Any

from surreal.runtime.plan.topology import (
    LaunchPlan,
    add_actor_groups,
    add_evaluator,
    learner_process,
    new_experiment,
    process,
)

COMPONENTS = {
    "actor": "surreal.algos.ddpg.actor:main",
    "learner": "surreal.algos.ddpg.learner_loop:main",
    "replay-proxy": "surreal.runtime.processes.sharding:replay_proxy_main",
    "replay-shard": "surreal.runtime.processes.replay_shard:main",
    "param-proxy": "surreal.runtime.processes.sharding:param_proxy_main",
    "param-shard": "surreal.runtime.processes.sharding:param_shard_main",
}
"""role -> "module:function(run_dir, index)" of the DDPG processes (beside the runtime's)."""


def build_experiment(plan: LaunchPlan) -> Any:
    """A validated symphony Experiment for a DDPG launch plan."""
    cfg = plan.config
    exp = new_experiment(plan)
    exp.add(
        process(plan, "replay-proxy")
        .binds("replay", "replay-shards", "replay-sample", "replay-sample-shards")
        .connects("metrics")
    )
    for k in range(cfg.algo.replay_shards):
        exp.add(
            process(plan, "replay-shard", k, name=f"replay-{k}").connects(
                "replay-shards", "replay-sample-shards", "params-pub", "metrics"
            )
        )
    learner = learner_process(plan).binds("params-pub")  # `params`: asked after a restart
    exp.add(learner.connects("replay-sample", "metrics", "params"))
    exp.add(process(plan, "param-proxy").binds("params", "params-shards").connects("metrics"))
    for k in range(cfg.algo.param_shards):
        exp.add(
            process(plan, "param-shard", k, name=f"param-server-{k}").connects(
                "params-pub", "params-shards", "metrics"
            )
        )
    add_evaluator(exp, plan)
    add_actor_groups(exp, plan, ("params", "replay", "metrics"))
    return exp.validate()
