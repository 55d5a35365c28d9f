"""Prometheus scrape conventions: a bound service named `prom-*` serves `/metrics` over HTTP.

Backends need nothing special for such a service (it is bound like any other, and its
`SYMPH_PROM_*` address is set as usual). On kube, `kube_manifests` marks the pods that hold one
the way Prometheus' stock Kubernetes scrape configs expect:

- pod annotations `prometheus.io/scrape: "true"`, `prometheus.io/path: /metrics` and
  `prometheus.io/port`: the port of the pod's first such service (enough for a one-process pod);
- each such container port is named `prom-<k>` (k = 0, 1, ... in the pod), so a `role: pod`
  scrape config that keeps `__meta_kubernetes_pod_container_port_name=~"prom-\\d+"` scrapes every
  process of a many-process pod (an actor group).

Such a service that no process connects to and none exposes (`unreached`) gets no Kubernetes
Service: Prometheus reaches the pod itself, and the process's `SYMPH_<NAME>_HOST` is the pod's
IP (a 1,024-actor run would otherwise hold 1,024 Services nobody uses).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SCRAPE_PREFIX = "prom-"
"""Services whose name starts with this serve Prometheus `/metrics`."""

METRICS_PATH = "/metrics"


def is_scrape_service(service: str) -> bool:
    """Whether `service` is a Prometheus `/metrics` endpoint by the naming convention."""
    return service.startswith(SCRAPE_PREFIX)


def unreached(experiment: Any) -> set[str]:
    """The experiment's `prom-*` services that no process connects to and none exposes."""
    reached = {s for p in experiment.processes() for s in (*p.connected, *p.exposed)}
    return {s for s in experiment.services() if is_scrape_service(s) and s not in reached}


def scrape_ports(processes: Iterable[Any], ports: dict[str, int]) -> list[int]:
    """The ports of the `prom-*` services the processes bind, in declaration order."""
    return [ports[s] for p in processes for s in p.bound if is_scrape_service(s) and s in ports]


def annotations(processes: Iterable[Any], ports: dict[str, int]) -> dict[str, str]:
    """The pod annotations for a pod running `processes` (empty when none serves `/metrics`)."""
    found = scrape_ports(processes, ports)
    if not found:
        return {}
    return {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": str(found[0]),
        "prometheus.io/path": METRICS_PATH,
    }


def name_ports(containers: list[dict], scrape: list[int]) -> None:
    """Name the containers' `scrape` ports `prom-0`, `prom-1`, ... (unique in the pod)."""
    k = 0
    for container in containers:
        for port in container.get("ports", []):
            if port["containerPort"] in scrape:
                port["name"] = f"{SCRAPE_PREFIX}{k}"
                k += 1


def mark_pod(template: dict, processes: Iterable[Any], ports: dict[str, int]) -> None:
    """Annotate a pod template and name its scrape ports when its processes serve `/metrics`."""
    notes = annotations(processes, ports)
    if notes:
        template.setdefault("metadata", {}).setdefault("annotations", {}).update(notes)
        name_ports(template["spec"]["containers"], scrape_ports(processes, ports))
