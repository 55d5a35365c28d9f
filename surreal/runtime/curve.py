"""Authenticated, encrypted traffic between a run's processes (CurveZMQ, keys per experiment).

`run.curve` decides: unset (the default) means on for the multi-node backends (slurm, compose,
kube) and off for local and tmux, where every port listens on 127.0.0.1; `--set run.curve=true`
or `false` forces it. When on, `surreal launch` writes a fresh server and client key pair into
`RUN/keys/` (folder mode 700, files mode 600; `--resume` reuses them) and sets
`CARAML_CURVE_KEYS` on every process, so every caraml socket of the run is a Curve server (binds)
or client (connects) with those keys (see `caraml.curve_env`). On kube the folder becomes the
Kubernetes Secret `surreal-curve` in the experiment's namespace, mounted read-only into every
pod; the experiment YAML only names the Secret and its mount path, never a key. On compose the
keys travel in a private env file (`surreal.runtime.compose_env`) and each process writes them into its
own container.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import caraml
from symphony.kube_manifests import SECRETS_ROOT

MULTI_NODE = ("slurm", "compose", "kube")
"""Backends whose processes talk over the network: Curve is on there unless `run.curve=false`."""

SECRET = "surreal-curve"
"""The Kubernetes Secret holding the keys on kube."""

ENV = "CARAML_CURVE_KEYS"

CONTAINER_KEYS = "/tmp/surreal-curve-keys"
"""`CARAML_CURVE_KEYS` inside a compose container: where each process writes the keys it gets
through the run's env file (`surreal.runtime.compose_env.materialize_keys`)."""


def enabled(plan: Any) -> bool:
    """Whether the run's traffic uses Curve: `run.curve`, or (unset) whether the backend is
    multi-node."""
    if plan.config.run.curve is not None:
        return bool(plan.config.run.curve)
    return plan.backend in MULTI_NODE


def key_folder(plan: Any) -> Path:
    """Where `surreal launch` writes the keys: `RUN/keys/`."""
    return plan.run_dir.path.resolve() / "keys"


def process_folder(plan: Any) -> str:
    """Where the run's processes read the keys (the Secret's mount path on kube)."""
    if plan.backend == "kube":
        return f"{SECRETS_ROOT}/{SECRET}"
    if plan.backend == "compose":  # written there by each process (surreal.runtime.compose_env)
        return CONTAINER_KEYS
    return str(key_folder(plan))


def prepare(plan: Any) -> None:
    """Write the run's key pair into `RUN/keys/` when Curve is on and none is there yet."""
    if enabled(plan) and not (key_folder(plan) / "server.key_secret").exists():
        caraml.write_keys(key_folder(plan))


def apply(experiment: Any, plan: Any) -> Any:
    """Set `CARAML_CURVE_KEYS` (and on kube the Secret) on every process when Curve is on."""
    if enabled(plan):
        folder = process_folder(plan)
        for proc in experiment.processes():
            proc.env[ENV] = folder
            if plan.backend == "kube" and SECRET not in proc.secrets:
                proc.secrets.append(SECRET)
    return experiment


def launch_options(plan: Any) -> dict[str, Any]:
    """Backend options `symphony.launch` needs for the keys: on kube, create the Secret from
    `RUN/keys/`."""
    if enabled(plan) and plan.backend == "kube":
        return {"secret_files": {SECRET: str(key_folder(plan))}}
    return {}
