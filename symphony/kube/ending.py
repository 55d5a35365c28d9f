"""How a kube experiment ends by itself (`Experiment.ends_with`) with nothing of symphony's running.

A detached launch leaves nothing behind that watches the experiment, so the end is left to two
controllers every Kubernetes cluster runs (documented behaviour, no RBAC beyond creating Jobs):

- the TTL-after-finished controller deletes a Job `ttlSecondsAfterFinished` seconds after it
  completed or failed (past its `backoffLimit`), with its dependents;
- the garbage collector deletes every object whose owners (`metadata.ownerReferences`, by uid)
  are all gone, and with it that object's own pods.

So rendering (`lead`) gives each Job whose pod runs an `ends_with` process (a *leader*)
`ttlSecondsAfterFinished: cleanup_after_s` and puts it first among the workloads, and launch
(`create`) creates the leaders first, then every other Job and Deployment owned by them. When the
learner's Job finishes, its pods and every other workload's pods are deleted `cleanup_after_s`
later, and with them the hold on the nodes (the cluster autoscaler then removes idle nodes).
The Namespace (or team marker), Services, NetworkPolicies and ConfigMaps stay until `symphony
delete`: they hold no node, and the stored spec keeps the experiment listable.

Limits, said where they apply:

- A leader's uid exists only once it is created, so a `--dry-run -o DIR` manifest has the TTL
  but no owner references: `kubectl apply -f DIR` of it deletes the leader only.
- A leader that shares its pod with processes that do not end keeps its Job from finishing;
  a leader restarted `always` runs in a Deployment, which never finishes: neither cascades.
- With leaders in several pods, an object goes once all its owners are gone, i.e. once every
  leader finished (plus the TTL); `Experiment.ends_with` elsewhere ends at the first.
- The pods' logs go with them (`symphony logs` reads them until then).
"""

from __future__ import annotations

from typing import Any

from symphony.states import ALIVE_STATES, EXITED, FAILED, STOPPED, UNKNOWN, ended_leader

WORKLOADS = ("Job", "Deployment")
UNKNOWN_TTL = "unknown"
"""`cleanup` for `tell` when the launch's `cleanup_after_s` is not known here (a teammate's)."""
DELETED = "deleted by the cluster"
ENDED = "ended"
"""The status of an experiment whose pods the cluster deleted before anyone saw how its leader
ended (the exit code went with the pod)."""


def _runs(workload: dict, names: list[str]) -> bool:
    containers = workload["spec"]["template"]["spec"]["containers"]
    return any(c["name"] in names for c in containers)


def lead(workloads: list[dict], ends_with: list[str], cleanup_after_s: int | None) -> list[dict]:
    """The workloads with the leaders' Jobs first, each given `ttlSecondsAfterFinished`
    (unchanged when `cleanup_after_s` is None: the experiment stays until `symphony delete`)."""
    if cleanup_after_s is None or not ends_with:
        return workloads
    leaders = [w for w in workloads if w["kind"] == "Job" and _runs(w, ends_with)]
    for job in leaders:
        job["spec"]["ttlSecondsAfterFinished"] = int(cleanup_after_s)
    return leaders + [w for w in workloads if not any(w is j for j in leaders)]


def is_leader(obj: dict) -> bool:
    """A Job `lead` marked: the one whose end ends the experiment."""
    return obj["kind"] == "Job" and "ttlSecondsAfterFinished" in obj["spec"]


def create(api: Any, objects: list[dict]) -> None:
    """Create `objects` in order; every workload after the leaders is owned by them (their
    uids, from the API server's answers), so the garbage collector deletes it after them."""
    owners: list[dict] = []
    for obj in objects:
        if obj["kind"] in WORKLOADS and owners and not is_leader(obj):
            obj["metadata"]["ownerReferences"] = owners
        uid = api.create(obj)
        if is_leader(obj):
            owners.append(
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": obj["metadata"]["name"],
                    "uid": uid,
                }
            )


def remember(data: dict, ends_with: list[str], processes: list[Any]) -> bool:
    """Keep in a record's `data` how the first leader ended (`ending`: process, state, exit
    code) once it has, before the cluster deletes its pod; True when `data` changed."""
    states = {p.name: p.state for p in processes}
    leader = ended_leader(ends_with, states)
    if leader is None or (data.get("ending") or {}).get("process") == leader:
        return False
    code = next(p.exit_code for p in processes if p.name == leader)
    data["ending"] = {"process": leader, "state": states[leader], "exit_code": code}
    return True


def cleaned_up(processes: list[Any], ending: dict | None, ends_with: list[str]) -> list[Any]:
    """The processes of an experiment whose workloads the cluster deleted after its leader
    ended: the leader as `ending` recorded it (`unknown` if nobody looked before the cleanup),
    the others `stopped`."""
    for proc in processes:
        proc.location = f"{DELETED} after {'/'.join(ends_with)} ended"
        if ending and proc.name == ending["process"]:
            proc.state, proc.exit_code = ending["state"], ending.get("exit_code")
        elif proc.name in ends_with:
            proc.state = UNKNOWN if not ending else STOPPED
        else:
            proc.state = STOPPED
    return processes


def outcome(states: dict[str, str], ends_with: list[str], cleaned: bool = False) -> str | None:
    """`finished` / `failed` once a leader ended and nothing is alive any more (the others
    stopped for it: not a "stopped" experiment); `ended` when the cluster deleted the pods
    before anyone saw how (`cleaned`); None otherwise."""
    leader = ended_leader(ends_with, states)
    if leader is None and cleaned:
        return ENDED
    if leader is None or any(s not in (EXITED, FAILED, STOPPED) for s in states.values()):
        return None
    return "failed" if states[leader] == FAILED else "finished"


def tell(processes: list[Any], name: str, ends_with: list[str], cleanup: Any, data: dict) -> str:
    """`describe`'s `ended` line: what ended experiment NAME and what becomes of the rest
    (`cleanup`: the launch's cleanup_after_s, None when it stays, `UNKNOWN_TTL` when this
    machine did not launch it; "" while no leader ended)."""
    states = {p.name: p.state for p in processes}
    leader = ended_leader(ends_with, states)
    alive = [p for p in processes if p.state in ALIVE_STATES]
    if leader is not None and alive:
        how = "failed" if states[leader] == FAILED else "exited 0"
        if cleanup == UNKNOWN_TTL:
            return f"{leader} {how}, which ends this experiment ({len(alive)} others still run)"
        if cleanup is None:
            return (
                f"{leader} {how}, which ends this experiment, but nothing on kube stops the other "
                f"{len(alive)} processes (cleanup_after_s=-1): `symphony delete {name}` frees their pods"
            )
        return (
            f"{leader} {how}, which ends this experiment; the cluster deletes the other "
            f"{len(alive)} processes' pods {cleanup} s after its Job finished (cleanup_after_s)"
        )
    if not any((p.location or "").startswith(DELETED) for p in processes):
        return ""
    lost = "" if data.get("ending") else " (how it ended is no longer on the cluster)"
    after = f"{cleanup} s after" if isinstance(cleanup, int) else "after"
    return (
        f"the cluster deleted the pods {after} {'/'.join(ends_with)} ended{lost}; "
        f"`symphony delete {name}` removes the rest (services, namespace)"
    )
