"""Where surreal's former top-level modules went (issue 32's rooms, docs/architecture.md):
importing one of their old addresses fails with one line that names the new one, instead of a
bare "No module named". (`surreal.core` still works: it re-exports the interfaces.)"""

from __future__ import annotations

import importlib.abc
import sys
from typing import Any

MOVED = {
    "surreal.asking": "surreal.runtime.wire.asking",
    "surreal.checkpoint": "surreal.runtime.runfolder.checkpoint",
    "surreal.cluster_launch": "surreal.launch.cluster_launch",
    "surreal.compiling": "surreal.api.compiling",
    "surreal.compose_env": "surreal.runtime.plan.compose_env",
    "surreal.config": "surreal.api.config",
    "surreal.config_check": "surreal.launch.config_check",
    "surreal.cost": "surreal.launch.cost",
    "surreal.curve": "surreal.runtime.wire.curve",
    "surreal.device": "surreal.api.device",
    "surreal.distributed": "surreal.runtime.processes.distributed",
    "surreal.evaluate": "surreal.launch.evaluate",
    "surreal.guard": "surreal.runtime.wire.guard",
    "surreal.modules": "surreal.api.modules",
    "surreal.multiagent.agent_view": "surreal.envs.agent_view",
    "surreal.multiagent.envs": "surreal.envs.multiagent",
    "surreal.multiagent.games": "surreal.envs.games",
    "surreal.normalizer": "surreal.api.normalizer",
    "surreal.parameter_client": "surreal.runtime.wire.parameter_client",
    "surreal.pbt.member": "surreal.runtime.processes.member",
    "surreal.policy_topology": "surreal.runtime.plan.policy_topology",
    "surreal.portable": "surreal.runtime.plan.portable",
    "surreal.preflight": "surreal.launch.preflight",
    "surreal.preload": "surreal.runtime.plan.preload",
    "surreal.progress": "surreal.launch.progress",
    "surreal.progress_demo": "surreal.launch.progress_demo",
    "surreal.progress_view": "surreal.launch.progress_view",
    "surreal.registry": "surreal.api.registry",
    "surreal.replay": "surreal.api.replay",
    "surreal.rundir": "surreal.runtime.runfolder.rundir",
    "surreal.schemas": "surreal.runtime.wire.schemas",
    "surreal.sizing": "surreal.runtime.plan.sizing",
    "surreal.spaces": "surreal.api.spaces",
    "surreal.stopping": "surreal.launch.stopping",
    "surreal.storage": "surreal.runtime.runfolder.storage",
    "surreal.storage_sync": "surreal.runtime.runfolder.storage_sync",
    "surreal.synthetic": "surreal.api.synthetic",
    "surreal.topology": "surreal.runtime.plan.topology",
    "surreal.user_code": "surreal.api.user_code",
    "surreal.runtime.actor": "surreal.runtime.processes.actor",
    "surreal.runtime.asking": "surreal.runtime.wire.asking",
    "surreal.runtime.batch_protocol": "surreal.runtime.wire.batch_protocol",
    "surreal.runtime.checkpoint": "surreal.runtime.runfolder.checkpoint",
    "surreal.runtime.common": "surreal.runtime.processes.common",
    "surreal.runtime.component": "surreal.runtime.processes.component",
    "surreal.runtime.compose_env": "surreal.runtime.plan.compose_env",
    "surreal.runtime.curve": "surreal.runtime.wire.curve",
    "surreal.runtime.distributed": "surreal.runtime.processes.distributed",
    "surreal.runtime.evaluator": "surreal.runtime.processes.evaluator",
    "surreal.runtime.guard": "surreal.runtime.wire.guard",
    "surreal.runtime.learner": "surreal.runtime.processes.learner",
    "surreal.runtime.member": "surreal.runtime.processes.member",
    "surreal.runtime.metrics": "surreal.runtime.processes.metrics",
    "surreal.runtime.pacing": "surreal.runtime.processes.pacing",
    "surreal.runtime.param_server": "surreal.runtime.processes.param_server",
    "surreal.runtime.parameter_client": "surreal.runtime.wire.parameter_client",
    "surreal.runtime.policy_protocol": "surreal.runtime.wire.policy_protocol",
    "surreal.runtime.policy_topology": "surreal.runtime.plan.policy_topology",
    "surreal.runtime.policy_worker": "surreal.runtime.processes.policy_worker",
    "surreal.runtime.portable": "surreal.runtime.plan.portable",
    "surreal.runtime.ports": "surreal.runtime.wire.ports",
    "surreal.runtime.preload": "surreal.runtime.plan.preload",
    "surreal.runtime.remote_policy": "surreal.runtime.wire.remote_policy",
    "surreal.runtime.replay": "surreal.runtime.processes.replay",
    "surreal.runtime.replay_save": "surreal.runtime.processes.replay_save",
    "surreal.runtime.replay_shard": "surreal.runtime.processes.replay_shard",
    "surreal.runtime.replay_uniform": "surreal.runtime.processes.replay_uniform",
    "surreal.runtime.replicas": "surreal.runtime.processes.replicas",
    "surreal.runtime.report_token": "surreal.runtime.wire.report_token",
    "surreal.runtime.rundir": "surreal.runtime.runfolder.rundir",
    "surreal.runtime.schemas": "surreal.runtime.wire.schemas",
    "surreal.runtime.sharding": "surreal.runtime.processes.sharding",
    "surreal.runtime.sizing": "surreal.runtime.plan.sizing",
    "surreal.runtime.split_actor": "surreal.runtime.processes.split_actor",
    "surreal.runtime.storage": "surreal.runtime.runfolder.storage",
    "surreal.runtime.storage_sync": "surreal.runtime.runfolder.storage_sync",
    "surreal.runtime.topology": "surreal.runtime.plan.topology",
    "surreal.runtime.waits": "surreal.runtime.wire.waits",
}
"""Former module -> where it is now."""
MOVED_PACKAGES = {"surreal.components": "surreal.runtime"}


def new_address(name: str) -> str | None:
    """Where the former module `name` lives now, or None if it did not move."""
    if name in MOVED:
        return MOVED[name]
    for old, new in MOVED_PACKAGES.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old) :]
    return None


class _MovedFinder(importlib.abc.MetaPathFinder):
    """Last on `sys.meta_path`: asked only when no module of that name exists."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        new = new_address(name)
        if new is not None:
            raise ModuleNotFoundError(
                f"{name} moved to {new} in surreal's rooms (docs/architecture.md)", name=name
            )
        package, _, attribute = name.rpartition(".")
        if package == "surreal.launch":  # `from surreal.launch import plan`: surreal/launch.py's
            raise ModuleNotFoundError(  # name=None, so that `from ... import` shows this line
                f"surreal.launch has no {attribute!r}: surreal/launch.py is now "
                f"surreal/launch/experiment.py (from surreal.launch.experiment import {attribute})"
            )


def install() -> None:
    """Put the finder on `sys.meta_path` once."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
