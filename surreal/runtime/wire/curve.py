"""Authenticated, encrypted traffic between a run's processes (CurveZMQ, keys per experiment).

`run.curve` decides: unset (the default) means on where the backend's processes do not all run
on this machine (slurm, compose, kube) and off where they do and every port listens on 127.0.0.1
(local, tmux: symphony's `Capabilities.single_machine`); `--set run.curve=true` or `false`
forces it. When on, `surreal launch` writes a fresh server and client key pair into
`RUN/keys/` (folder mode 700, files mode 600; `--resume` reuses them) and sets
`CARAML_CURVE_KEYS` on every process, so every caraml socket of the run is a Curve server (binds)
or client (connects) with those keys (see `caraml.curve_env`). On How the keys reach the processes is the backend's (`delivery`, from its capabilities): on a
shared disk they read `RUN/keys/`; where the backend mounts secrets (kube) the folder becomes
the Secret `surreal-curve`, mounted read-only into every process (the experiment YAML only
names the Secret and its mount path, never a key); where it hands private env files to its
processes (compose) the keys travel in one (`surreal.runtime.plan.compose_env`) and each process
writes them into its own container.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import caraml
from surreal.api.config import ConfigError
from symphony.backends import capabilities

SECRET = "surreal-curve"
"""The secret holding the keys where the backend mounts secrets (a Kubernetes Secret on kube)."""

ENV = "CARAML_CURVE_KEYS"

CONTAINER_KEYS = "/tmp/surreal-curve-keys"
"""`CARAML_CURVE_KEYS` inside a compose container: where each process writes the keys it gets
through the run's env file (`surreal.runtime.plan.compose_env.materialize_keys`)."""


def enabled(plan: Any) -> bool:
    """Whether the run's traffic uses Curve: `run.curve`, or (unset) whether the backend's
    processes can run on other machines than this one."""
    if plan.config.run.curve is not None:
        return bool(plan.config.run.curve)
    return not capabilities(plan.backend).single_machine


def delivery(plan: Any) -> str:
    """How the keys reach the run's processes: `mount` (the backend mounts the secret `SECRET`),
    `files` (they read `RUN/keys/` on a disk they share with this machine) or `env_file` (a
    private env file; each process writes them into its container).

    Raises:
        ConfigError: the backend offers none of the three.
    """
    caps = capabilities(plan.backend)
    if caps.secret_mount_root:
        return "mount"
    if caps.shares_launch_disk:
        return "files"
    if caps.env_file_option:
        return "env_file"
    raise ConfigError(
        f"run.curve: the {plan.backend} backend has no way to hand the run's keys to its "
        "processes (no shared disk, secret mount or env file); --set run.curve=false"
    )


def key_folder(plan: Any) -> Path:
    """Where `surreal launch` writes the keys: `RUN/keys/`."""
    return plan.run_dir.path.resolve() / "keys"


def process_folder(plan: Any) -> str:
    """Where the run's processes read the keys (the secret's mount path where it is mounted)."""
    how = delivery(plan)
    if how == "mount":
        return f"{capabilities(plan.backend).secret_mount_root}/{SECRET}"
    if how == "env_file":  # written there by each process (surreal.runtime.plan.compose_env)
        return CONTAINER_KEYS
    return str(key_folder(plan))


def prepare(plan: Any) -> None:
    """Write the run's key pair into `RUN/keys/` when Curve is on and none is there yet."""
    if enabled(plan) and not (key_folder(plan) / "server.key_secret").exists():
        caraml.write_keys(key_folder(plan))


def apply(experiment: Any, plan: Any) -> Any:
    """Set `CARAML_CURVE_KEYS` (and where it is mounted, the secret) on every process when
    Curve is on."""
    if enabled(plan):
        folder, mounted = process_folder(plan), delivery(plan) == "mount"
        for proc in experiment.processes():
            proc.env[ENV] = folder
            if mounted and SECRET not in proc.secrets:
                proc.secrets.append(SECRET)
    return experiment


def launch_options(plan: Any) -> dict[str, Any]:
    """Backend options `symphony.launch` needs for the keys: where the backend mounts secrets,
    create the secret from `RUN/keys/` (its `secret_files` option)."""
    if enabled(plan) and delivery(plan) == "mount":
        return {"secret_files": {SECRET: str(key_folder(plan))}}
    return {}
