"""Render an Experiment as a compose file (a pure function: no engine, no files).

Layout, like a Kubernetes Pod per ProcessGroup:

- every process is its own service (one container), so docker itself tracks each process's
  state, exit code, restarts, logs and resource limits;
- a group of several processes also gets a *sandbox* service named after the group: a tiny
  container that only holds the group's network and IPC namespaces (the role of a Pod's pause
  container). Members join them with ``network_mode: service:<group>`` and
  ``ipc: service:<group>``, so they reach each other on localhost and share /dev/shm (the
  DataFetcher's shared memory) whichever member restarts. A lone process is its own sandbox.

Addresses (the SYMPH_* contract): in ``network="service"`` mode a service's host is the compose
service that owns the binder's network namespace (its group), ports are numbered from
`base_port`; in ``network="host"`` mode every container uses the host's network and the
addresses are free ports on 127.0.0.1, as on the local backend.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from symphony.addresses import (
    LOCAL_HOST,
    Address,
    fixed_endpoints,
    free_port,
    local_endpoints,
    process_env,
)
from symphony.backends import compose_end
from symphony.errors import BackendError
from symphony.spec import Experiment, Process, ProcessGroup

LABEL = "io.symphony"
EXPERIMENT_LABEL, OWNER_LABEL = f"{LABEL}.experiment", f"{LABEL}.owner"
GROUP_LABEL, PROCESS_LABEL, ROLE_LABEL = f"{LABEL}.group", f"{LABEL}.process", f"{LABEL}.role"
NETWORK_MODES = ("service", "host")
SANDBOX_COMMAND = [
    "/bin/sh",
    "-c",
    "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done",
]


@dataclass(frozen=True)
class ComposeOptions:
    """How the compose backend renders an experiment.

    Attributes:
        network: "service" (compose's project network; addresses are service names) or "host"
            (every container on the host's network; addresses are free ports on 127.0.0.1).
        image: image for processes whose spec names none (after `Experiment.image`).
        shm_size: /dev/shm size of each group (shared by its processes), e.g. "1g".
        base_port: first port of the stable numbering in "service" mode.
        stop_grace_s: seconds between SIGTERM and SIGKILL when stopping.
        env_files: env files on the launching machine (`KEY=VALUE` lines) that compose reads
            at `up` into every process container's environment; the compose file names them
            only, so secrets in them stay out of it and out of the experiment spec.
    """

    network: str = "service"
    image: str | None = None
    shm_size: str = "1g"
    base_port: int = 7000
    stop_grace_s: int = 10
    env_files: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.network not in NETWORK_MODES:
            raise BackendError(
                f"compose network {self.network!r} is unknown; use one of {NETWORK_MODES}"
            )


def project_name(experiment_name: str) -> str:
    """The compose project of an experiment (compose names containers `<project>_<service>_1`)."""
    return f"symphony-{experiment_name}"


def endpoints_for(experiment: Experiment, options: ComposeOptions) -> dict[str, Address]:
    """Service addresses: free 127.0.0.1 ports (host mode) or group service names (service mode)."""
    if options.network == "host":
        return local_endpoints(experiment, LOCAL_HOST)
    return fixed_endpoints(
        experiment,
        lambda _service, binder: experiment.group_of(binder),
        base_port=options.base_port,
    )


def image_of(experiment: Experiment, process: Process, options: ComposeOptions) -> str:
    """The image a process runs: its own, else the experiment's, else the backend option."""
    image = process.image or experiment.image or options.image
    if not image:
        raise BackendError(
            f"process {process.name!r} has no image; set Experiment(image=...), "
            "Process(image=...), or the compose backend's `image` option "
            "(build one with `symphony build`)"
        )
    return image


def render_compose(
    experiment: Experiment,
    owner: str,
    options: ComposeOptions,
    endpoints: Mapping[str, Address] | None = None,
) -> dict[str, Any]:
    """The compose file (as a mapping) for a validated experiment.

    Args:
        experiment: what to run (already validated).
        owner: recorded in every container's labels.
        options: network mode, default image, shm size, ...
        endpoints: service addresses (default: `endpoints_for(experiment, options)`).
    """
    endpoints = dict(endpoints or endpoints_for(experiment, options))
    ends = _end_watch(experiment, options, endpoints)
    services: dict[str, Any] = {}
    for group in experiment.groups():
        sandboxed = len(group.processes) > 1
        if sandboxed:
            services[group.name] = _sandbox(experiment, group, owner, options)
        for proc in group.processes:
            services[proc.name] = _process_service(
                experiment, group, proc, owner, options, endpoints, sandboxed
            )
            if proc.name in ends.wrapped:
                services[proc.name]["entrypoint"] = ends.entrypoint(proc, options)
                if proc.restart.mode == "always":  # the wrapper restarts after 0 (`--always`)
                    services[proc.name]["restart"] = "on-failure"
            if options.network == "service":  # publish exposed services on the namespace owner
                owner_service = services[group.name if sandboxed else proc.name]
                for name in proc.exposed:
                    port = endpoints[name].port
                    owner_service.setdefault("ports", []).append(f"{port}:{port}")
    return {"services": _escape(services)}


@dataclass(frozen=True)
class EndWatch:
    """How the processes of an experiment with `ends_with` learn its end (`compose_end`):
    `wrapped` names the processes started through the wrapper (those run by `python`),
    `ports` each wrapped ender's address."""

    wrapped: frozenset[str]
    ports: Mapping[str, Address]

    def entrypoint(self, proc: Process, options: ComposeOptions) -> list[str]:
        argv = proc.argv()
        role = ["--name", proc.name]
        if proc.name in self.ports:  # it tells every other wrapped process (other enders too)
            members = sorted(self.wrapped - {proc.name})
            role += ["--announce", str(self.ports[proc.name].port), "--members", ",".join(members)]
            role += ["--final", ",".join(map(str, proc.restart.final_codes))]
            role += ["--bind-host", LOCAL_HOST if options.network == "host" else "*"]
        watch = [a.addr for name, a in self.ports.items() if name != proc.name]
        role += ["--watch", ",".join(watch)] if watch else []
        role += ["--grace-s", str(max(1, options.stop_grace_s - 2))]
        always = proc.restart.mode == "always" and proc.name not in self.ports  # 0 ends an ender
        role += ["--always"] if always else []
        return [argv[0], "-c", inspect.getsource(compose_end), *role, "--", *argv]


def _runs_python(proc: Process) -> bool:
    argv = proc.argv()
    return os.path.basename(argv[0]).startswith("python")


def _end_watch(
    experiment: Experiment, options: ComposeOptions, endpoints: Mapping[str, Address]
) -> EndWatch:
    """The end watch of `experiment`: none without `ends_with` or without a `python` ender;
    otherwise one port per ender: a free one (host network), or the next after the
    experiment's own (its group's host)."""
    wrapped = {p.name for p in experiment.processes() if _runs_python(p)}
    enders = [n for n in experiment.ends_with if n in wrapped]
    taken = {a.port for a in endpoints.values()}
    ports: dict[str, Address] = {}
    for name in enders:
        if options.network == "host":
            port = free_port(LOCAL_HOST)
            while port in taken:
                port = free_port(LOCAL_HOST)
            ports[name] = Address(LOCAL_HOST, port, bind_host=LOCAL_HOST)
        else:
            port = max(taken, default=options.base_port - 1) + 1
            ports[name] = Address(experiment.group_of(name), port)
        taken.add(port)
    return EndWatch(frozenset(wrapped if enders else ()), ports)


def _escape(value: Any) -> Any:
    """Doubles every `$` so compose passes commands and env values to containers literally."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [_escape(v) for v in value]
    if isinstance(value, dict):
        return {k: _escape(v) for k, v in value.items()}
    return value


def _labels(experiment: Experiment, owner: str, group: str, process: str | None) -> dict[str, str]:
    labels = {
        EXPERIMENT_LABEL: experiment.name,
        OWNER_LABEL: owner,
        GROUP_LABEL: group,
        ROLE_LABEL: "process" if process else "sandbox",
    }
    if process:
        labels[PROCESS_LABEL] = process
    return labels


def _sandbox(
    experiment: Experiment, group: ProcessGroup, owner: str, options: ComposeOptions
) -> dict[str, Any]:
    service: dict[str, Any] = {
        "image": image_of(experiment, group.processes[0], options),
        "entrypoint": list(SANDBOX_COMMAND),
        "labels": _labels(experiment, owner, group.name, None),
        "ipc": "shareable",
        "shm_size": options.shm_size,
        "restart": "unless-stopped",
        "stop_grace_period": "2s",
    }
    if options.network == "host":
        service["network_mode"] = "host"
    return service


def _process_service(
    experiment: Experiment,
    group: ProcessGroup,
    proc: Process,
    owner: str,
    options: ComposeOptions,
    endpoints: dict[str, Address],
    sandboxed: bool,
) -> dict[str, Any]:
    bind_host = LOCAL_HOST if options.network == "host" else "*"
    service: dict[str, Any] = {
        "image": image_of(experiment, proc, options),
        "entrypoint": proc.argv(),
        "environment": process_env(experiment, proc, endpoints, bind_host),
        "labels": _labels(experiment, owner, group.name, proc.name),
        "init": True,
        "restart": _restart(proc),
        "stop_grace_period": f"{options.stop_grace_s}s",
        **_resources(proc),
    }
    if options.env_files:
        service["env_file"] = list(options.env_files)
    if proc.cwd:
        service["working_dir"] = proc.cwd
    if sandboxed:
        service["ipc"] = f"service:{group.name}"
        service["depends_on"] = [group.name]
        service["network_mode"] = "host" if options.network == "host" else f"service:{group.name}"
    else:
        service["ipc"] = "shareable"
        service["shm_size"] = options.shm_size
        if options.network == "host":
            service["network_mode"] = "host"
    return service


def _restart(proc: Process) -> str:
    mode = proc.restart.mode
    if mode == "never":
        return "no"
    if mode == "on-failure":
        return f"on-failure:{proc.restart.max_restarts}" if proc.restart.max_restarts else "no"
    return "always"


def _resources(proc: Process) -> dict[str, Any]:
    res = proc.resources
    out: dict[str, Any] = {"cpus": float(res.cpu)}
    if res.memory_gb:
        out["mem_limit"] = f"{int(res.memory_gb * 1024)}m"
    if res.gpu:
        out["deploy"] = {
            "resources": {
                "reservations": {
                    "devices": [{"driver": "nvidia", "count": res.gpu, "capabilities": ["gpu"]}]
                }
            }
        }
    return out
