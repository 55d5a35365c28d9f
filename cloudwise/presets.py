"""Node-pool presets offered by `cloudwise init` (the Surreal paper's cluster first)."""

from __future__ import annotations

from cloudwise.errors import SpecError
from cloudwise.spec import NodePoolSpec

DEFAULT_REGION = {"gcp": "us-west1", "aws": "us-west-2"}
DEFAULT_ZONE = {"gcp": "us-west1-b"}


def surreal() -> list[NodePoolSpec]:
    """The Surreal paper's cluster: CPU actors (8 and 32 cores) and V100 learners (1 and 4 GPUs).

    A small always-on `system` pool runs Kubernetes' own pods so every other pool can scale to zero.
    """
    return [
        NodePoolSpec("system", cpu=2, memory_gb=7.5, min_nodes=1, max_nodes=3),
        NodePoolSpec("actors-8", cpu=8, memory_gb=30, spot=True, min_nodes=0, max_nodes=64),
        NodePoolSpec("actors-32", cpu=32, memory_gb=120, spot=True, min_nodes=0, max_nodes=32),
        NodePoolSpec(
            "learner-1gpu", cpu=8, memory_gb=30, gpu_type="v100", gpu=1, min_nodes=0, max_nodes=4
        ),
        NodePoolSpec(
            "learner-4gpu", cpu=32, memory_gb=120, gpu_type="v100", gpu=4, min_nodes=0, max_nodes=2
        ),
    ]


def minimal() -> list[NodePoolSpec]:
    """One small CPU pool to try things out."""
    return [NodePoolSpec("default", cpu=2, memory_gb=7.5, min_nodes=1, max_nodes=3)]


PRESETS = {"surreal": surreal, "minimal": minimal, "custom": list}
"""Preset name -> pools; `custom` starts empty (pools come from --pool or the prompts)."""


def parse_pool(text: str) -> NodePoolSpec:
    """Parse `name=actors,cpu=8,gpu_type=v100,gpu=1,spot=true,max_nodes=4` into a pool.

    Labels and taints use `label.KEY=VALUE` and `taint=KEY=VALUE:Effect` (repeatable).
    """
    data: dict = {"labels": {}, "taints": []}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip().replace("-", "_")
        if not sep:
            raise SpecError(f"pool option {part!r} needs a value: write key=value (e.g. cpu=8)")
        if key.startswith("label."):
            data["labels"][key[len("label.") :]] = value
        elif key == "taint":
            data["taints"].append(value)
        else:
            data[key] = _scalar(key, value)
    return NodePoolSpec.from_dict(data)


def _scalar(key: str, value: str):
    if key in ("cpu", "gpu", "min_nodes", "max_nodes", "disk_gb"):
        try:
            return int(value)
        except ValueError:
            raise SpecError(f"pool option {key}={value!r}: expected a whole number") from None
    if key == "memory_gb":
        try:
            return float(value)
        except ValueError:
            raise SpecError(f"pool option memory_gb={value!r}: expected a number of GB") from None
    if key == "spot":
        if value.lower() not in ("true", "false", "yes", "no", "1", "0"):
            raise SpecError(f"pool option spot={value!r}: expected true or false")
        return value.lower() in ("true", "yes", "1")
    return value
