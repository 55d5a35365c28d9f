"""`surreal launch` on a cluster backend: backend options, `--dry-run` manifests, detached launch.

`-o KEY=VALUE` are the symphony backend's options, read like `symphony launch -o` does (the
symphony config file's `backend_options.<backend>` first; a bare `-o DIR` is `output=DIR`, where
`--dry-run` writes one file per Kubernetes object). On kube every container mounts the run
storage at /runs (`-o team_namespace=NS -o volume=CLAIM`: a PersistentVolumeClaim in NS all
pods share; without it each pod's own scratch volume), and the run is launched detached: its processes live on the cluster,
and `symphony describe/logs/delete EXPERIMENT` follow it. On compose every process container
reads the run's private env file (`surreal.runtime.plan.compose_env`: Curve keys, object-store settings), and
`surreal launch` stays attached; the containers' output becomes `RUN/logs/` at the end.
"""

from __future__ import annotations

from typing import Any

import symphony
from cloudwise.spec import ClusterSpec
from surreal.launch import experiment as launching
from surreal.launch.cost import experiment_cost
from surreal.runtime.plan import compose_env
from surreal.runtime.plan.portable import RUNS_ROOT, run_url
from surreal.runtime.processes.stall_watch import GRACE_S
from surreal.runtime.runfolder.rundir import write_json
from surreal.runtime.wire import curve
from surreal.runtime.wire.goal import applies as goal_applies
from symphony.backends import capabilities, get_backend
from symphony.cli import backend_options
from symphony.errors import BackendError, SpecError
from symphony.records import Records

STOP_GRACE_S = 30
"""Seconds a stopping process gets before SIGKILL on local, tmux and compose (its last
checkpoint, uploads and W&B finish)."""


def detached(backend: str) -> bool:
    """Whether `surreal launch` starts the run and leaves it running (kube: the processes are
    the cluster's; symphony's `Capabilities.stays_attached`)."""
    return not capabilities(backend).stays_attached


def options(plan: Any, backend: str, pairs: tuple[str, ...]) -> dict[str, Any]:
    """The backend's options: config file, `-o` pairs, then what the run's Curve keys need.

    Where the backend has a stop grace option (local, tmux, compose) a stopped run's processes
    get up to 30 s (not symphony's default) between SIGTERM and SIGKILL: the learner's last
    checkpoint, uploads and the metrics process's W&B finish must not be cut off on a busy
    machine; processes that stop sooner end sooner. Where it mounts run storage (kube), the
    run folder's container path is on it.

    Raises:
        symphony.errors.BackendError: a backend whose processes share no disk and no run
            storage with this machine (compose) with a run folder on this machine's disk (the
            run folder must be an `s3://` URL).
    """
    caps = capabilities(backend)
    if not (caps.shares_launch_disk or caps.run_volume_option or run_url(plan)):
        raise BackendError(
            f"--backend {backend}: the containers share no folder with this machine, so "
            f"{plan.run_dir.where} would not reach them; put the run folder in an object store: "
            "--folder s3://BUCKET/PREFIX (docs/storage.md)"
        )

    merged = backend_options(backend, pairs)
    if caps.stop_grace_option:
        merged.setdefault(caps.stop_grace_option, STOP_GRACE_S)
    if caps.run_volume_option:  # the run folder's container path lives on the run storage
        merged.setdefault(caps.run_volume_option, RUNS_ROOT)
    for key, value in compose_env.options(plan).items():  # compose: keys and storage settings
        merged[key] = [*_listed(merged.get(key)), value]
    for key, value in curve.launch_options(plan).items():
        merged[key] = {**(merged.get(key) or {}), **value} if isinstance(value, dict) else value
    return merged


def _listed(value: Any) -> list[Any]:
    if not value:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def save_container_logs(handle: Any, logs: Any) -> None:
    """Where the processes' output is not kept on this machine (compose): each process
    container's output into `logs/PROCESS.log`, read once the run is stopped (the stop lines
    included) from the copy the backend keeps in symphony's record when it removes the
    containers; elsewhere the backend's log files are kept instead."""
    if handle.backend.capabilities.logs_on_launch_disk:
        return
    logs.mkdir(exist_ok=True)
    for process in handle.record.experiment().process_names():
        try:
            lines = list(handle.backend.logs(handle.record, process))
        except Exception:  # noqa: BLE001 - a container that never started has no output
            continue
        with (logs / f"{process}.log").open("a") as out:
            out.writelines(line if line.endswith("\n") else line + "\n" for line in lines)


def dry_run(plan: Any, backend: str, opts: dict[str, Any]) -> str:
    """What would start: on compose, kube and slurm the backend's `--dry-run` text (kube: the
    manifests, also written into the `output` folder when given, a summary when large; slurm:
    the batch script of every group), elsewhere the experiment's spec; starts nothing, writes
    nothing else. On kube with a cloudwise cluster spec (`-o cluster_spec=PATH`) the text starts
    with `# cost: ...` lines: what the processes cost an hour at list prices (`surreal.launch.cost`).

    Raises:
        symphony.SymphonyError: a bad option, or an experiment the backend cannot render.
    """
    text, cost = _render(plan, backend, opts)
    if cost is None:
        return text
    return "".join(f"# {line}\n" for line in cost.lines()) + text


def _render(plan: Any, backend: str, opts: dict[str, Any]) -> tuple[str, Any]:
    """The dry-run text, and the run's `surreal.launch.cost.RunCost` (None: the backend places
    processes on no cloudwise cluster spec)."""
    impl = get_backend(backend, records=Records(), **opts)
    experiment = launching.build_experiment(plan)
    try:
        text = (
            impl.plan(experiment) if impl.capabilities.plan_is_submission else experiment.to_yaml()
        )
    except SpecError as err:
        if str(err).startswith("group 'actors-") and "asks for" in str(err):
            raise SpecError(f"{err} (actors: --set actor.group_size=N)") from None
        raise
    spec = impl.cluster_spec()
    if not spec:
        return text, None
    return text, experiment_cost(experiment, ClusterSpec.load(spec))


def record_cost(plan: Any, cost: Any) -> None:
    """Keep the run's cost per hour (a `RunCost`, None: none) in its run.json, for `surreal
    status`: launch-time prices, so a later edit of the cluster spec does not rewrite them."""
    info = {k: v for k, v in plan.run_dir.info().items() if k != "cost"}
    if cost is not None:
        info["cost"] = cost.to_dict()
    write_json(plan.run_dir.run_file, info)


def _the_end(name: str, backend: str, opts: dict[str, Any]) -> str:
    """What ends a detached run with no launcher watching: the backend's own machinery once the
    learner ended (`Backend.ends_alone`), else nothing but `symphony delete`."""
    alone = get_backend(backend, records=Records(), **opts).ends_alone(name)
    if alone is not None:
        return f"It ends by itself: at its step budget the learner exits 0, and {alone}"
    return (
        f"It does not end by itself: at its step budget the learner exits 0 (`symphony describe "
        f"{name}`), and the other processes keep their pods, and the nodes, until "
        f"`symphony delete {name}`"
    )


def _goal(plan: Any, backend: str) -> str:
    """What stops the detached run before its budget: `run.stop_at_return` through its learner
    (`surreal.runtime.wire.goal`) where that applies; a stall through the learner's own watch
    (`surreal.runtime.processes.stall_watch`)."""
    timeout = plan.config.run.stall_timeout_s
    stall = (
        f"a learner whose step stands still for run.stall_timeout_s ({timeout:g} s) + "
        f"{GRACE_S:g} s ends it as failed"
        if timeout > 0
        else "run.stall_timeout_s is 0: a run that stands still is never ended"
    )
    goal = plan.config.run.stop_at_return
    if goal is None:
        return stall
    if goal_applies(plan.config):
        return (
            f"at run.stop_at_return {goal} the evaluator tells the learner, which ends it; {stall}"
        )
    return (
        f"run.stop_at_return stops nothing here (it needs one learner and evaluations: "
        f"run.learner_replicas 1, eval.every_s > 0); {stall}"
    )


def launch_detached(plan: Any, backend: str, opts: dict[str, Any]) -> str:
    """Render the run (a request no node can hold is refused here), write the run folder
    (with the run's cost per hour, on kube with a cluster spec), launch it and leave it
    running; returns what to tell the user, including what ends it (no launcher watches it:
    docs/kubernetes.md)."""
    _, cost = _render(plan, backend, opts)  # every refusal before the run folder is written
    launching.create_run(plan)
    record_cost(plan, cost)
    handle = symphony.launch(launching.build_experiment(plan), backend, detach=True, **opts)
    name = handle.name
    told = (
        f"{name} is running on {backend} ({plan.config.run.actors} actors); follow it with "
        f"`symphony describe {name}`, `symphony logs {name} learner -f`; stop it with "
        f"`symphony delete {name}`.\n{_the_end(name, backend, opts)}; {_goal(plan, backend)}"
    )
    return told if cost is None else f"{told}\n{cost.lines()[0]} (`surreal status` tracks it)"
