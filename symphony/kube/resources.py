"""Kubernetes resource fields of a process, the check that a pod fits a node of its pool, and
the env vars many containers share moved into ConfigMaps (`share_env`).

A ProcessGroup is one pod, so its processes' requests add up on one node. With a cloudwise
cluster spec (`-o cluster_spec=...`), `check_fits` refuses, before anything is created, a pod
that asks for more than one node of its pool leaves for pods (`symphony.placement.allocatable`),
or, for a pod placed on no pool, more than the largest node of any pool.
"""

from __future__ import annotations

import re
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


SHARE_ENV_MIN = 16
"""Containers that must share an env var (same name, same value) for it to move to a ConfigMap."""
SHARE_ENV_MAPS = 8
"""At most this many shared-env ConfigMaps (the ones that save the most)."""
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def share_env(workloads: list[dict], meta: dict) -> list[dict]:
    """Move env vars that many containers of `workloads` share into ConfigMaps read by `envFrom`.

    Each var (name and value) that at least `SHARE_ENV_MIN` containers have moves into the
    ConfigMap of exactly the containers that have it, so a run's actors read one map of what
    every process shares and one per set of services they connect to. Returns the maps, named
    `meta["name"]`, then `-1`, `-2`, ... (the largest saving first; at most `SHARE_ENV_MAPS`).

    Only plain values move, and none that holds `$(`: the kubelet expands `$(VAR)` in `env`
    values, not in a ConfigMap's. A moved var is gone from the `env` of every container that
    reads it and a container reads each name from one map at most, so every container sees
    exactly the variables it saw before.
    """
    containers = [c for w in workloads for c in w["spec"]["template"]["spec"]["containers"]]
    groups = _shared_groups(containers)
    maps = []
    for k, (holders, data) in enumerate(groups):
        name = meta["name"] if k == 0 else f"{meta['name']}-{k}"
        metadata = {**meta, "name": name, "labels": dict(meta["labels"])}
        maps.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})
        for i in holders:
            _read_from(containers[i], name, data)
    return maps


def _shared_groups(containers: list[dict]) -> list[tuple[tuple[int, ...], dict[str, str]]]:
    """(containers, vars) for each set of at least SHARE_ENV_MIN containers sharing vars."""
    holders: dict[tuple[str, str], list[int]] = {}
    for i, container in enumerate(containers):
        for entry in container.get("env", []):
            name, value = entry["name"], entry.get("value")
            if value is not None and "$(" not in value and _ENV_NAME.match(name):
                holders.setdefault((name, value), []).append(i)
    groups: dict[tuple[int, ...], dict[str, str]] = {}
    for (name, value), who in holders.items():
        if len(who) >= SHARE_ENV_MIN:
            groups.setdefault(tuple(who), {})[name] = value
    ranked = sorted(groups.items(), key=lambda g: (-len(g[0]) * len(g[1]), g[0][0]))
    return ranked[:SHARE_ENV_MAPS]


def _read_from(container: dict, config_map: str, moved: dict[str, str]) -> None:
    """The container reads `moved` from `config_map` (`envFrom`, right after `command`)."""
    env = [e for e in container.get("env", []) if e["name"] not in moved]
    sources = [*container.get("envFrom", []), {"configMapRef": {"name": config_map}}]
    fields = [(k, v) for k, v in container.items() if k not in ("env", "envFrom")]
    container.clear()
    for key, value in fields:
        container[key] = value
        if key == "command":
            container["envFrom"] = sources
            if env:
                container["env"] = env
