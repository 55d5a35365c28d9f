"""Pure translation of Kubernetes pods into symphony process states (no API calls here)."""

from __future__ import annotations

from typing import Any

from symphony.backends.base import EXITED, FAILED, PENDING, RESTARTING, RUNNING, ProcessStatus
from symphony.kube.naming import LABEL_GROUP

_BACKOFF = ("CrashLoopBackOff",)


def _state_of(cs: Any) -> tuple[str, int | None, float | None, float | None]:
    """(state, exit code, started, ended) of one V1ContainerStatus."""
    state = cs.state
    if state is None:
        return PENDING, None, None, None
    if state.running is not None:
        started = state.running.started_at.timestamp() if state.running.started_at else None
        return RUNNING, None, started, None
    if state.terminated is not None:
        term = state.terminated
        code = term.exit_code
        started = term.started_at.timestamp() if term.started_at else None
        ended = term.finished_at.timestamp() if term.finished_at else None
        return (EXITED if code == 0 else FAILED), code, started, ended
    if state.waiting is not None and state.waiting.reason in _BACKOFF:
        return RESTARTING, None, None, None
    return PENDING, None, None, None


def _newest(pods: list[Any]) -> Any:
    def created(pod: Any) -> float:
        ts = pod.metadata.creation_timestamp
        return ts.timestamp() if ts is not None else 0.0

    return max(pods, key=created)


def _runs(pod: Any, process: str | None) -> bool:
    if process is None or pod.spec is None:
        return True
    return process in [c.name for c in pod.spec.containers or []]


def process_pods(pods: list[Any], group: str, process: str | None = None) -> list[Any]:
    """The pods of a group (that run `process`: a group mixing restart modes has one per mode)."""
    return [
        p for p in pods if (p.metadata.labels or {}).get(LABEL_GROUP) == group and _runs(p, process)
    ]


def group_pod(pods: list[Any], group: str, process: str | None = None) -> Any | None:
    """The newest pod of a group (running `process`); a controller may have replaced older ones."""
    mine = process_pods(pods, group, process)
    return _newest(mine) if mine else None


def process_statuses(pods: list[Any], groups: dict[str, list[str]]) -> list[ProcessStatus]:
    """One ProcessStatus per process from the pods of an experiment.

    Args:
        pods: V1Pod objects of the experiment's namespace.
        groups: group name -> its process (= container) names, in declaration order.
    """
    out = []
    for group, processes in groups.items():
        for name in processes:
            pod = group_pod(pods, group, name)
            statuses = {}
            if pod is not None and pod.status is not None:
                statuses = {cs.name: cs for cs in (pod.status.container_statuses or [])}
            retired = len(process_pods(pods, group, name)) - 1
            cs = statuses.get(name)
            state, code, started, ended = (
                _state_of(cs) if cs is not None else (PENDING,) + (None,) * 3
            )
            location = _location(pod, cs) if pod is not None else None
            restarts = (cs.restart_count if cs is not None else 0) + max(retired, 0)
            out.append(
                ProcessStatus(
                    name=name,
                    state=state,
                    group=group,
                    restarts=restarts,
                    location=location,
                    started=started,
                    ended=ended,
                    exit_code=code,
                )
            )
    return out


def _location(pod: Any, cs: Any) -> str:
    """`pod NAME on NODE`, with why it waits when it does (`[ImagePullBackOff]`, `[Unschedulable]`)."""
    node = pod.spec.node_name if pod.spec is not None else None
    text = f"pod {pod.metadata.name}" + (f" on {node}" if node else "")
    reason = None
    if cs is not None and cs.state is not None and cs.state.waiting is not None:
        reason = cs.state.waiting.reason
    elif pod.status is not None:
        unscheduled = [
            c
            for c in (pod.status.conditions or [])
            if c.type == "PodScheduled" and c.status == "False"
        ]
        reason = unscheduled[0].reason if unscheduled else None
    return text + (f" [{reason}]" if reason else "")


def pod_phases(pods: list[Any]) -> dict[str, str]:
    """Pod name -> phase (for `describe` details)."""
    return {p.metadata.name: (p.status.phase if p.status else "Unknown") for p in pods}
