"""A policy's buffer, learner, parameter server and metrics sink: the runtime's own components,
run on the policy's folder `RUN/policies/<P>/` with its services (`batches-P`, ...) seen under
the runtime's names (`batches`, ...)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

from symphony.addresses import env_prefix


def alias_services(policy: str, environ: dict[str, str] | None = None) -> list[str]:
    """Make every declared service `<base>-<policy>` reachable as `<base>` (the SYMPH_*
    variables of `symphony.address`); returns the base names."""
    env = os.environ if environ is None else environ
    declared = [s for s in env.get("SYMPH_SERVICES", "").split(",") if s]
    suffix = f"-{policy}"
    bases = [s[: -len(suffix)] for s in declared if s.endswith(suffix)]
    for base in bases:
        source, target = env_prefix(base + suffix), env_prefix(base)
        for part in ("HOST", "PORT", "ADDR"):
            if f"{source}_{part}" in env:
                env[f"{target}_{part}"] = env[f"{source}_{part}"]
    env["SYMPH_SERVICES"] = ",".join(declared + [b for b in bases if b not in declared])
    return bases


def _run(module: str, run_dir: str, index: int) -> None:
    alias_services(Path(run_dir).name)
    importlib.import_module(module).main(run_dir, index)


def buffer(run_dir: str, index: int = 0) -> None:
    """The policy's FIFO buffer (`surreal.runtime.processes.replay`)."""
    _run("surreal.runtime.processes.replay", run_dir, index)


def learner(run_dir: str, index: int = 0) -> None:
    """The policy's learner loop (`surreal.runtime.processes.learner`): checkpoints in its folder."""
    _run("surreal.runtime.processes.learner", run_dir, index)


def param_server(run_dir: str, index: int = 0) -> None:
    """The policy's parameter server (`surreal.runtime.processes.param_server`)."""
    _run("surreal.runtime.processes.param_server", run_dir, index)


def metrics(run_dir: str, index: int = 0) -> None:
    """The policy's metrics sink (`surreal.runtime.processes.metrics`): metrics.jsonl, status.json
    and TensorBoard events in its folder."""
    _run("surreal.runtime.processes.metrics", run_dir, index)
