"""Team namespace mode of the kube backend: experiments inside one existing, shared namespace.

An admin creates the namespace and binds the team to the Role in
`symphony/schemas/team-namespace-rbac.yaml` (namespaced rights only: no Namespace, no cluster
scope). `symphony launch ... -b kube -o team_namespace=team-a` then:

- refuses the launch when the experiment's marker ConfigMap (`symphony-<experiment>`) exists,
  whoever made it, and leaves it as it is;
- creates the marker first (so a launch racing this one gets 409 and is refused), then the
  NetworkPolicies, Services and workloads, all labelled with experiment and owner;
- finds, describes and deletes an experiment by its label `symphony.io/experiment` only, so
  the other experiments of the namespace are never touched.

Secrets are not copied from another namespace in this mode: a name a process mounts must exist in
the namespace (the team's admin creates it there) unless the launch gets it as a file
(`secret_files`), which creates the Secret `<experiment>-<name>` for this experiment only (it
goes with the experiment at `symphony delete`).
"""

from __future__ import annotations

import time
from typing import Any

from symphony import spec_store
from symphony.backends.base import ExperimentSummary, overall_status
from symphony.errors import BackendError, LaunchRefused
from symphony.kube import ending
from symphony.kube.naming import (
    ANNOTATION_SPEC,
    LABEL_EXPERIMENT,
    LABEL_MANAGED,
    LABEL_OWNER,
    MANAGER,
)
from symphony.kube.status import process_statuses


def selector(experiment: str) -> str:
    """The label selector of one experiment's objects."""
    return f"{LABEL_EXPERIMENT}={experiment}"


def refused(ns: str, experiment: str, marker: Any) -> LaunchRefused:
    """The refusal for a marker that exists (the experiment it marks is left as it is)."""
    owner = ((marker.metadata.labels or {}) if marker is not None else {}).get(LABEL_OWNER, "?")
    return LaunchRefused(
        f"experiment {experiment!r} already runs in namespace {ns!r} (owner {owner}) and was "
        "left as it is; launch under another name (--name)"
    )


def launch(api: Any, objects: list[dict], ns: str, experiment: str, secrets: list[dict]) -> None:
    """Create the marker, then the experiment's own Secrets (`secrets`: from files, named
    `<experiment>-<name>`), then everything else; a failure deletes what this launch created."""
    from symphony.kube.api import short_error

    marker_name = objects[0]["metadata"]["name"]
    existing = api.read_config_map(ns, marker_name)
    if existing is not None:
        raise refused(ns, experiment, existing)
    try:
        api.create(objects[0])
    except Exception as err:
        if getattr(err, "status", None) == 409:
            raise refused(ns, experiment, api.read_config_map(ns, marker_name)) from None
        raise BackendError(
            f"cannot create ConfigMap {marker_name!r} in namespace {ns!r}: {short_error(err)}; "
            f"check that the namespace exists and your Role there "
            f"(`kubectl auth can-i create configmaps -n {ns}`)"
        ) from err
    try:
        for secret in secrets:
            api.create(secret)
        ending.create(api, objects[1:])
    except Exception as err:
        api.delete_labelled(ns, selector(experiment), force=True)
        raise BackendError(
            f"launch failed: {short_error(err)}; experiment {experiment!r} was removed from "
            f"namespace {ns!r} again"
        ) from err


def delete(
    api: Any, ns: str, experiment: str, *, force: bool, wait_s: float, poll_s: float
) -> bool:
    """Delete the experiment's objects; True once none of its pods is left (within `wait_s`)."""
    api.delete_labelled(ns, selector(experiment), force=force)
    deadline = time.monotonic() + wait_s
    while api.pods(ns, selector(experiment)):
        if time.monotonic() > deadline:
            return False
        time.sleep(poll_s)  # polling with a deadline: the API has no "deleted" callback
    return True


def spec_text(api: Any, ns: str, experiment: str) -> str | None:
    """The spec stored on the experiment's marker (`symphony.spec_store`; None without one)."""
    marker = api.read_config_map(ns, f"symphony-{experiment}")
    return (marker.metadata.annotations or {}).get(ANNOTATION_SPEC) if marker else None


def summaries(api: Any, ns: str, backend: str, skip: set[str]) -> list[ExperimentSummary]:
    """One row per marker in the team namespace (experiments in `skip` left out)."""
    rows = []
    managed = f"{LABEL_MANAGED}={MANAGER}"
    pods = api.pods(ns, managed)
    for marker in api.config_maps(ns, managed):
        labels = marker.metadata.labels or {}
        name = labels.get(LABEL_EXPERIMENT)
        if not name or name in skip or marker.metadata.name != f"symphony-{name}":
            continue  # (an experiment's shared-env ConfigMaps carry its labels too)
        mine = [p for p in pods if (p.metadata.labels or {}).get(LABEL_EXPERIMENT) == name]
        groups = _groups((marker.metadata.annotations or {}).get(ANNOTATION_SPEC))
        states = [s.state for s in process_statuses(mine, groups)]
        status = overall_status(states) if states else "pending"
        if status == "running" and not mine and not api.workloads(ns, selector(name)):
            status = ending.ENDED  # the cluster cleaned up after its end (not yet started: Jobs)
        created = marker.metadata.creation_timestamp
        rows.append(
            ExperimentSummary(
                name=name,
                backend=backend,
                owner=labels.get(LABEL_OWNER, "unknown"),
                status=status,
                created=created.timestamp() if created else 0.0,
                processes=len(states),
                running=sum(s == "running" for s in states),
            )
        )
    return rows


def _groups(text: str | None) -> dict[str, list[str]]:
    exp = spec_store.decode(text)
    if exp is None:
        return {}
    return {g.name: [p.name for p in g.processes] for g in exp.groups()}
