"""What a local run's actors, learner and evaluator import once, in a fork server, before they start.

On the local backend (symphony's `Capabilities.fork_preload`) a process that declares `preload` (symphony's `Process.preload`) starts as
a fork of one process that imported those modules (`symphony.local.forking`): torch, gymnasium and the
component modules are imported once for every actor, the learner and the evaluator, and their
pages are shared. The buffer, the parameter server and the metrics sink start without torch, as
before. The fork server imports with what these processes share in their environment, so each
of them also gets `PRELOAD_ENV`, which keeps numpy's BLAS from starting threads at import (a
process with threads cannot fork safely); each component sets its torch threads when it starts.
"""

from __future__ import annotations

from typing import Any

from surreal.api.recipe import recipe_of
from surreal.runtime.plan.sizing import role_of
from symphony.backends import capabilities

PRELOADED_MODULES = (
    "surreal.runtime.processes.actor",
    "surreal.runtime.processes.learner",
    "surreal.runtime.processes.evaluator",
)
"""The component modules whose processes fork from the fork server (they all import torch)."""
PRELOAD = ("torch", "gymnasium", "surreal.cli", "surreal.envs", *PRELOADED_MODULES)
PRELOAD_ENV = {"OPENBLAS_NUM_THREADS": "1"}


def apply(exp: Any, plan: Any) -> Any:
    """Declare the preload on `exp`'s actors, learner(s) and evaluator(s) where the backend
    forks them from a fork server (local; other backends start each process in its own
    container, job or window: nothing changes)."""
    if not capabilities(plan.backend).fork_preload:
        return exp
    components = recipe_of(plan.algo_class).components()
    algo_module = plan.algo_class.__module__
    preload = [*PRELOAD, *([algo_module] if algo_module.startswith("surreal.") else [])]
    for proc in exp.processes():
        role = role_of(proc.argv())
        if components.get(role, "").split(":")[0] in PRELOADED_MODULES:
            proc.preload = list(preload)
            proc.env.update(PRELOAD_ENV)
    return exp
