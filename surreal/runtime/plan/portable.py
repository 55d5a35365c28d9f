"""Process commands that run inside the run's image: no path of the launching machine in them.

On the image-based backends (compose, kube: symphony's `Capabilities.runs_in_image`) every process of a run is
`python -m surreal component ROLE /runs/EXPERIMENT/TRIAL --index I`: the image's own `python`,
and the run folder as a container path under `RUNS_ROOT` (mounted from the backend's run
storage: a PersistentVolumeClaim with the kube options `team_namespace=NS volume=NAME`, else each pod's own
scratch volume) or, for an object-store run folder (`s3://...`), that URL unchanged.

The run's files that every process reads (config.json, run.json and the copies of user code
under code/) travel with the process in the env var `BUNDLE_ENV`: gzip-compressed JSON in
base64, written with container paths only. `materialize` (called by every component before it
starts) writes them into the run folder when they are missing or differ, so a pod needs no
file from the launching machine. Local, tmux and slurm keep the launching machine's commands
(they share its filesystem).

The image is `run.image` (`surreal launch --image`), else the backend's default image (kube
option `image`, env SYMPHONY_KUBE_IMAGE); `symphony build cpu -c docker/build.yaml` makes it.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys
from pathlib import Path
from typing import Any

from surreal.api import config as config_io
from surreal.runtime.plan.sizing import apply_requests
from symphony.backends import capabilities

RUNS_ROOT = "/runs"
"""Where run folders live inside the containers."""

BUNDLE_ENV = "SURREAL_RUN_BUNDLE"
"""The env var that carries the run's config files into every process."""

PYTHON = "python"
"""The interpreter in the image (on its PATH)."""


def applies(plan: Any) -> bool:
    """Whether the plan's backend runs processes in containers of the run's image (compose,
    kube)."""
    return capabilities(plan.backend).runs_in_image


def host_run_dir(plan: Any) -> str:
    """The run folder on the launching machine (absolute; for an object-store run, its local
    mirror)."""
    return str(Path(plan.run_dir.path).resolve())


def run_url(plan: Any) -> str | None:
    """The run's object-store URL (`s3://...`), or None for a run in a folder."""
    url = getattr(plan.run_dir, "url", None)
    return url or (str(plan.run_dir.path) if "://" in str(plan.run_dir.path) else None)


def container_run_dir(plan: Any) -> str:
    """The run folder as the processes see it: `RUNS_ROOT/EXPERIMENT/TRIAL`, or its URL."""
    url = run_url(plan)
    if url:
        return url
    path = Path(plan.run_dir.path)
    return f"{RUNS_ROOT}/{path.parent.name}/{path.name}"


def apply(experiment: Any, plan: Any) -> Any:
    """On compose and kube: portable commands, the config bundle, the image and each process's
    requests (`surreal.runtime.plan.sizing`); on other backends the experiment is returned unchanged."""
    if not applies(plan):
        return experiment
    host = host_run_dir(plan)
    path = Path(host)
    inside = f"{RUNS_ROOT}/{path.parent.name}/{path.name}"  # also an object-store run's mirror
    bundle = None if run_url(plan) else encode_bundle(plan)
    experiment.image = plan.config.run.image or experiment.image
    experiment.metadata["run_dir"] = container_run_dir(plan)
    if bundle is not None:  # a file learner's ref: its copy in the container's run folder
        experiment.metadata["algo"] = json.loads(run_files(plan)["run.json"])["algo"]
    for proc in experiment.processes():
        proc.command = [_portable_arg(a, host, inside) for a in proc.argv()]
        proc.env = {k: _portable_arg(v, host, inside) for k, v in proc.env.items()}
        if bundle is not None:
            proc.env[BUNDLE_ENV] = bundle
    apply_requests(experiment, plan)
    return experiment


def _portable_arg(arg: str, host: str, inside: str) -> str:
    if arg == sys.executable:
        return PYTHON
    if arg == host or arg.startswith(host + "/"):
        return inside + arg[len(host) :]
    return arg


def run_files(plan: Any) -> dict[str, str]:
    """The files every process reads, by path relative to the run folder, with container paths:
    config.json, run.json and code/NAME for each user file the run uses."""
    inside = container_run_dir(plan)
    code: dict[str, str] = {}
    config = config_io.to_dict(plan.config)
    for key, value in config["algo"].items():
        path, sep, cls = value.rpartition(":") if isinstance(value, str) else ("", "", "")
        if sep and path.endswith(".py") and Path(path).is_file():
            code[f"code/{Path(path).name}"] = Path(path).read_text()
            config["algo"][key] = f"{inside}/code/{Path(path).name}:{cls}"
    info: dict[str, Any] = {
        "algo": plan.algo_ref,
        "env_info": plan.env_info.to_dict(),
        "experiment": plan.experiment_name,
    }
    ref_path, sep, cls = plan.algo_ref.rpartition(":")
    if sep and ref_path.endswith(".py"):
        name = Path(ref_path).name
        source = plan.run_dir.path / "code" / name if plan.resume else Path(ref_path)
        code[f"code/{name}"] = source.read_text()
        info["algo"] = f"{inside}/code/{name}:{cls}"
        info["algo_copy"] = f"code/{name}:{cls}"
    files = {
        "config.json": json.dumps(config, indent=2, sort_keys=True) + "\n",
        "run.json": json.dumps(info, indent=2, sort_keys=True) + "\n",
    }
    return {**files, **code}


def encode_bundle(plan: Any) -> str:
    """`run_files(plan)` as the value of `BUNDLE_ENV` (gzip, base64)."""
    raw = json.dumps(run_files(plan), sort_keys=True).encode()
    return base64.b64encode(gzip.compress(raw, compresslevel=9, mtime=0)).decode()


def decode_bundle(text: str) -> dict[str, str]:
    """The files of a `BUNDLE_ENV` value (ValueError for anything else)."""
    try:
        files = json.loads(gzip.decompress(base64.b64decode(text, validate=True)))
    except (ValueError, OSError) as err:
        raise ValueError(f"{BUNDLE_ENV} is not a surreal run bundle: {err}") from None
    if not isinstance(files, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in files.items()
    ):
        raise ValueError(f"{BUNDLE_ENV} is not a surreal run bundle: not a mapping of files")
    return files


def materialize(run_dir: str, environ: dict[str, str] | None = None) -> bool:
    """Write the bundle's files (env `BUNDLE_ENV`) into `run_dir` where missing or different.

    Returns whether there was a bundle. Each file is replaced atomically, so processes that start
    together on one shared volume never read half a file; a path that leaves the run folder is
    an error.
    """
    text = (os.environ if environ is None else environ).get(BUNDLE_ENV)
    if not text:
        return False
    root = Path(run_dir)
    (root / "checkpoints").mkdir(parents=True, exist_ok=True)
    for rel, content in decode_bundle(text).items():
        target = (root / rel).resolve()
        if root.resolve() not in target.parents:
            raise ValueError(f"{BUNDLE_ENV} names {rel!r}, outside the run folder")
        if target.is_file() and target.read_text() == content:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(content)
        os.replace(tmp, target)
    return True
