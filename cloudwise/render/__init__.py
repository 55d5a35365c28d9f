"""Render a ClusterSpec to terraform files (pure) and write them beside `cloudwise.yaml`."""

from __future__ import annotations

from pathlib import Path

from cloudwise.render.eks import render_eks
from cloudwise.render.gke import render_gke
from cloudwise.resolve import ResolvedCluster, resolve
from cloudwise.spec import ClusterSpec

RENDERERS = {"gcp": render_gke, "aws": render_eks}
GENERATED = (
    "versions.tf",
    "network.tf",
    "iam.tf",
    "main.tf",
    "pools.tf",
    "addons.tf",
    "outputs.tf",
    "addons/apply.sh",
    "addons/cluster-autoscaler.yaml",
    "addons/nvidia-device-plugin.yaml",
    "addons/load-balancer-source-ranges.yaml",
)
"""Every file name a renderer may write; stale ones are removed when the spec changes."""


def render(cluster: ClusterSpec | ResolvedCluster) -> dict[str, str]:
    """The terraform files (name -> HCL text) for a cluster; raises SpecError before any terraform runs."""
    resolved = cluster if isinstance(cluster, ResolvedCluster) else resolve(cluster)
    return RENDERERS[resolved.spec.provider](resolved)


def write(cluster: ClusterSpec, directory: str | Path) -> list[Path]:
    """Render `cluster` into `directory` (created if needed); returns the files written.

    Files cloudwise generated earlier that the new rendering lacks are removed; other files
    (your own `.tf` files, terraform state) are left alone.
    """
    files = render(cluster)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for name in GENERATED:
        if name not in files and (directory / name).exists():
            (directory / name).unlink()
    written = []
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written
