"""What Kubernetes' Deployment and Job controllers and the kubelet do with symphony's workloads,
emulated over a `symphony.kube.testing_kube.KubeEndpoint` (tests only; no real cluster can run here).

The rules follow the Kubernetes documentation for the fields symphony sets, and nothing else:

- a Deployment (`replicas: 1`) keeps one pod; a pod that is gone is replaced;
- a Job makes a pod until one succeeded (`Complete`: never again) or its failures exceed
  `backoffLimit` (`Failed`); a pod lost to a disruption is replaced without counting when its
  `podFailurePolicy` ignores `DisruptionTarget`;
- the kubelet applies the pod's `restartPolicy` to each container on its own: `Always` restarts
  it after any exit, `OnFailure` after a non-zero one (each restart counts toward the Job's
  `backoffLimit`), `Never` leaves it terminated; the pod succeeds when every container exited 0
  and fails when all ended and one did not;
- the TTL-after-finished controller deletes a Job that completed or failed once its
  `ttlSecondsAfterFinished` passed, and the garbage collector deletes every object whose owners
  (`ownerReferences`, by uid) are all gone; a controller's pods are owned by it.

Use: `Controllers(endpoint).reconcile()` after a launch creates the pods; `exit(ns, process,
code)` ends a process's container as if its program exited; `lose_pod(ns, process)` deletes its
pod as a node failure would (then `reconcile()` again); `clean_up()` stands for the time passing
past every finished Job's `ttlSecondsAfterFinished` (no clock: tests never sleep).
"""

from __future__ import annotations

import copy
import datetime
import itertools
import uuid
from typing import Any

from symphony.kube.naming import LABEL_EXPERIMENT
from symphony.kube.testing_kube import KubeEndpoint


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Controllers:
    """The emulated controllers of one endpoint; `jobs` holds each Job's status."""

    def __init__(self, endpoint: KubeEndpoint) -> None:
        self.endpoint = endpoint
        self.jobs: dict[tuple[str, str], dict[str, Any]] = {}
        self._serial = itertools.count(1)

    # --- controllers -------------------------------------------------------------------------
    def reconcile(self) -> None:
        """Give every Deployment its pod and every unfinished Job its next pod."""
        for kind in ("Deployment", "Job"):
            for obj in self.endpoint.stored(kind):
                ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
                if self._pods(ns, name, alive=True):
                    continue
                if kind == "Job":
                    status = self.jobs.setdefault(
                        (ns, name), {"succeeded": 0, "failed": 0, "condition": None}
                    )
                    if status["condition"] is not None:
                        continue  # Complete or Failed: a Job never starts again
                self._create_pod(ns, name, obj)

    def clean_up(self) -> list[str]:
        """The TTL-after-finished controller, then the garbage collector, once every finished
        Job's TTL has passed; returns the `Kind/name` of every object they deleted."""
        gone = []
        for job in self.endpoint.stored("Job"):
            meta = job["metadata"]
            finished = (self.jobs.get((meta["namespace"], meta["name"])) or {}).get("condition")
            if finished and "ttlSecondsAfterFinished" in job["spec"]:
                self.endpoint.delete("Job", meta["namespace"], meta["name"])
                gone.append(f"Job/{meta['name']}")
        while True:  # dependents of dependents (a Deployment's pods) go in the next round
            live = {
                o["metadata"].get("uid")
                for kind in ("Job", "Deployment", "Pod")
                for o in self.endpoint.stored(kind)
            }
            orphans = [
                o
                for kind in ("Job", "Deployment", "Pod")
                for o in self.endpoint.stored(kind)
                if (refs := o["metadata"].get("ownerReferences"))
                and all(r.get("uid") for r in refs)
                and not any(r["uid"] in live for r in refs)
            ]
            if not orphans:
                return gone
            for o in orphans:
                meta = o["metadata"]
                self.endpoint.delete(o["kind"], meta["namespace"], meta["name"])
                gone.append(f"{o['kind']}/{meta['name']}")

    def _create_pod(self, ns: str, workload: str, controller: dict[str, Any]) -> None:
        template = controller["spec"]["template"]
        spec = copy.deepcopy(template["spec"])
        now = _now()
        self.endpoint.add_pod(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"{workload}-{next(self._serial)}",
                    "namespace": ns,
                    "uid": str(uuid.uuid4()),
                    "labels": dict(template["metadata"]["labels"]),
                    "ownerReferences": [
                        {
                            "apiVersion": controller["apiVersion"],
                            "kind": controller["kind"],
                            "name": workload,
                            "uid": controller["metadata"].get("uid"),
                        }
                    ],
                },
                "spec": {**spec, "nodeName": "node-1"},
                "status": {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": c["name"],
                            "ready": True,
                            "restartCount": 0,
                            "image": c["image"],
                            "imageID": "",
                            "state": {"running": {"startedAt": now}},
                        }
                        for c in spec["containers"]
                    ],
                },
            }
        )

    def _pods(self, ns: str, workload: str, alive: bool = False) -> list[dict[str, Any]]:
        pods = [
            p
            for p in self.endpoint.stored("Pod")
            if p["metadata"]["namespace"] == ns and _owner(p) == workload
        ]
        if alive:
            pods = [p for p in pods if p["status"]["phase"] in ("Pending", "Running")]
        return pods

    def _controller(self, ns: str, workload: str) -> dict[str, Any]:
        for kind in ("Deployment", "Job"):
            for obj in self.endpoint.stored(kind):
                if obj["metadata"]["namespace"] == ns and obj["metadata"]["name"] == workload:
                    return obj
        raise KeyError(workload)

    def _live_pod(self, ns: str, process: str, experiment: str | None) -> dict[str, Any]:
        for pod in self.endpoint.stored("Pod"):
            names = [c["name"] for c in pod["spec"]["containers"]]
            labels = pod["metadata"].get("labels") or {}
            if pod["metadata"]["namespace"] == ns and process in names:
                if experiment is not None and labels.get(LABEL_EXPERIMENT) != experiment:
                    continue
                if pod["status"]["phase"] in ("Pending", "Running"):
                    return pod
        raise LookupError(f"no live pod runs {process!r} in {ns!r}")

    def exit(self, ns: str, process: str, code: int, experiment: str | None = None) -> None:
        """The program of `process` (of `experiment`, in a namespace a team shares) exited with
        `code`: apply the pod's restartPolicy."""
        pod = self._live_pod(ns, process, experiment)
        workload = _owner(pod)
        controller = self._controller(ns, workload)
        policy = pod["spec"]["restartPolicy"]
        statuses = pod["status"]["containerStatuses"]
        cs = next(c for c in statuses if c["name"] == process)
        restart = policy == "Always" or (policy == "OnFailure" and code != 0)
        if restart and controller["kind"] == "Job" and policy == "OnFailure":
            used = sum(c["restartCount"] for c in statuses)
            restart = used < controller["spec"].get("backoffLimit", 6)
            if not restart:  # the Job failed: its pod is ended
                self._finish_job(ns, workload, "Failed")
        if restart:
            cs["restartCount"] += 1
            cs["state"] = {"running": {"startedAt": _now()}}
        else:
            cs["state"] = {"terminated": {"exitCode": code, "finishedAt": _now()}}
        ended = [c["state"].get("terminated") for c in statuses]
        if all(ended):
            pod["status"]["phase"] = (
                "Succeeded" if all(t["exitCode"] == 0 for t in ended) else "Failed"
            )
            if controller["kind"] == "Job":
                self._pod_ended(ns, workload, controller, pod["status"]["phase"])
        self.endpoint.add_pod(pod)

    def _pod_ended(self, ns: str, workload: str, job: dict[str, Any], phase: str) -> None:
        status = self.jobs.setdefault(
            (ns, workload), {"succeeded": 0, "failed": 0, "condition": None}
        )
        if status["condition"] is not None:
            return
        if phase == "Succeeded":
            status["succeeded"] += 1
            status["condition"] = "Complete"
        else:
            status["failed"] += 1
            if status["failed"] > job["spec"].get("backoffLimit", 6):
                status["condition"] = "Failed"

    def _finish_job(self, ns: str, workload: str, condition: str) -> None:
        status = self.jobs.setdefault(
            (ns, workload), {"succeeded": 0, "failed": 0, "condition": None}
        )
        status["condition"] = condition

    def lose_pod(self, ns: str, process: str) -> None:
        """The node of `process`'s pod failed: the pod is gone (a disruption, not a failure)."""
        pod = self._live_pod(ns, process, None)
        workload = _owner(pod)
        controller = self._controller(ns, workload)
        self.endpoint.delete_pod(ns, pod["metadata"]["name"])
        if controller["kind"] == "Job":
            rules = (controller["spec"].get("podFailurePolicy") or {}).get("rules", [])
            ignored = any(
                r["action"] == "Ignore"
                and any(c["type"] == "DisruptionTarget" for c in r.get("onPodConditions", []))
                for r in rules
            )
            if not ignored:
                self._pod_ended(ns, workload, controller, "Failed")


def _owner(pod: dict[str, Any]) -> str:
    """The name of the controller that made `pod`."""
    return pod["metadata"]["ownerReferences"][0]["name"]
