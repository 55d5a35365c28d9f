"""The Kubernetes labels and taints every cloudwise node pool carries (read by symphony placement)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cloudwise.spec import NodePoolSpec

PREFIX = "cloudwise.io/"
POOL = "cloudwise.io/pool"
CPU = "cloudwise.io/cpu"
MEMORY_GB = "cloudwise.io/memory-gb"
GPU_TYPE = "cloudwise.io/gpu-type"
GPU_COUNT = "cloudwise.io/gpu-count"
LABEL_KEYS = (POOL, CPU, MEMORY_GB, GPU_TYPE, GPU_COUNT)

NO_GPU = "none"
"""Value of the gpu-type label on pools without GPUs."""

GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
GPU_TAINT_EFFECT = "NoSchedule"

EFFECTS = {
    "NoSchedule": "NO_SCHEDULE",
    "PreferNoSchedule": "PREFER_NO_SCHEDULE",
    "NoExecute": "NO_EXECUTE",
}
"""Kubernetes taint effects and the names both GKE and EKS terraform resources use for them."""


@dataclass(frozen=True)
class Taint:
    """A Kubernetes node taint, `key=value:Effect`."""

    key: str
    value: str
    effect: str = "NoSchedule"

    @classmethod
    def parse(cls, text: str) -> Taint:
        """Parse `key=value:Effect` (or `key:Effect`); raises ValueError naming the expected form."""
        body, sep, effect = text.rpartition(":")
        if not sep or effect not in EFFECTS:
            raise ValueError(
                f"taint {text!r} must look like key=value:Effect with Effect one of {', '.join(EFFECTS)}"
            )
        key, _, value = body.partition("=")
        if not key:
            raise ValueError(f"taint {text!r} has no key; write it as key=value:{effect}")
        return cls(key, value, effect)

    def __str__(self) -> str:
        return (
            f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"
        )

    @property
    def terraform_effect(self) -> str:
        """The effect as GKE's and EKS's terraform resources spell it (`NO_SCHEDULE`)."""
        return EFFECTS[self.effect]

    def toleration(self) -> dict:
        """The pod toleration (Kubernetes API dict) that tolerates this taint."""
        tol = {"key": self.key, "operator": "Equal", "value": self.value, "effect": self.effect}
        if not self.value:
            tol = {"key": self.key, "operator": "Exists", "effect": self.effect}
        return tol


GPU_TAINT = Taint(GPU_TAINT_KEY, GPU_TAINT_VALUE, GPU_TAINT_EFFECT)


def format_number(value: float) -> str:
    """A label-safe number: `8`, `30`, `61.5` (no trailing `.0`)."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def pool_labels(pool: NodePoolSpec) -> dict[str, str]:
    """The labels a pool's nodes carry: cloudwise's five placement labels, then the user's.

    `pool.cpu`, `pool.memory_gb`, `pool.gpu_type` and `pool.gpu` are the node's capacity; cloudwise
    fills them from the chosen machine type when it resolves a spec (`cloudwise.catalog.resolve`),
    so the rendered labels always describe the real machine.
    """
    labels = {
        POOL: pool.name,
        CPU: format_number(pool.cpu or 0),
        MEMORY_GB: format_number(pool.memory_gb or 0),
        GPU_TYPE: pool.gpu_type if pool.gpu else NO_GPU,
        GPU_COUNT: str(pool.gpu or 0),
    }
    labels.update(pool.labels)
    return labels


def pool_taints(pool: NodePoolSpec) -> list[Taint]:
    """The taints a pool's nodes carry: the GPU taint on GPU pools, then the user's taints."""
    taints = [GPU_TAINT] if pool.gpu else []
    for text in pool.taints:
        taint = Taint.parse(text)
        if taint not in taints:
            taints.append(taint)
    return taints


def labels_and_taints(pool: NodePoolSpec) -> tuple[dict[str, str], list[Taint]]:
    """Both at once: `(pool_labels(pool), pool_taints(pool))`."""
    return pool_labels(pool), pool_taints(pool)


def node_selector(pool_name: str) -> dict[str, str]:
    """The pod nodeSelector that pins a pod to one cloudwise pool."""
    return {POOL: pool_name}
