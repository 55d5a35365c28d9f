"""Kubernetes resource fields of a process, and the check that a pod fits a node of its pool.

A ProcessGroup is one pod, so its processes' requests add up on one node. With a cloudwise
cluster spec (`-o cluster_spec=...`), `check_fits` refuses, before anything is created, a pod
that asks for more than one node of its pool leaves for pods (`symphony.placement.allocatable`),
or, for a pod placed on no pool, more than the largest node of any pool.
"""

from __future__ import annotations

from collections.abc import Iterable

from cloudwise.spec import ClusterSpec
from symphony.errors import SpecError
from symphony.placement import allocatable, node
from symphony.spec import Process


def quantity_gb(gb: float) -> str:
    """GiB as a Kubernetes memory quantity in Mi (`1.5` -> `1536Mi`)."""
    return f"{int(round(gb * 1024))}Mi"


def quantity_cpu(cpu: float) -> str:
    """Cores as a Kubernetes CPU quantity (`2` -> `2`, `0.25` -> `250m`)."""
    millis = int(round(cpu * 1000))
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"


def resources(proc: Process) -> dict:
    """Requests (cpu, memory) and limits (memory, `nvidia.com/gpu`) for one process.

    CPU has no limit (throttling a learner or replay server only slows it); memory's limit equals
    its request so the scheduler's view holds; GPUs are whole devices in limits.
    """
    res = proc.resources
    requests = {"cpu": quantity_cpu(res.cpu)}
    limits: dict[str, str] = {}
    if res.memory_gb:
        requests["memory"] = limits["memory"] = quantity_gb(res.memory_gb)
    if res.gpu:
        limits["nvidia.com/gpu"] = str(res.gpu)
    out: dict = {"requests": requests}
    if limits:
        out["limits"] = limits
    return out


def check_fits(
    group: str, processes: Iterable[Process], pool: str | None, cluster: ClusterSpec | None
) -> None:
    """Raise SpecError (one line, with the numbers) when the group's summed requests exceed what
    the largest node of `pool` (any pool when None) leaves for pods; no cluster spec: no check."""
    if cluster is None or not cluster.pools:
        return
    procs = list(processes)
    cpu = round(sum(p.resources.cpu for p in procs), 3)
    memory = round(sum(p.resources.memory_gb or 0 for p in procs), 3)
    gpus = sum(p.resources.gpu for p in procs)
    names = [pool] if pool is not None else [p.name for p in cluster.pools]
    nodes = [node(cluster, name) for name in names]
    sizes = [(allocatable(n), n.gpu or 0, n) for n in nodes]
    if any(cpu <= c and memory <= m and gpus <= g for (c, m), g, _ in sizes):
        return
    (best_cpu, best_mem), best_gpu, biggest = max(sizes, key=lambda s: (s[1], s[0][0], s[0][1]))
    where = f"pool {pool!r}" if pool is not None else f"any pool of cluster {cluster.name!r}"
    raise SpecError(
        f"group {group!r} ({len(procs)} processes, one pod) asks for {cpu:g} cpu, "
        f"{memory:g} GiB memory, {gpus} GPU, but the largest node of {where} "
        f"({biggest.name}: {biggest.machine_type}) leaves {best_cpu:g} cpu, {best_mem:g} GiB, "
        f"{best_gpu} GPU for pods; split the group or lower its requests"
    )
