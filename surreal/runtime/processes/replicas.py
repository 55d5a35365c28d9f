"""The learner process's side of `run.learner_replicas`: join the replicas' group through the
symphony service `learner-rdzv` (bound by rank 0, the process named `learner`)."""

from __future__ import annotations

from surreal.api.core import Learner
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.distributed import Replicas


def join(comp: Component, learner: Learner) -> Replicas | None:
    """With `run.learner_replicas` > 1: this process (rank = `--index`) joins the group, and
    `learner.replicas` is set; None (and nothing done) for a single learner."""
    world = comp.config.run.learner_replicas
    if world <= 1:
        return None
    address = comp.address("learner-rdzv")
    replicas = Replicas.start(
        comp.index,
        world,
        address.host,
        address.port,
        device=learner.device,
        bind_host=address.bind_host,
    )
    learner.replicas = replicas
    return replicas
