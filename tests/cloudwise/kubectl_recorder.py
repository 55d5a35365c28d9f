"""A `kubectl` for tests, where no Kubernetes API server can be had: it checks what it is asked to
apply as an API server's schema would (kubernetes-validate, strict, for the cluster's version),
checks the kubeconfig it was given, and records the call as JSON. Exit 1 on any problem."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

SCRIPT = """#!{python}
import json, sys
from pathlib import Path

import kubernetes_validate
import yaml

record, version = {record!r}, {version!r}
args = sys.argv[1:]
kubeconfig = yaml.safe_load(Path(args[args.index("--kubeconfig") + 1]).read_text())
folder = Path(args[args.index("-f") + 1])
cluster = kubeconfig["clusters"][0]["cluster"]
objects = []
for path in sorted(folder.glob("*.yaml")):
    for doc in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(doc, version, strict=True)
        objects.append([doc["kind"], doc["metadata"].get("namespace"), doc["metadata"]["name"]])
Path(record).write_text(json.dumps({{
    "args": args,
    "server": cluster["server"],
    "ca_file_bytes": len(Path(cluster["certificate-authority"]).read_bytes()),
    "token": kubeconfig["users"][0]["user"]["token"],
    "objects": objects,
}}))
"""


def install(bin_dir: Path, record: Path, kubernetes_version: str) -> Path:
    """Write `bin_dir/kubectl`; each call overwrites `record`. Put bin_dir first on PATH."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "kubectl"
    path.write_text(
        SCRIPT.format(python=sys.executable, record=str(record), version=kubernetes_version)
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def path_with(bin_dir: Path) -> str:
    """PATH with `bin_dir` first."""
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


def read(record: Path) -> dict:
    """The last recorded call."""
    return json.loads(record.read_text())
