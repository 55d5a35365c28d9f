"""Prometheus `/metrics` of every process of a run, through the official `prometheus_client`.

Each process (`surreal.runtime.plan.topology.process`) binds the symphony service `prom-<process name>`
(`symphony.scrape`), so its port comes from the backend like every other: a free port on
127.0.0.1 locally, a Kubernetes Service (and the pod's `prometheus.io/*` annotations) on kube.
`Component` starts the exporter; the components count into `ProcessMetrics`. Every series
carries the labels experiment, trial, role and index (plus `process`, the symphony name).

Each process also writes `RUN/monitoring/targets/<process>.json` in Prometheus' `file_sd`
format, so a Prometheus server pointed at `RUN/monitoring/targets/*.json` finds every process.
The HTTP server is prometheus_client's own (a daemon thread): a request it cannot parse gets an
error reply, never an exception in the component.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

import symphony
from symphony.scrape import SCRAPE_PREFIX

LABELS = ("experiment", "trial", "role", "index", "process")

METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "surreal_process_restarts": (
        "gauge",
        "Times this process was started again in this launch (crash or kill).",
        (),
    ),
    "surreal_port_messages_total": (
        "counter",
        "Messages this process sent (out) or received (in) on a caraml port.",
        ("port", "direction"),
    ),
    "surreal_port_bytes_total": (
        "counter",
        "Array payload bytes (the frames caraml sends zero-copy) sent or received on a port.",
        ("port", "direction"),
    ),
    "surreal_phase_seconds_total": (
        "counter",
        "Seconds spent per phase of the process's loop (actor: rollout, push, params; "
        "learner: wait, learn, publish).",
        ("phase",),
    ),
    "surreal_env_steps_total": ("counter", "Environment steps this actor stepped.", ()),
    "surreal_episodes_total": ("counter", "Episodes this actor (or evaluator) finished.", ()),
    "surreal_policy_version": ("gauge", "Parameter version this process acts with.", ()),
    "surreal_learner_iterations_total": ("counter", "Learner updates (iterations).", ()),
    "surreal_learner_steps_total": (
        "counter",
        "Environment steps the learner consumed in this launch.",
        (),
    ),
    "surreal_global_step": ("gauge", "The learner's global step (all launches).", ()),
    "surreal_policy_lag": (
        "gauge",
        "Learner version minus the mean version of the batch's segments.",
        (),
    ),
    "surreal_buffer_fill": ("gauge", "Segments or transitions the buffer holds.", ()),
    "surreal_buffer_added_total": ("counter", "Segments the buffer accepted.", ()),
    "surreal_invalid_messages_total": (
        "counter",
        "Messages this process dropped because they did not fit the port's schema.",
        (),
    ),
    "surreal_eval_return": ("gauge", "The evaluator's latest mean greedy return.", ()),
    "surreal_run_global_step": ("gauge", "The run's global step (metrics process).", ()),
    "surreal_run_actor_steps": ("gauge", "Environment steps all actors generated.", ()),
    "surreal_run_episodes": ("gauge", "Episodes all actors finished.", ()),
    "surreal_run_scalar": (
        "gauge",
        "Latest value of every scalar the metrics process writes to TensorBoard.",
        ("scalar",),
    ),
}
"""Every series a surreal process may export: name -> (type, help, labels beyond LABELS)."""


def service_name(process: str) -> str:
    """The symphony service a process binds for its `/metrics` (`prom-actor-0`)."""
    return f"{SCRAPE_PREFIX}{process}"[:63].rstrip("-")


class ProcessMetrics:
    """One process's series (all of `METRICS`, children made on first use) and its exporter.

    Args:
        labels: values of experiment, trial, role, index, process.
    """

    def __init__(self, labels: dict[str, str]) -> None:
        import prometheus_client as prom

        prom.disable_created_metrics()  # no `_created` twin of every counter
        self.labels = {k: str(labels[k]) for k in LABELS}
        self.registry = prom.CollectorRegistry(auto_describe=True)
        kinds = {"counter": prom.Counter, "gauge": prom.Gauge}
        self._families = {
            name: kinds[kind](
                name.removesuffix("_total") if kind == "counter" else name,
                text,
                labelnames=(*LABELS, *extra),
                registry=self.registry,
            )
            for name, (kind, text, extra) in METRICS.items()
        }
        self._server: Any = None
        self.port: int | None = None
        self._totals: dict[tuple, float] = {}

    def series(self, metric: str, /, **extra: Any) -> Any:
        """The child of `metric` (a key of METRICS) with the extra labels `extra`."""
        values = {k: str(v) for k, v in extra.items()}
        return self._families[metric].labels(**self.labels, **values)

    def count(self, metric: str, amount: float = 1.0, /, **extra: Any) -> None:
        """Add `amount` to counter `metric`."""
        self.series(metric, **extra).inc(amount)

    def set(self, metric: str, value: float, /, **extra: Any) -> None:
        """Set gauge `metric`."""
        self.series(metric, **extra).set(value)

    def total(self, metric: str, value: float, /, **extra: Any) -> None:
        """Raise counter `metric` to `value`, a running total kept elsewhere (a lower value: the
        total restarted, so it counts from there)."""
        key = (metric, tuple(sorted(extra.items())))
        last = self._totals.get(key, 0.0)
        self.count(metric, value - last if value >= last else value, **extra)
        self._totals[key] = value

    def port_traffic(self, port: str, direction: str, payload: Any = None) -> None:
        """Count one message on `port` ("in"/"out") and the bytes of the arrays in `payload`."""
        self.count("surreal_port_messages_total", port=port, direction=direction)
        nbytes = payload_bytes(payload)
        if nbytes:
            self.count("surreal_port_bytes_total", nbytes, port=port, direction=direction)

    def text(self) -> str:
        """The exposition text (what `/metrics` answers)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()

    def serve(self, host: str, port: int) -> int:
        """Serve `/metrics` on host:port ("*" = every interface); returns the port."""
        from prometheus_client import start_http_server

        addr = "0.0.0.0" if host in ("*", "") else host
        self._server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def close(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


def payload_bytes(payload: Any) -> int:
    """Bytes of the numpy arrays in `payload` (a dict, possibly nested one level), else 0."""
    if isinstance(payload, np.ndarray):
        return payload.nbytes
    if isinstance(payload, dict):
        return sum(payload_bytes(v) for v in payload.values() if isinstance(v, (dict, np.ndarray)))
    return 0


def run_labels(run_path: Path, role: str, index: int, process: str) -> dict[str, str]:
    """The constant labels of a process of the run in `run_path` (FOLDER/EXPERIMENT/TRIAL)."""
    path = run_path.resolve()
    return {
        "experiment": path.parent.name,
        "trial": path.name,
        "role": role,
        "index": str(index),
        "process": process,
    }


def targets_folder(run_path: Path) -> Path:
    """`RUN/monitoring/targets/`: one Prometheus `file_sd` file per process."""
    return run_path / "monitoring" / "targets"


def write_target(run_path: Path, host: str, port: int, labels: dict[str, str]) -> Path:
    """Write this process's `file_sd` target (atomically); returns the file."""
    folder = targets_folder(run_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{labels['process']}.json"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps([{"targets": [f"{host}:{port}"], "labels": labels}], indent=1))
    os.replace(tmp, path)
    return path


def read_targets(run_path: Path) -> dict[str, str]:
    """process name -> `http://host:port/metrics` from the run's target files."""
    found = {}
    for path in sorted(targets_folder(run_path).glob("*.json")):
        try:
            entry = json.loads(path.read_text())[0]
        except (ValueError, IndexError, KeyError):
            continue
        found[entry["labels"]["process"]] = f"http://{entry['targets'][0]}/metrics"
    return found


def start(run_path: Path, role: str, index: int, restarts: int) -> ProcessMetrics:
    """The process's metrics, served on its `prom-<process>` service when it declared one
    (`SYMPH_PROCESS` names the process; without symphony: `role-index`, not served)."""
    process = os.environ.get("SYMPH_PROCESS") or f"{role}-{index}"
    metrics = ProcessMetrics(run_labels(run_path, role, index, process))
    metrics.set("surreal_process_restarts", restarts)
    prefix = os.environ.get("SURREAL_SERVICE_PREFIX", "")  # a population member (surreal.pbt)
    bare = process[len(prefix) :] if prefix and process.startswith(prefix) else process
    declared = os.environ.get("SYMPH_SERVICES", "").split(",")
    service = next(
        (s for s in (service_name(process), prefix + service_name(bare)) if s in declared), ""
    )
    if service:
        address = symphony.address(service)
        port = metrics.serve(address.bind_host, address.port)
        write_target(run_path, address.host, port, metrics.labels)
    return metrics
