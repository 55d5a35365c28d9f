"""Names, labels and options of an experiment's Kubernetes objects (`symphony.kube.manifests`
renders the objects; these are what other modules find them by)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from cloudwise.spec import ClusterSpec
from symphony import scrape
from symphony.addresses import Address, fixed_endpoints
from symphony.errors import SpecError
from symphony.spec import Experiment, Process

LABEL_EXPERIMENT = "symphony.io/experiment"
LABEL_OWNER = "symphony.io/owner"
LABEL_GROUP = "symphony.io/group"
LABEL_WORKLOAD = "symphony.io/workload"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
ANNOTATION_SPEC = "symphony.io/spec"
MANAGER = "symphony"
SECRETS_ROOT = "/var/run/secrets/symphony"
RUN_AS = 1000
NETWORK_POLICY = "symphony-experiment-only"
RUN_VOLUME = "run-storage"
SHARED_ENV = "symphony-env"
POD_IP = "$(SYMPH_POD_IP)"
"""The host of a service without a Service: the kubelet expands it to `SYMPH_POD_IP`, which
`status.podIP` sets ahead of the variables that use it."""


@dataclass
class RenderOptions:
    """What rendering needs besides the experiment.

    Attributes:
        owner: the user who launches (namespace label; teammates see it in `symphony list`).
        namespace: the namespace; default the experiment name.
        image: image for processes that name none (after `Experiment.image`).
        cluster: the cloudwise cluster spec, for exact pool taints and GPU checks.
        secrets: process name -> more Kubernetes Secrets it mounts, on top of `Process.secrets`
            (the `-o secrets={proc: [name]}` option; naming them in the spec is the usual way).
        shm_gb: size limit of each pod's memory-backed /dev/shm; None: bounded by pod memory.
        base_port: first service port (ports follow declaration order).
        team: run inside the existing namespace `namespace` beside other experiments (see the
            module docstring); objects are then prefixed with the experiment name.
        volume: a PersistentVolumeClaim (in the team namespace; ReadWriteMany for pods
            on several nodes) mounted read-write at `volume_path` in every container.
        volume_path: where every container mounts the run storage: the `volume` claim, or
            without one a scratch volume of its pod (emptyDir); None: no run storage.
        own_secrets: Secrets launch creates from files (the `secret_files` option); in team
            mode each is named `<experiment>-<name>`, so experiments sharing the namespace
            never share or overwrite one.
        cleanup_after_s: seconds after the Job of an `Experiment.ends_with` process finished
            before the cluster deletes every workload of the experiment (`symphony.kube.ending`);
            None: they stay until `symphony delete`.
    """

    owner: str = "unknown"
    namespace: str | None = None
    image: str | None = None
    cluster: ClusterSpec | None = None
    secrets: dict[str, list[str]] = field(default_factory=dict)
    shm_gb: float | None = None
    base_port: int = 7000
    team: bool = False
    volume: str | None = None
    volume_path: str | None = None
    cleanup_after_s: int | None = None
    own_secrets: frozenset[str] = frozenset()


def label_value(text: str) -> str:
    """`text` made a valid label value (63 chars of [A-Za-z0-9_.-], alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:63]
    return value.strip("-_.") or "unknown"


def service_name(service: str) -> str:
    """The Kubernetes Service name for a symphony service (a DNS-1035 label: starts with a letter)."""
    return service if service[:1].isalpha() else f"s-{service}"[:63]


def object_name(experiment: Experiment, options: RenderOptions, name: str) -> str:
    """`name`, prefixed `<experiment>-` in team mode (SpecError past 63 characters)."""
    if not options.team:
        return name
    full = f"{experiment.name}-{name}"
    if len(full) > 63:
        raise SpecError(
            f"in a team namespace objects are named <experiment>-<name>; {full!r} is longer "
            "than 63 characters: shorten the experiment, group or service name"
        )
    return full


def marker_name(experiment: Experiment) -> str:
    """The team mode's ConfigMap that marks (and describes) an experiment."""
    return f"symphony-{experiment.name}"[:253]


def namespace_of(experiment: Experiment, options: RenderOptions) -> str:
    """The experiment's namespace."""
    return options.namespace or experiment.name


def endpoints(experiment: Experiment, options: RenderOptions) -> dict[str, Address]:
    """Every bound service -> its Service DNS name (`<svc>.<namespace>.svc`) and port; a
    `scrape.unreached` one -> `POD_IP` and its port."""
    ns = namespace_of(experiment, options)
    local = scrape.unreached(experiment)

    def host(svc: str, _binder: str) -> str:
        if svc in local:
            return POD_IP
        return f"{object_name(experiment, options, service_name(svc))}.{ns}.svc"

    return fixed_endpoints(experiment, host, base_port=options.base_port)


def secrets_of(process: Process, options: RenderOptions) -> list[str]:
    """Secret names a process mounts: its `Process.secrets` plus the `secrets` option's, once each."""
    names = list(process.secrets) + list(options.secrets.get(process.name, []))
    return list(dict.fromkeys(names))


def secret_object(experiment: Experiment, options: RenderOptions, name: str) -> str:
    """The Secret object a process's secret `name` mounts: `<experiment>-<name>` for one launch
    creates in a team namespace (`own_secrets`), else `name` itself."""
    own = options.team and name in options.own_secrets
    return object_name(experiment, options, name) if own else name


def base_labels(experiment: Experiment, options: RenderOptions) -> dict[str, str]:
    """The labels every object of the experiment carries: experiment, owner, manager."""
    return {
        LABEL_EXPERIMENT: experiment.name,
        LABEL_OWNER: label_value(options.owner),
        LABEL_MANAGED: MANAGER,
    }


def group_selector(
    experiment: Experiment, group: str, workload: str | None = None
) -> dict[str, str]:
    """The labels that select a group's pod (of one workload part, default the whole group)."""
    return {
        LABEL_EXPERIMENT: experiment.name,
        LABEL_GROUP: group,
        LABEL_WORKLOAD: workload or group,
    }
