"""The kube backend's options: keyword options (CLI `-o KEY=VALUE`), else env SYMPHONY_KUBE_<KEY>.

The symphony CLI also reads defaults from the config file's `backend_options.kube` mapping, e.g.::

    backend_options:
      kube:
        context: gke_my-project_us-west1_surreal
        image: us-docker.pkg.dev/my-project/surreal/surreal:cpu
        cluster_spec: ~/clusters/surreal/cloudwise.yaml
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from symphony.errors import BackendError

ENV_PREFIX = "SYMPHONY_KUBE_"
CLEANUP_AFTER_S = 300
"""The default `cleanup_after_s`: the leader's logs stay readable five minutes after its end."""


@dataclass
class KubeOptions:
    """Every option the kube backend accepts.

    Attributes:
        context: kubeconfig context (default: the current one).
        kubeconfig: kubeconfig file (default: $KUBECONFIG or ~/.kube/config).
        host: talk to this API URL without credentials (tests, `kubectl proxy`).
        namespace: namespace for the experiment (default: its name).
        team_namespace: run inside this existing namespace (an admin's, shared by a team, with
            namespaced RBAC only) beside other experiments, instead of a namespace per experiment.
        image: image for processes that name none.
        cluster_spec: path of the cloudwise.yaml of the cluster (pool taints, capacity checks).
        output: with --dry-run, write one YAML file per object into this folder.
        secrets: process name -> names of Secrets to mount (adds to each Process's own list).
        secrets_namespace: where launch copies each named Secret from into the experiment's
            namespace (the values pass through memory only, never through a manifest).
        secret_files: secret name -> local file (or folder): launch creates the Secret from it.
        shm_gb: /dev/shm size limit per pod (default: the pod's memory request).
        volume: a PersistentVolumeClaim in `team_namespace` (needs it: a claim is mounted only
            in its own namespace, and a namespace of its own is created by launch), mounted
            read-write at `volume_path` in every container (the run storage every pod shares).
        volume_path: where every container mounts the run storage (the `volume` claim, else a
            scratch volume of its pod); default none (`surreal launch` uses /runs).
        cleanup_after_s: seconds after the Job of an `Experiment.ends_with` process (say, a
            trainer) finished, by its budget or by failing past its restarts, before the cluster
            deletes the experiment's pods (Kubernetes' TTL-after-finished controller and garbage
            collector: `symphony.kube.ending`); -1 keeps them until `symphony delete`.
        delete_wait_s: how long `delete` waits for the namespace to be gone.
        poll_s: seconds between status polls of an attached launch and of `delete`.
    """

    context: str | None = None
    kubeconfig: str | None = None
    host: str | None = None
    namespace: str | None = None
    team_namespace: str | None = None
    image: str | None = None
    cluster_spec: str | None = None
    output: str | None = None
    secrets: dict[str, list[str]] = field(default_factory=dict)
    secrets_namespace: str = "symphony-secrets"
    secret_files: dict[str, str] = field(default_factory=dict)
    shm_gb: float | None = None
    volume: str | None = None
    volume_path: str | None = None
    cleanup_after_s: int = CLEANUP_AFTER_S
    delete_wait_s: float = 300.0
    poll_s: float = 2.0


_KNOWN = tuple(KubeOptions.__dataclass_fields__)


def resolve(options: dict[str, Any]) -> KubeOptions:
    """Merge the caller's options over env `SYMPHONY_KUBE_<KEY>` (context, image, namespace, ...).

    Raises:
        BackendError: an unknown option, naming the known ones.
    """
    merged: dict[str, Any] = {}
    for key in (
        "context",
        "kubeconfig",
        "host",
        "namespace",
        "team_namespace",
        "image",
        "cluster_spec",
    ):
        value = os.environ.get(ENV_PREFIX + key.upper())
        if value:
            merged[key] = value
    merged.update({k: v for k, v in options.items() if v is not None})
    if "owner" in merged:
        raise BackendError(
            "the kube `owner` option is gone: the owner is the launching user "
            "(set SYMPHONY_OWNER to record another name, e.g. for a service account)"
        )
    unknown = sorted(set(merged) - set(_KNOWN))
    if merged.get("team_namespace") and merged.get("namespace"):
        raise BackendError(
            "give either namespace= (a namespace per experiment) or team_namespace= (an "
            "existing namespace shared by a team), not both"
        )
    if unknown:
        raise BackendError(
            f"unknown kube option(s) {unknown}; the kube backend accepts: {', '.join(_KNOWN)}"
        )
    if merged.get("volume") and not merged.get("volume_path"):
        raise BackendError(
            f"volume={merged['volume']} needs volume_path=PATH, where the containers mount it"
        )
    if merged.get("volume") and not merged.get("team_namespace"):
        raise BackendError(
            f"volume={merged['volume']}: only pods of the claim's own namespace can mount it, and "
            "without team_namespace launch creates the experiment's namespace itself (it refuses "
            "one that exists), so no claim can be in it; create a namespace and a ReadWriteMany "
            f"claim {merged['volume']!r} in it once, then launch there with "
            f"-o team_namespace=NAMESPACE -o volume={merged['volume']}, or keep the run's files in "
            "an object store instead"
        )
    cleanup = merged.get("cleanup_after_s", CLEANUP_AFTER_S)
    if isinstance(cleanup, bool) or not isinstance(cleanup, int) or cleanup < -1:
        raise BackendError(
            f"cleanup_after_s={cleanup!r}: give whole seconds >= 0 (how long the pods stay once "
            "the ends_with process's Job finished), or -1 to keep them until `symphony delete`"
        )
    for key in ("cluster_spec", "kubeconfig", "output"):
        if merged.get(key):
            merged[key] = str(Path(merged[key]).expanduser())
    return KubeOptions(**merged)
