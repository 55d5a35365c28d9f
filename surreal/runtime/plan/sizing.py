"""What each process of a run asks a cluster for: CPU cores and memory (and the learner's GPU).

On compose and kube (`surreal.runtime.plan.portable`) every process declares a memory request (a limit too:
symphony's kube manifests set the memory limit to the request, compose sets `mem_limit`); CPU
stays what the topology declares (1 core per process, `run.torch_threads` or
`surreal.api.device.learner_threads` for the learner) and the learner asks for a GPU when
`run.device` is cuda. A process whose topology already set `memory_gb` keeps it.

Memory per role, in GiB (a process that imports torch and gymnasium holds about 0.25 GiB before
it does anything; these leave room for the environments, batches and the networks):

    actor, evaluator   1.0 (2.0 for robosuite environments, which load MuJoCo models and
                       renderers)
    buffer             2.0, plus the replay storage of an off-policy algorithm
                       (`LearnerConfig.replay_items()` transitions of float32 observations
                       and actions; DDPG/TD3/SAC: `replay_capacity`)
    learner            4.0 (each replica)
    param-server       1.0
    metrics            0.5
    any other role     1.0 (an algorithm's own processes, e.g. ES's)

A pod holds a whole ProcessGroup, so an actor group asks for `actor.group_size` times an
actor's request; symphony refuses a group that does not fit one node of its pool.
"""

from __future__ import annotations

import math
from typing import Any

from surreal.api.core import LearnerConfig

MEMORY_GB = {
    "actor": 1.0,
    "evaluator": 1.0,
    "buffer": 2.0,
    "learner": 4.0,
    "param-server": 1.0,
    "metrics": 0.5,
}
"""Memory request of each runtime role, in GiB (`DEFAULT_GB` for the others)."""

DEFAULT_GB = 1.0
ROBOSUITE_GB = 2.0
"""An actor or evaluator of a robosuite environment."""


def role_of(argv: list[str]) -> str | None:
    """ROLE of a `... -m surreal component ROLE RUN_DIR ...` command (None for other commands)."""
    if "component" in argv:
        i = argv.index("component")
        return argv[i + 1] if i + 1 < len(argv) else None
    return None


def replay_gb(plan: Any) -> float:
    """Memory of an off-policy buffer's storage: `algo.replay_items()` transitions
    (`LearnerConfig.replay_items`; DDPG/TD3/SAC: `replay_capacity`) of (obs, next obs, action,
    reward, done) in float32; 0 for algorithms without one."""
    algo = plan.config.algo
    capacity = (algo.replay_items() if isinstance(algo, LearnerConfig) else 0) or 0
    obs = math.prod(plan.env_info.obs_shape) if plan.env_info.obs_shape else 1
    per_transition = 4 * (2 * obs + max(plan.env_info.action_dim, 1) + 2)
    return capacity * per_transition / 2**30


def memory_gb(role: str, plan: Any) -> float:
    """The memory request of one process running ROLE, in GiB (rounded up to 0.25)."""
    gb = MEMORY_GB.get(role, DEFAULT_GB)
    if role in ("actor", "evaluator") and plan.config.env.id.startswith("robosuite:"):
        gb = ROBOSUITE_GB
    if role == "buffer":
        gb += 1.2 * replay_gb(plan)
    return math.ceil(gb * 4) / 4


def apply_requests(experiment: Any, plan: Any) -> None:
    """Give every process of `experiment` without a memory request its role's (`memory_gb`)."""
    for proc in experiment.processes():
        if proc.resources.memory_gb is None:
            role = role_of(proc.argv()) or proc.name
            proc.resources.memory_gb = memory_gb(role, plan)
