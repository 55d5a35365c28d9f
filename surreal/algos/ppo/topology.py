"""The PPO experiment: the standard topology, with nothing of its own.

    actor-i --push--> buffer (FIFO) <--req-- learner --pub--> param-server <--req-- actors, evaluator
    everyone --push--> metrics

PPO's batch size (`algo.batch_size`, in env steps) reaches the actors, the buffer and the learner through
`PPOLearner.segments_per_batch`.
"""

from __future__ import annotations

from typing import Any

from surreal.runtime.plan.topology import LaunchPlan, standard_experiment


def build_experiment(plan: LaunchPlan) -> Any:
    """A validated symphony Experiment for a PPO launch plan."""
    return standard_experiment(plan)
