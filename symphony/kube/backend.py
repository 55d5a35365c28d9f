"""The kube backend: an experiment is a labelled namespace on a Kubernetes cluster.

Rendering is `symphony.kube.manifests` (pure); API calls are `symphony.kube.api`; pod to
status translation is `symphony.kube.status`. This class only wires them together.
Experiments are found through their namespaces (label `symphony.io/experiment`), so teammates on
one cluster see each other's experiments even without sharing a symphony state directory.
Attached (`detach=False`), launch polls the pods until every process ended; Ctrl-C deletes the
experiment's namespace. Detached, it returns once every object is created.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import yaml

from symphony import spec_store
from symphony.backends.base import (
    ALIVE_STATES,
    UNKNOWN,
    Backend,
    Capabilities,
    ExperimentStatus,
    ExperimentSummary,
    ProcessStatus,
    overall_status,
)
from symphony.errors import BackendError, ExperimentNotFound, LaunchRefused
from symphony.kube import ending
from symphony.kube import team as kube_team
from symphony.kube.manifests import render
from symphony.kube.naming import (
    ANNOTATION_SPEC,
    LABEL_EXPERIMENT,
    LABEL_GROUP,
    LABEL_MANAGED,
    LABEL_OWNER,
    MANAGER,
    SECRETS_ROOT,
    RenderOptions,
    namespace_of,
)
from symphony.kube.options import KubeOptions, resolve
from symphony.kube.output import plan_text
from symphony.kube.secrets import secret_objects
from symphony.kube.status import group_pod, pod_phases, process_statuses
from symphony.ownership import current_owner
from symphony.records import ExperimentRecord, Records
from symphony.spec import Experiment


class KubeBackend(Backend):
    """Launch and manage experiments on Kubernetes (see docs/kubernetes.md)."""

    name = "kube"
    capabilities = Capabilities(
        runs_in_image=True,
        secret_mount_root=SECRETS_ROOT,
        run_volume_option="volume_path",
        stays_attached=False,
        plan_is_submission=True,
        logs_on_launch_disk=False,
    )

    def __init__(self, records: Records | None = None, **options: Any) -> None:
        super().__init__(records, **options)
        self.config: KubeOptions = resolve(options)
        self._api = None

    @property
    def api(self):  # noqa: ANN201 - KubeApi, imported lazily with the kubernetes client
        """The API client wrapper, connected on first use."""
        if self._api is None:
            from symphony.kube.api import KubeApi

            self._api = KubeApi.connect(
                self.config.context, self.config.kubeconfig, self.config.host
            )
        return self._api

    def render_options(self, owner: str | None = None) -> RenderOptions:
        """The options rendering needs (loads the cloudwise cluster spec if one is set).

        `owner` labels every object (default: the current user, `symphony.ownership`).
        """
        cluster = None
        if self.config.cluster_spec:
            from cloudwise.spec import ClusterSpec

            cluster = ClusterSpec.load(self.config.cluster_spec)
        return RenderOptions(
            owner=owner or current_owner(),
            namespace=self.config.team_namespace or self.config.namespace,
            team=bool(self.config.team_namespace),
            image=self.config.image,
            cluster=cluster,
            secrets=self.config.secrets,
            shm_gb=self.config.shm_gb,
            volume=self.config.volume,
            volume_path=self.config.volume_path,
            cleanup_after_s=self.cleanup_after_s(),
            own_secrets=frozenset(self.config.secret_files),
        )

    def manifests(self, experiment: Experiment) -> list[dict]:
        """Every object `launch` creates, in order (Secrets excluded: they are copied by value)."""
        return render(experiment, self.render_options())

    def plan(self, experiment: Experiment) -> str:
        """The manifests as YAML; with the `output` option also written there (and, when they
        are large, a summary instead: `kube_output.plan_text`). Touches no cluster."""
        return plan_text(self.manifests(experiment), self.config.output or None)

    def cleanup_after_s(self) -> int | None:
        """The `cleanup_after_s` option (None for -1: the pods stay until `symphony delete`)."""
        return None if self.config.cleanup_after_s < 0 else self.config.cleanup_after_s

    def ends_alone(self, name: str) -> str | None:
        """The cluster's cleanup (`symphony.kube.ending`), unless cleanup_after_s is -1."""
        seconds = self.cleanup_after_s()
        if seconds is None:
            return None
        return (
            f"{seconds} s after its Job finished the cluster deletes the other processes' pods "
            f"(kube option cleanup_after_s; -1 keeps them until `symphony delete {name}`)"
        )

    def cluster_spec(self) -> str | None:
        """The `cluster_spec` option: the cloudwise spec of the cluster (None: none given)."""
        return self.config.cluster_spec

    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Create the namespace, copy the Secrets in, then the policies, services and workloads.

        In team mode (`team_namespace`), inside that namespace instead (see `kube_team`).
        """
        from symphony.kube.api import short_error

        options = self.render_options(record.owner)
        objects = render(experiment, options)
        ns = namespace_of(experiment, options)
        record.data["cleanup_after_s"] = options.cleanup_after_s
        if options.team:
            context = {"context": self.config.context, "host": self.config.host}
            secrets = secret_objects(
                self.api, self.config, experiment, ns, options
            )  # refused before anything is made
            kube_team.launch(self.api, objects, ns, experiment.name, secrets)
            record.data.update({"namespace": ns, "team": True, **context})
            record.set_status("running")
            if not detach:
                self._attend(record)
            return
        existing = self.api.read_namespace(ns)
        if existing is not None:
            raise _taken(ns, experiment.name, existing)
        try:
            self.api.create(objects[0])
        except Exception as err:
            if getattr(err, "status", None) == 409:  # created by someone else meanwhile
                raise _taken(ns, experiment.name, self.api.read_namespace(ns)) from None
            raise BackendError(
                f"cannot create namespace {ns!r}: {short_error(err)}; check the context "
                "(`kubectl config current-context`) and your rights (`kubectl auth can-i create namespaces`)"
            ) from err
        # ours from here on: recorded only now, so a failed launch never deletes another's namespace
        record.data.update(
            {"namespace": ns, "context": self.config.context, "host": self.config.host}
        )
        record.save()
        try:
            for secret in secret_objects(self.api, self.config, experiment, ns, options):
                self.api.create(secret)
            ending.create(self.api, objects[1:])
        except Exception as err:
            self.api.delete_namespace(ns, wait_s=None)
            raise BackendError(
                f"launch failed: {short_error(err)}; namespace {ns!r} was deleted again"
            ) from err
        record.set_status("running")
        if not detach:
            self._attend(record)

    def _attend(self, record: ExperimentRecord) -> None:
        """Attached launch: poll until every process ended; Ctrl-C deletes the experiment."""
        try:
            while True:
                status = self.describe(record)
                if status.processes and not any(p.state in ALIVE_STATES for p in status.processes):
                    break
                time.sleep(
                    self.config.poll_s
                )  # the pods live on the cluster; there is nothing to wait on
        except KeyboardInterrupt:
            self.delete(record, force=False)
            record.data["exit_code"] = 130
            record.set_status("stopped")
            return
        record.data["exit_code"] = 0 if status.status == "finished" else 1
        record.set_status(status.status)

    def _use(self, record: ExperimentRecord) -> None:
        """Talk to the cluster the record was launched on, unless a context/host was given now."""
        data = record.data or {}
        if self.config.context or self.config.host or not (data.get("context") or data.get("host")):
            return
        if self._api is None:
            from symphony.kube.api import KubeApi

            self._api = KubeApi.connect(
                data.get("context"), self.config.kubeconfig, data.get("host")
            )

    def _namespace(self, record: ExperimentRecord) -> str:
        self._use(record)
        ns = (record.data or {}).get("namespace")
        if ns:
            return ns
        if self.config.team_namespace:
            return self.config.team_namespace
        if record.path is not None:  # a record of this state directory whose launch created nothing
            raise ExperimentNotFound(
                f"experiment {record.name!r} created no namespace (its launch did not get that far)"
            )
        found = self.api.namespaces(f"{LABEL_EXPERIMENT}={record.name}")
        if not found:
            raise ExperimentNotFound(
                f"no namespace on the cluster holds experiment {record.name!r}; see `symphony list`"
            )
        return found[0].metadata.name

    def _spec(self, record: ExperimentRecord, ns: str) -> Experiment:
        """The experiment's spec: its record's, else the one stored on the cluster (a
        teammate's experiment: the marker's in team mode, else the namespace's)."""
        if record.spec:
            text = yaml.safe_dump(record.spec)
        else:
            text = kube_team.spec_text(self.api, ns, record.name) if self._team(record) else None
            if text is None:
                meta = self.api.read_namespace(ns)
                text = ((meta.metadata.annotations or {}) if meta else {}).get(ANNOTATION_SPEC)
        exp = spec_store.decode(text)
        if exp is None:
            raise BackendError(
                f"experiment {record.name!r} has no spec in its record or namespace {ns!r}"
            )
        return exp

    def _groups(self, record: ExperimentRecord, ns: str) -> dict[str, list[str]]:
        return _groups_of(self._spec(record, ns))

    def _team(self, record: ExperimentRecord) -> bool:
        return bool((record.data or {}).get("team") or self.config.team_namespace)

    def _pods(self, ns: str, experiment: str) -> list[Any]:
        """The experiment's pods (a team namespace also holds other experiments' pods)."""
        pods = self.api.pods(ns, kube_team.selector(experiment))
        return [p for p in pods if (p.metadata.labels or {}).get(LABEL_EXPERIMENT) == experiment]

    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """Each process with its container state, restarts, pod and node.

        A namespace that is gone (deleted behind symphony's back) makes every process `unknown`.
        """
        ns = self._namespace(record)
        if (
            record.path is not None
            and not self._team(record)
            and self.api.read_namespace(ns) is None
        ):
            processes = [
                ProcessStatus(p, UNKNOWN, group=g, location=f"namespace {ns} is gone")
                for g, procs in _groups_from_spec(yaml.safe_dump(record.spec)).items()
                for p in procs
            ]
            return self.status_from_record(record, processes, namespace=ns, pods={})
        pods = self._pods(ns, record.name)
        spec = self._spec(record, ns)
        processes = process_statuses(pods, _groups_of(spec))
        ends_with = spec.ends_with
        cleanup = record.data.get("cleanup_after_s", ending.UNKNOWN_TTL)  # None: launched to stay
        if ending.remember(record.data, ends_with, processes) and record.path is not None:
            record.save()  # the cluster deletes the leader's pod, and its exit code, later
        cleaned = bool(ends_with) and not pods and not self._workloads(record, ns)
        if cleaned:
            processes = ending.cleaned_up(processes, record.data.get("ending"), ends_with)
        status = self.status_from_record(record, processes, namespace=ns, pods=pod_phases(pods))
        states = {p.name: p.state for p in processes}
        status.status = ending.outcome(states, ends_with, cleaned) or status.status
        told = ending.tell(status.processes, record.name, ends_with, cleanup, record.data)
        if told:
            status.details["ended"] = told
        return status

    def _workloads(self, record: ExperimentRecord, ns: str) -> list[str]:
        """Its Jobs and Deployments (none once the cluster cleaned up after its end)."""
        return self.api.workloads(ns, kube_team.selector(record.name))

    def _locate(self, record: ExperimentRecord, process: str) -> tuple[str, str]:
        ns = self._namespace(record)
        groups = self._groups(record, ns)
        group = next((g for g, procs in groups.items() if process in procs), None)
        if group is None:
            raise BackendError(
                f"no process {process!r} in {record.name!r}; processes: {sum(groups.values(), [])}"
            )
        pod = group_pod(self._pods(ns, record.name), group, process)
        if pod is None:
            raise BackendError(
                f"process {process!r} has no pod: not scheduled yet, or deleted by the cluster "
                f"after the experiment ended (cleanup_after_s); see `symphony describe {record.name}`"
            )
        return ns, pod.metadata.name

    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """The process's container output (its newest pod); `follow` streams it."""
        ns, pod = self._locate(record, process)
        return self.api.logs(ns, pod, process, follow=follow, tail=tail)

    def exec(self, record: ExperimentRecord, process: str, command: list[str]) -> int:
        """Run `command` in the process's container; returns its exit code."""
        ns, pod = self._locate(record, process)
        return self.api.exec(ns, pod, process, command, out=sys.stdout, err=sys.stderr)

    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """Delete the namespace and wait until it is gone (BackendError if it outlives the wait)."""
        try:
            ns = self._namespace(record)
        except ExperimentNotFound:
            if force:
                return
            raise
        if self._team(record):
            wait = self.config.delete_wait_s
            if not kube_team.delete(
                self.api, ns, record.name, force=force, wait_s=wait, poll_s=self.config.poll_s
            ):
                raise BackendError(
                    f"pods of {record.name!r} are still in namespace {ns!r} after {wait:.0f} s; "
                    f"check `kubectl -n {ns} get pods -l {kube_team.selector(record.name)}`"
                )
            return
        if not self.api.delete_namespace(
            ns, force=force, wait_s=self.config.delete_wait_s, poll_s=self.config.poll_s
        ):
            raise BackendError(
                f"namespace {ns!r} is still terminating after {self.config.delete_wait_s:.0f} s; "
                f"check `kubectl get ns {ns} -o yaml` for finalizers"
            )

    def list(self) -> list[ExperimentSummary]:
        """Every symphony namespace on the cluster, with owner and live status.

        Experiments recorded here show as `describe` shows them (the same status, also when
        their namespace is gone); the others from their namespaces' labels.
        """
        rows = []
        recorded: set[str] = set()
        for record in self.records.all():
            if record.backend != self.name:
                continue
            try:
                status = self.describe(record)
            except ExperimentNotFound:
                continue  # its launch created nothing (yet)
            recorded.add(status.details.get("namespace", ""))
            rows.append(status.summary())
        if self.config.team_namespace:
            names = {r.name for r in rows}
            return rows + kube_team.summaries(
                self.api, self.config.team_namespace, self.name, names
            )
        pods = self.api.all_pods(f"{LABEL_MANAGED}={MANAGER}")
        for ns in self.api.namespaces(f"{LABEL_MANAGED}={MANAGER}"):
            if ns.metadata.name in recorded:
                continue
            labels = ns.metadata.labels or {}
            mine = [p for p in pods if p.metadata.namespace == ns.metadata.name]
            groups = _groups_from_spec((ns.metadata.annotations or {}).get(ANNOTATION_SPEC))
            states = [s.state for s in process_statuses(mine, groups or _groups_from_pods(mine))]
            created = ns.metadata.creation_timestamp
            status = (
                "deleting"
                if (ns.status and ns.status.phase == "Terminating")
                else (overall_status(states) if states else "pending")
            )
            if status == "running" and not mine and groups:  # no pod: not yet, or no more?
                name = labels.get(LABEL_EXPERIMENT, ns.metadata.name)
                if not self.api.workloads(ns.metadata.name, kube_team.selector(name)):
                    status = ending.ENDED  # the cluster cleaned up after its end
            rows.append(
                ExperimentSummary(
                    name=labels.get(LABEL_EXPERIMENT, ns.metadata.name),
                    backend=self.name,
                    owner=labels.get(LABEL_OWNER, "unknown"),
                    status=status,
                    created=created.timestamp() if created else 0.0,
                    processes=len(states),
                    running=sum(s == "running" for s in states),
                )
            )
        return rows


def _taken(ns: str, experiment: str, existing: Any) -> LaunchRefused:
    """The refusal for a namespace that exists already (it is left as it is)."""
    labels = (existing.metadata.labels or {}) if existing is not None else {}
    owner = labels.get(LABEL_OWNER)
    whose = f"experiment {labels.get(LABEL_EXPERIMENT)!r} of {owner}" if owner else "not symphony's"
    return LaunchRefused(
        f"namespace {ns!r} already exists on the cluster ({whose}) and was left as it is; "
        f"launch under another name (--name) or namespace (-o namespace=NAME)"
        + (f", or `symphony delete {experiment} -b kube` it if it is yours" if owner else "")
    )


def _groups_from_spec(text: str | None) -> dict[str, list[str]]:
    """Group name -> process names, from a stored spec (`symphony.spec_store`; {} for none)."""
    exp = spec_store.decode(text)
    return {} if exp is None else _groups_of(exp)


def _groups_of(exp: Experiment) -> dict[str, list[str]]:
    return {g.name: [p.name for p in g.processes] for g in exp.groups()}


def _groups_from_pods(pods: list[Any]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for pod in pods:
        group = (pod.metadata.labels or {}).get(LABEL_GROUP)
        if group and pod.spec is not None:  # a group mixing restart modes has a pod per mode
            known = groups.setdefault(group, [])
            known += [c.name for c in pod.spec.containers if c.name not in known]
    return groups
