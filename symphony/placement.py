"""Scheduling helpers: where a process runs on a cloudwise cluster, and the pod fields that say so.

In the spirit of Surreal's dispatcher, placement is expressed as a resource request: each helper
returns a `Resources` (cpu, memory, gpu, node_pool) that a backend turns into requests, a node
selector and tolerations. Asking for almost all of a node's allocatable capacity places a process
on a whole machine; asking for 1/N of it packs N processes per machine.

    >>> from cloudwise.spec import ClusterSpec, NodePoolSpec
    >>> pools = [NodePoolSpec("cpu", cpu=8, memory_gb=32)]
    >>> cluster = ClusterSpec("gcp", "c", "us-west1", project="p", pools=pools)
    >>> share_of_machine(cluster, "cpu", 4).cpu  # n2-standard-8: 7.8 cores allocatable
    1.95

Pool labels and taints come from `cloudwise.labels`, the one place that names them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cloudwise import labels as cw_labels
from cloudwise.errors import CloudwiseError
from cloudwise.resolve import resolve_pool
from cloudwise.spec import ClusterSpec, NodePoolSpec
from symphony.errors import SpecError
from symphony.spec import Resources

DAEMONSET_CPU = 0.1
"""Cores left on every node for the DaemonSets (kube-proxy, logging, the GPU device plugin)."""
DAEMONSET_MEMORY_GB = 0.5
"""GiB left on every node for the DaemonSets."""

# (size of the slice, fraction reserved) -- GKE's published kube/system reservations.
_CPU_RESERVED = ((1, 0.06), (1, 0.01), (2, 0.005), (math.inf, 0.0025))
_MEMORY_RESERVED = ((4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (math.inf, 0.02))
_EVICTION_GB = 0.1


@dataclass
class Placement:
    """The pod fields that put a pod on the right nodes (Kubernetes API dicts)."""

    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict] = field(default_factory=list)


def _tiered(total: float, tiers: tuple[tuple[float, float], ...]) -> float:
    reserved, left = 0.0, total
    for size, fraction in tiers:
        part = min(left, size)
        reserved += part * fraction
        left -= part
        if left <= 0:
            break
    return reserved


def _floor(value: float, step: float = 0.05) -> float:
    return round(math.floor(value / step + 1e-9) * step, 2)


def node(cluster: ClusterSpec, pool: str) -> NodePoolSpec:
    """One node of `pool` as cloudwise creates it: cpu, memory and GPUs of the chosen machine type.

    Raises:
        SpecError: no such pool, or cloudwise cannot choose a machine for it (the message says why).
    """
    try:
        return resolve_pool(cluster.pool(pool), cluster).node
    except CloudwiseError as err:
        raise SpecError(f"cannot place on pool {pool!r}: {err}") from None


def allocatable(node: NodePoolSpec) -> tuple[float, float]:
    """What a node leaves for pods: `(cores, GiB)` after system and DaemonSet reserves.

    Args:
        node: a node's capacity (`node(cluster, pool)`; a pool spec with cpu and memory_gb set).

    Uses GKE's published reservation tiers (EKS reserves a little less, so this is safe on both).
    """
    if not node.cpu or not node.memory_gb:
        raise SpecError(
            f"pool {node.name!r} has no cpu/memory_gb; pass node(cluster, pool) instead"
        )
    cpu, memory = float(node.cpu), float(node.memory_gb)
    cpu_left = cpu - _tiered(cpu, _CPU_RESERVED) - DAEMONSET_CPU
    memory_left = memory - _tiered(memory, _MEMORY_RESERVED) - _EVICTION_GB - DAEMONSET_MEMORY_GB
    return _floor(cpu_left), _floor(memory_left)


def on_pool(pool: str, cpu: float = 1, memory_gb: float | None = None, gpu: int = 0) -> Resources:
    """Run on the named node pool with the given request."""
    return Resources(cpu=cpu, memory_gb=memory_gb, gpu=gpu, node_pool=pool)


def whole_machine(cluster: ClusterSpec, pool: str) -> Resources:
    """Take one whole node of `pool`: all its allocatable cpu and memory and all its GPUs."""
    return share_of_machine(cluster, pool, 1)


def share_of_machine(cluster: ClusterSpec, pool: str, per_machine: int) -> Resources:
    """Pack `per_machine` processes on each node of `pool`: each asks for 1/N of a node.

    GPUs are split only when they divide evenly (4 GPUs, 2 per machine -> 2 each); otherwise the
    processes get none and a SpecError says so.
    """
    if not isinstance(per_machine, int) or per_machine < 1:
        raise SpecError(f"per_machine={per_machine!r} must be a whole number >= 1")
    spec = node(cluster, pool)
    cpu, memory = allocatable(spec)
    if spec.gpu and spec.gpu % per_machine:
        raise SpecError(
            f"pool {pool!r} has {spec.gpu} GPUs per node, which do not split into {per_machine} "
            f"equal shares; choose per_machine among {_divisors(spec.gpu)}"
        )
    return Resources(
        cpu=_floor(cpu / per_machine),
        memory_gb=_floor(memory / per_machine),
        gpu=spec.gpu // per_machine,
        node_pool=pool,
    )


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def gpu(
    cluster: ClusterSpec,
    count: int = 1,
    gpu_type: str | None = None,
    cpu: float = 1,
    memory_gb: float | None = None,
) -> Resources:
    """`count` GPUs (of `gpu_type` if given) on the smallest pool that has them."""
    if count < 1:
        raise SpecError(f"gpu(count={count}) asks for no GPU; use count >= 1 or on_pool()")
    request = Resources(cpu=cpu, memory_gb=memory_gb, gpu=count)
    return smallest_pool(cluster, request, gpu_type=gpu_type)


def fits(node: NodePoolSpec, request: Resources, gpu_type: str | None = None) -> bool:
    """Whether a node (`node(cluster, pool)`) can hold `request`."""
    cpu, memory = allocatable(node)
    if gpu_type is not None and (node.gpu_type or "").lower() != gpu_type.lower():
        return False
    return request.cpu <= cpu and (request.memory_gb or 0) <= memory and request.gpu <= node.gpu


def smallest_pool(
    cluster: ClusterSpec, request: Resources, gpu_type: str | None = None
) -> Resources:
    """`request` placed on the smallest pool that fits it (fewest GPUs, then cores, then memory).

    Pools are sized by the machine type cloudwise chooses for them (`node`).

    Raises:
        SpecError: no pool fits; the message lists each pool's allocatable capacity.
    """
    nodes = [node(cluster, p.name) for p in cluster.pools]
    candidates = [n for n in nodes if fits(n, request, gpu_type)]
    if not candidates:
        have = "; ".join(_describe(n) for n in nodes) or "no pools"
        want = f"cpu={request.cpu}, memory_gb={request.memory_gb}, gpu={request.gpu}"
        if gpu_type:
            want += f", gpu_type={gpu_type}"
        raise SpecError(
            f"no pool of cluster {cluster.name!r} fits {want} (allocatable per node: {have}); "
            "lower the request or add a pool with `cloudwise pool add`"
        )
    best = min(candidates, key=lambda p: (p.gpu, p.cpu, p.memory_gb, p.name))
    return Resources(
        cpu=request.cpu, memory_gb=request.memory_gb, gpu=request.gpu, node_pool=best.name
    )


def _describe(node: NodePoolSpec) -> str:
    cpu, memory = allocatable(node)
    gpus = f", {node.gpu}x{node.gpu_type}" if node.gpu else ""
    return f"{node.name} ({node.machine_type}): {cpu} cpu, {memory} GiB{gpus}"


def pod_placement(
    node_pool: str | None, gpus: int, cluster: ClusterSpec | None = None
) -> Placement:
    """The node selector and tolerations for a pod on `node_pool` that uses `gpus` GPUs in total.

    With a cluster spec, the tolerations are exactly the pool's taints (`cloudwise.labels`); without
    one, a GPU pod tolerates the standard GPU taint, and a named pool is selected by its label.
    """
    placement = Placement()
    taints: list[cw_labels.Taint] = []
    if node_pool is not None:
        placement.node_selector = cw_labels.node_selector(node_pool)
        if cluster is not None:
            spec = node(cluster, node_pool)
            if gpus > spec.gpu:
                raise SpecError(
                    f"a pod on pool {node_pool!r} asks for {gpus} GPUs but its nodes have {spec.gpu}; "
                    "pick a GPU pool (symphony.placement.gpu) or lower the request"
                )
            taints = cw_labels.pool_taints(spec)
    if gpus and cw_labels.GPU_TAINT not in taints:
        taints.append(cw_labels.GPU_TAINT)
    placement.tolerations = [t.toleration() for t in taints]
    return placement
