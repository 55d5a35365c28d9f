"""Pure rendering of an Experiment into Kubernetes objects (plain dicts; no cluster, no client).

What one experiment becomes, in apply order:

- a Namespace labelled with the experiment and its owner (and Pod Security `restricted`);
- a NetworkPolicy admitting ingress only from the experiment's own pods, plus one per exposed
  service that opens just that port of just that pod to any source;
- a Service per bound name (ClusterIP; LoadBalancer for an `exposes` name) selecting the pod of
  the group that binds it, on the port the address contract assigns; none for a `/metrics`
  service that no process reaches (`scrape.unreached`: its host is the pod's IP, `POD_IP`);
- ConfigMaps `symphony-env`, `-1`, ... of the env vars that 16 or more containers share, which
  they read with `envFrom` (`kube_resources.share_env`: 1,024 actors stay under 2 MB);
- per ProcessGroup and restart mode one pod (a container per process) under a controller that
  keeps that mode (`workload_parts`):

  | restart mode  | controller                  | pod restartPolicy | limit                       |
  |---------------|-----------------------------|-------------------|-----------------------------|
  | `always`      | Deployment, 1 replica, `Recreate` | Always      | none (CrashLoopBackOff delays) |
  | `on-failure`  | Job                         | OnFailure         | `backoffLimit` = max_restarts (largest in the pod) |
  | `never`       | Job, disruptions ignored    | Never             | `backoffLimit` 0            |

  The kubelet restarts only the container that ended (and for OnFailure only after a failure),
  its siblings keep running; a Job that completed is never started again. A group whose
  processes mix modes becomes one pod per mode (`<group>-<mode>`), all labelled with the group
  and held on one node by a required pod affinity to the group's label on
  `kubernetes.io/hostname` (the first pod places the group: a pod matching its own affinity term
  schedules when no other pod matches yet). Such pods share the node (and its GPUs' node pool)
  but not a network namespace or /dev/shm; services are reached through their Service as always.
  The Job of an `Experiment.ends_with` process comes first, with `ttlSecondsAfterFinished`
  (`RenderOptions.cleanup_after_s`; how the experiment then ends: `symphony.kube.ending`).

Secrets are referenced by name only (secret volumes); their values never appear here.

Team namespace mode (`RenderOptions.team`): the experiment runs inside an existing namespace an
admin gave the team (namespaced RBAC only: `symphony/schemas/team-namespace-rbac.yaml`). No
Namespace is created; a ConfigMap `symphony-<experiment>` (labels: experiment, owner; the spec
annotated) marks the experiment instead, every other object's name starts with
`<experiment>-`, and the NetworkPolicies select only the experiment's pods, so several
experiments share the namespace apart by labels and owner.
"""

from __future__ import annotations

from dataclasses import dataclass

from symphony import scrape, spec_store
from symphony.addresses import Address, env_prefix, process_env
from symphony.errors import SpecError
from symphony.kube.ending import lead
from symphony.kube.naming import (
    ANNOTATION_SPEC,
    LABEL_EXPERIMENT,
    LABEL_GROUP,
    NETWORK_POLICY,
    POD_IP,
    RUN_AS,
    RUN_VOLUME,
    SECRETS_ROOT,
    SHARED_ENV,
    RenderOptions,
    base_labels,
    endpoints,
    group_selector,
    marker_name,
    namespace_of,
    object_name,
    secret_object,
    secrets_of,
    service_name,
)
from symphony.kube.resources import check_fits, quantity_gb, resources, share_env
from symphony.placement import pod_placement
from symphony.spec import Experiment, Process, ProcessGroup

POD_RESTART = {"always": "Always", "on-failure": "OnFailure", "never": "Never"}


@dataclass(frozen=True)
class WorkloadPart:
    """One controller of a group: its name, the restart mode it keeps, and its processes."""

    name: str
    group: str
    mode: str
    processes: tuple[Process, ...]


def workload_parts(group: ProcessGroup) -> list[WorkloadPart]:
    """The group as one pod per restart mode (one pod named after the group when it has one mode).

    Raises:
        SpecError: a split pod's name (`<group>-<mode>`) would exceed 63 characters.
    """
    modes = list(dict.fromkeys(p.restart.mode for p in group.processes))
    if len(modes) == 1:
        return [WorkloadPart(group.name, group.name, modes[0], tuple(group.processes))]
    parts = []
    for mode in modes:
        name = f"{group.name}-{mode}"
        if len(name) > 63:
            raise SpecError(
                f"group {group.name!r} mixes restart modes, so it runs as pods named "
                f"<group>-<mode>; {name!r} is longer than 63 characters: shorten the group name"
            )
        procs = tuple(p for p in group.processes if p.restart.mode == mode)
        parts.append(WorkloadPart(name, group.name, mode, procs))
    return parts


def part_of(experiment: Experiment, process: str) -> WorkloadPart:
    """The workload part that runs `process`."""
    group = next(g for g in experiment.groups() if process in [p.name for p in g.processes])
    return next(w for w in workload_parts(group) if process in [p.name for p in w.processes])


def _meta(name: str, ns: str | None, labels: dict[str, str]) -> dict:
    meta = {"name": name, "labels": dict(labels)}
    if ns is not None:
        meta["namespace"] = ns
    return meta


def render(experiment: Experiment, options: RenderOptions | None = None) -> list[dict]:
    """Every object of `experiment`, in apply order (Namespace first).

    Raises:
        SpecError: the experiment is invalid, a process has no image, or (with a cluster spec) a
            group asks for more than one node of its pool leaves (`kube_resources.check_fits`).
    """
    options = options or RenderOptions()
    experiment.validate()
    ns = namespace_of(experiment, options)
    labels = base_labels(experiment, options)
    eps = endpoints(experiment, options)
    objects = [marker(experiment, options) if options.team else namespace(experiment, options)]
    objects += network_policies(experiment, ns, labels, eps, options)
    objects += services(experiment, ns, labels, eps, options)
    workloads = []
    for group in experiment.groups():
        check_fits(group.name, group.processes, group.node_pool(), options.cluster)
        parts = workload_parts(group)
        for part in parts:
            workloads.append(workload(experiment, part, ns, labels, eps, options, len(parts) > 1))
    env_map = f"{experiment.name}-{SHARED_ENV}"[:240] if options.team else SHARED_ENV
    shared = share_env(workloads, _meta(env_map, ns, labels))
    return objects + shared + lead(workloads, experiment.ends_with, options.cleanup_after_s)


def namespace(experiment: Experiment, options: RenderOptions) -> dict:
    """The Namespace: experiment and owner labels, Pod Security `restricted`, the spec annotated
    (compact: `symphony.spec_store`)."""
    labels = base_labels(experiment, options)
    labels["pod-security.kubernetes.io/enforce"] = "restricted"
    meta = _meta(namespace_of(experiment, options), None, labels)
    meta["annotations"] = {ANNOTATION_SPEC: spec_store.encode(experiment)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def marker(experiment: Experiment, options: RenderOptions) -> dict:
    """Team mode: the ConfigMap that marks the experiment in the shared namespace."""
    meta = _meta(marker_name(experiment), options.namespace, base_labels(experiment, options))
    meta["annotations"] = {ANNOTATION_SPEC: spec_store.encode(experiment)}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {}}


def network_policies(
    experiment: Experiment,
    ns: str,
    labels: dict[str, str],
    eps: dict[str, Address],
    options: RenderOptions | None = None,
) -> list[dict]:
    """Ingress from the experiment's own pods only; each exposed port open to any source.

    Namespace per experiment: the policy selects every pod of the namespace; team mode: only
    the experiment's pods (the namespace's other pods are other experiments' business).
    """
    options = options or RenderOptions()
    own = {"podSelector": {"matchLabels": {LABEL_EXPERIMENT: experiment.name}}}
    policies = [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(
                f"symphony-{experiment.name}" if options.team else NETWORK_POLICY, ns, labels
            ),
            "spec": {
                "podSelector": own["podSelector"] if options.team else {},
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [own]}],
            },
        }
    ]
    for proc in experiment.processes():
        for svc in proc.exposed:
            part = part_of(experiment, proc.name)
            policies.append(
                {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": _meta(
                        object_name(experiment, options, f"symphony-expose-{svc}")[:63]
                        if not options.team
                        else f"symphony-{experiment.name}-expose-{svc}"[:253],
                        ns,
                        labels,
                    ),
                    "spec": {
                        "podSelector": {
                            "matchLabels": group_selector(experiment, part.group, part.name)
                        },
                        "policyTypes": ["Ingress"],
                        "ingress": [{"ports": [{"protocol": "TCP", "port": eps[svc].port}]}],
                    },
                }
            )
    return policies


def services(
    experiment: Experiment,
    ns: str,
    labels: dict[str, str],
    eps: dict[str, Address],
    options: RenderOptions | None = None,
) -> list[dict]:
    """A Service per bound name, selecting the binder's pod; exposed names are LoadBalancers,
    reachable only from the cluster spec's `load_balancer_source_ranges` when it sets them.
    `scrape.unreached` services (their host is `POD_IP`) get none."""
    options = options or RenderOptions()
    ranges = options.cluster.load_balancer_source_ranges if options.cluster else []
    objects = []
    for proc in experiment.processes():
        if not proc.bound:
            continue
        part = part_of(experiment, proc.name)
        group = part.group
        for svc in proc.bound:
            if eps[svc].host == POD_IP:
                continue
            port = eps[svc].port
            spec = {
                "type": "LoadBalancer" if svc in proc.exposed else "ClusterIP",
                "selector": group_selector(experiment, group, part.name),
                "ports": [{"name": "tcp", "protocol": "TCP", "port": port, "targetPort": port}],
            }
            if svc in proc.exposed and ranges:
                spec["loadBalancerSourceRanges"] = list(ranges)
            name = object_name(experiment, options, service_name(svc))
            meta = _meta(name, ns, {**labels, LABEL_GROUP: group})
            objects.append({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": spec})
    return objects


def workload(
    experiment: Experiment,
    part: WorkloadPart,
    ns: str,
    labels: dict[str, str],
    eps: dict[str, Address],
    options: RenderOptions,
    split: bool = False,
) -> dict:
    """The controller of one workload part: a Deployment (`always`) or a Job (the others).

    `split`: the group runs as several parts, so the pod also gets the affinity that puts it on
    the node of the group's other pods.
    """
    selector = group_selector(experiment, part.group, part.name)
    pod_labels = {**labels, **selector}
    spec_ = pod_spec(experiment, part, eps, options)
    spec_["restartPolicy"] = POD_RESTART[part.mode]
    if split:
        group_only = {LABEL_EXPERIMENT: experiment.name, LABEL_GROUP: part.group}
        spec_["affinity"] = {
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": group_only},
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    template = {"metadata": {"labels": pod_labels}, "spec": spec_}
    scrape.mark_pod(template, part.processes, {s: a.port for s, a in eps.items()})
    meta = _meta(object_name(experiment, options, part.name), ns, pod_labels)
    if part.mode == "always":
        spec = {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector},
            "template": template,
        }
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
    spec = {
        "backoffLimit": max(p.restart.max_restarts for p in part.processes)
        if part.mode == "on-failure"
        else 0,
        "completions": 1,
        "parallelism": 1,
        "template": template,
    }
    if part.mode == "never":  # podFailurePolicy needs restartPolicy Never
        spec["podFailurePolicy"] = {
            "rules": [
                {
                    "action": "Ignore",
                    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                },
            ]
        }
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def pod_spec(
    experiment: Experiment,
    group: ProcessGroup | WorkloadPart,
    eps: dict[str, Address],
    options: RenderOptions,
) -> dict:
    """One pod for a group (or part of one): a container per process, /dev/shm, secrets, placement."""
    if isinstance(group, WorkloadPart):
        whole = next(g for g in experiment.groups() if g.name == group.group)
        pool, group_name = whole.node_pool(), group.group
    else:
        pool, group_name = group.node_pool(), group.name
    gpus = sum(p.resources.gpu for p in group.processes)
    placement = pod_placement(pool, gpus, options.cluster)
    memory = sum(p.resources.memory_gb or 0 for p in group.processes)
    shm_gb = options.shm_gb if options.shm_gb is not None else (memory or None)
    shm: dict = {"medium": "Memory"}
    if shm_gb:
        shm["sizeLimit"] = quantity_gb(shm_gb)
    volumes = [{"name": "dshm", "emptyDir": shm}]
    if options.volume_path:
        storage = {"persistentVolumeClaim": {"claimName": options.volume}} if options.volume else {}
        volumes.append({"name": RUN_VOLUME, **(storage or {"emptyDir": {}})})
    for name in sorted({s for p in group.processes for s in secrets_of(p, options)}):
        volumes.append(
            {
                "name": f"secret-{name}"[:63],
                "secret": {
                    "secretName": secret_object(experiment, options, name),
                    "defaultMode": 0o440,
                },
            }
        )
    spec = {
        "containers": [container(experiment, p, eps, options, group_name) for p in group.processes],
        "volumes": volumes,
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 30,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "runAsGroup": RUN_AS,
            "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if placement.node_selector:
        spec["nodeSelector"] = placement.node_selector
    if placement.tolerations:
        spec["tolerations"] = placement.tolerations
    return spec


def container(
    experiment: Experiment,
    proc: Process,
    eps: dict[str, Address],
    options: RenderOptions,
    group: str | None = None,
) -> dict:
    """The container that runs one process (of `group`), with its SYMPH_* env and resources."""
    image = proc.image or experiment.image or options.image
    if not image:
        raise SpecError(
            f"process {proc.name!r} has no container image; set Experiment(image=...) or "
            "Process(image=...), or pass --image (config: kube.image, env SYMPHONY_KUBE_IMAGE)"
        )
    env = process_env(experiment, proc, eps, bind_host="*", group=group)
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if options.volume_path:
        mounts.append({"name": RUN_VOLUME, "mountPath": options.volume_path})
    for name in secrets_of(proc, options):
        path = f"{SECRETS_ROOT}/{name}"
        env[f"{env_prefix('secret-' + name)}_DIR"] = path
        mounts.append({"name": f"secret-{name}"[:63], "mountPath": path, "readOnly": True})
    entries = [{"name": k, "value": v} for k, v in env.items()]
    if any(POD_IP in v for v in env.values()):
        entries.insert(0, _pod_ip_env())
    out = {
        "name": proc.name,
        "image": image,
        "command": proc.argv(),
        "env": entries,
        "resources": resources(proc),
        "volumeMounts": mounts,
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    if proc.cwd:
        out["workingDir"] = proc.cwd
    ports = [{"containerPort": eps[s].port, "protocol": "TCP"} for s in proc.bound]
    if ports:
        out["ports"] = ports
    return out


def _pod_ip_env() -> dict:
    """`SYMPH_POD_IP` from the downward API: what `POD_IP` in later values expands to."""
    return {"name": "SYMPH_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
