"""The slurm backend: one batch job per ProcessGroup, addresses resolved through a shared folder.

Why one job per group rather than one heterogeneous job: a group is what must share a node, and
separate jobs give exactly that while letting groups start as soon as their own node is free,
fail and be inspected on their own, and ask for different partitions. Heterogeneous jobs also
never start when the components would land on one node (a scheduler limit), which is the
common case on small clusters.

Launch writes `slurm.json` (launch id, resolve timeout) into the experiment's record folder and
submits one job per group whose script runs `symphony.backends.slurm_launcher`; that launcher
publishes the group's bound services (`slurm_names`) and waits for the ones it connects to
before starting the processes with their SYMPH_* variables. The record folder must be on a
filesystem every node shares (point `SYMPHONY_HOME` at it), and the Python interpreter that
launches must exist at the same path on the nodes.

Options (`symphony launch --backend slurm -o key=value` or `symphony.launch(..., key=value)`):
    time_limit        `--time` of every job (default "3-00:00:00", SRL's 3 days)
    partition         partition for groups that name no node pool (a node pool is a partition)
    python            interpreter that runs the launcher on the nodes (default: this one)
    resolve_timeout_s how long a process waits for the services it connects to (default 600)
    sbatch_args       extra sbatch options, a list or one string ("--account=rl --qos=high")
    workdir           working directory of processes without cwd (default: the launch directory)
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from symphony.backends import slurm_jobs
from symphony.backends.base import (
    ALIVE_STATES,
    EXITED,
    FAILED,
    PENDING,
    RUNNING,
    STOPPED,
    UNKNOWN,
    Backend,
    Capabilities,
    ExperimentStatus,
    ExperimentSummary,
    ProcessStatus,
)
from symphony.backends.slurm_jobs import DEFAULT_TIME_LIMIT, JobInfo
from symphony.backends.slurm_launcher import ENDED
from symphony.backends.slurm_names import NameStore
from symphony.errors import BackendError, ExperimentNotFound, LaunchRefused, SymphonyError
from symphony.local import proctree
from symphony.records import ExperimentRecord
from symphony.spec import Experiment
from symphony.states import ended_status

OPTIONS = ("time_limit", "partition", "python", "resolve_timeout_s", "sbatch_args", "workdir")
# Job states in which processes that had not ended were killed by Slurm, not by `delete`.
_KILLED_BY_SLURM = ("TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "DEADLINE", "PREEMPTED", "BOOT_FAIL")
_POLL_S = 0.25


class SlurmBackend(Backend):
    """Runs each ProcessGroup of an experiment as one Slurm batch job (see the module docstring)."""

    name = "slurm"
    capabilities = Capabilities(shares_launch_disk=True, plan_is_submission=True)

    def __init__(self, records=None, **options: Any) -> None:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise BackendError(f"unknown slurm option(s) {unknown}; known: {', '.join(OPTIONS)}")
        super().__init__(records, **options)
        self.time_limit = slurm_jobs.check_time_limit(
            options.get("time_limit") or DEFAULT_TIME_LIMIT
        )
        extra = options.get("sbatch_args") or []
        self.sbatch_args = shlex.split(extra) if isinstance(extra, str) else list(extra)

    # --- launching -------------------------------------------------------------------------

    def _scripts(self, experiment: Experiment, folder: Path) -> dict[str, str]:
        return {
            group.name: slurm_jobs.batch_script(
                experiment.name,
                group,
                folder,
                python=self.options.get("python") or sys.executable,
                workdir=self.options.get("workdir") or os.getcwd(),
                time_limit=self.time_limit,
                partition=self.options.get("partition"),
                extra_args=self.sbatch_args,
            )
            for group in experiment.groups()
        }

    def plan(self, experiment: Experiment) -> str:
        """The batch script of every group (nothing is submitted)."""
        folder = self.records.folder / experiment.name
        return "\n".join(
            f"# --- job for group {g} ---\n{s}"
            for g, s in self._scripts(experiment, folder).items()
        )

    def ends_alone(self, name: str) -> str | None:
        """The group launchers' end marker (`slurm_launcher`, step 5)."""
        return (
            "within seconds the other groups' launchers stop their processes and their jobs "
            "end, freeing the nodes before the time limit"
        )

    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Submit one job per group; with detach=False wait until all ended (Ctrl-C deletes).

        An experiment of that name with live jobs (anyone's, found through their comments)
        refuses the launch (`LaunchRefused`); its jobs are left as they are.
        """
        folder = record.file("")
        taken = slurm_jobs.experiment_folders(active_only=True).get(experiment.name)
        if taken is not None and taken.resolve() != folder.resolve():
            try:
                owner = ExperimentRecord.load(taken).owner
            except (OSError, TypeError, ValueError):
                owner = "unknown (its folder is not readable here)"
            raise LaunchRefused(
                f"Slurm has live jobs of an experiment named {experiment.name!r} (owner {owner}, "
                f"folder {taken}), left as they are; launch under another name (--name)"
            )
        launch_id = uuid.uuid4().hex
        NameStore(folder, launch_id).clear()
        (folder / ENDED).unlink(missing_ok=True)  # a relaunch's end is its own
        (folder / "status").mkdir(exist_ok=True)
        (folder / "slurm").mkdir(exist_ok=True)
        resolve_timeout = float(self.options.get("resolve_timeout_s", 600))
        (folder / "slurm.json").write_text(
            json.dumps({"launch_id": launch_id, "resolve_timeout_s": resolve_timeout})
        )
        jobs: dict[str, str] = {}
        record.data.update(jobs=jobs, launch_id=launch_id, time_limit=self.time_limit)
        paths = {}
        for group, script in self._scripts(experiment, folder).items():
            paths[group] = folder / "slurm" / f"{group}.sbatch"
            paths[group].write_text(script)
        slurm_jobs.check_runnable(paths)  # a group no node can hold: refused, nothing submitted
        for group, path in paths.items():
            try:
                jobs[group] = slurm_jobs.submit(path)
            except BackendError:
                slurm_jobs.cancel(list(jobs.values()), kill=True)
                raise
            record.save()
        record.status = "running"
        record.save()
        if not detach:
            self._attach(record)

    def _attach(self, record: ExperimentRecord) -> None:
        try:
            while any(p.state in ALIVE_STATES for p in self.describe(record).processes):
                time.sleep(_POLL_S)
        except KeyboardInterrupt:
            self.delete(record)
            raise
        status = self.describe(record).status
        record.data["exit_code"] = 0 if status == "finished" else 1
        record.set_status(status)

    # --- inspecting ------------------------------------------------------------------------

    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """Each process's state from Slurm's job state and the launcher's status files."""
        record = self._full(record)
        jobs: dict[str, str] = record.data.get("jobs", {})
        infos = slurm_jobs.query(list(jobs.values())) if jobs else {}
        exp = record.experiment()
        processes, details = [], {}
        for group in exp.groups():
            job_id = jobs.get(group.name)
            info = infos.get(job_id) if job_id else None
            details[f"job {group.name}"] = _job_line(
                job_id, info, self._batch_log(record, group.name)
            )
            for proc in group.processes:
                processes.append(self._process_status(record, proc.name, group.name, job_id, info))
        described = self.status_from_record(record, processes, **details)
        states = {p.name: p.state for p in processes}  # the others stopped for `ends_with`
        described.status = ended_status(exp.ends_with, states, described.status)
        return described

    def _process_status(
        self,
        record: ExperimentRecord,
        name: str,
        group: str,
        job_id: str | None,
        info: JobInfo | None,
    ) -> ProcessStatus:
        saved = _read_json(record.file("status") / f"{name}.json")
        state = merge_state(saved.get("state", PENDING), info)
        return ProcessStatus(
            name,
            state,
            group=group,
            restarts=int(saved.get("restarts", 0)),
            pid=saved.get("pid"),
            location=_location(job_id, info),
            started=saved.get("started"),
            ended=saved.get("ended"),
            exit_code=saved.get("exit_code"),
        )

    def list(self) -> list[ExperimentSummary]:
        """Experiments in the records, plus any user's that Slurm still has jobs of."""
        summaries = super().list()
        known = {s.name for s in summaries}
        for name, folder in slurm_jobs.experiment_folders().items():
            if name in known:
                continue
            try:
                summaries.append(self.describe(ExperimentRecord.load(folder)).summary())
            except (OSError, SymphonyError, TypeError, ValueError):
                continue  # its folder is not readable from here
        return summaries

    def _full(self, record: ExperimentRecord) -> ExperimentRecord:
        """`record` itself, or for a bare one (found by `list`, no local record) the record in
        the experiment's shared folder, located through its Slurm jobs."""
        if record.path is not None:
            return record
        folder = slurm_jobs.experiment_folders().get(record.name)
        if folder is None:
            raise ExperimentNotFound(
                f"Slurm has no jobs of experiment {record.name!r} any more; "
                f"`symphony list --all` shows the recorded ones"
            )
        return ExperimentRecord.load(folder)

    def _batch_log(self, record: ExperimentRecord, group: str) -> Path:
        return record.file("logs") / f"{group}.slurm.log"

    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """The process's log; then Slurm's own lines for its job (time limit, launcher errors)."""
        record = self._full(record)
        exp = record.experiment()
        exp.process(process)  # a clear error for an unknown process
        path = record.log_path(process)
        batch = self._batch_log(record, exp.group_of(process))
        own, offset = _read_from(path, 0, partial=not follow)
        slurm, batch_offset = _read_from(batch, 0, partial=not follow)
        lines = own + [f"[slurm] {line}" for line in slurm]
        yield from lines[-tail:] if tail else lines
        while follow:
            alive = self.describe(record).process(process).state in ALIVE_STATES
            new, offset = _read_from(path, offset, partial=not alive)
            yield from new
            if not alive:
                slurm, _ = _read_from(batch, batch_offset)
                yield from (f"[slurm] {line}" for line in slurm)
                return
            time.sleep(_POLL_S)

    # --- stopping --------------------------------------------------------------------------

    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """`scancel` every job of the experiment, wait until Slurm has ended them all, then end
        whatever of them is left on this host (found by its run id)."""
        if record.path is None and not force:
            record = self._full(record)
        ids = list(record.data.get("jobs", {}).values())
        if not ids:
            return
        try:
            self._cancel(record, ids, force)
        finally:
            self._sweep(record)

    def _sweep(self, record: ExperimentRecord) -> None:
        """End what is left on this host of each group's processes (found by their run id).

        On a compute node the launcher's guard does this (`slurm_guard`); here it catches what a
        single-host cluster (tests, demos) left after the jobs ended.
        """
        launch_id = record.data.get("launch_id")
        if not launch_id or not record.spec:
            return
        for group in record.experiment().groups():
            marker = slurm_jobs.run_id(launch_id, group.name)
            proctree.stop_all([], marker, grace_s=1.0)
            proctree.stop_all([], slurm_jobs.guard_id(marker), grace_s=2.0)

    def _cancel(self, record: ExperimentRecord, ids: list[str], force: bool) -> None:
        try:
            slurm_jobs.cancel(ids, kill=force)
            deadline = time.monotonic() + 60
            while any(j.active for j in slurm_jobs.query(ids).values()):
                if time.monotonic() > deadline:
                    raise BackendError(
                        f"jobs {ids} did not end within 60 s of scancel; check `squeue -j "
                        f"{','.join(ids)}` and retry with `symphony delete --force`"
                    )
                time.sleep(_POLL_S)
        except BackendError:
            if not force:
                raise

    def exec(self, record: ExperimentRecord, process: str, command: list[str]) -> int:
        """Run `command` on the node of `process`'s job, inside its allocation (srun --overlap)."""
        record = self._full(record)
        group = record.experiment().group_of(process)
        job_id = record.data.get("jobs", {}).get(group)
        info = slurm_jobs.query([job_id]).get(job_id) if job_id else None
        if info is None or info.state != "RUNNING":
            raise BackendError(
                f"the job of {process!r} is not running ({info.state if info else 'gone'}); "
                f"see `symphony describe {record.name}`"
            )
        return slurm_jobs.srun_in_job(job_id, command)


def merge_state(launcher_state: str, job: JobInfo | None) -> str:
    """A process's state from what its launcher last wrote and what Slurm says of its job.

    - job unknown to Slurm: the launcher's final state (exited/failed/stopped), else unknown;
    - job pending: pending;
    - job active and the launcher says stopped: running (SIGTERM arrived; whether from delete or
      the time limit shows once Slurm ends the job);
    - job ended and the process had not ended by itself: failed when Slurm killed it (TIMEOUT,
      NODE_FAIL, OUT_OF_MEMORY, ...) or the job failed, stopped when cancelled, else unknown;
    - otherwise: the launcher's state.
    """
    state = launcher_state
    if job is None:
        return state if state in (EXITED, FAILED, STOPPED) else UNKNOWN
    if job.state == "PENDING":
        return PENDING
    if job.active:
        return RUNNING if state == STOPPED else state
    if state in (EXITED, FAILED):
        return state
    if job.state in _KILLED_BY_SLURM or job.state == "FAILED":
        return FAILED
    if job.state == "CANCELLED":
        return STOPPED
    return UNKNOWN if state in ALIVE_STATES else state


def _location(job_id: str | None, info: JobInfo | None) -> str | None:
    """ "slurm job 12 on n1", plus the job state when it says more (pending, TIMEOUT, ...)."""
    if job_id is None:
        return None
    text = f"slurm job {job_id}" + (f" on {info.node}" if info and info.node else "")
    if info and info.state == "PENDING":
        text += f" pending ({info.reason})"
    elif info and info.state not in ("RUNNING", "COMPLETED"):
        text += f" {info.state}"
    return text


def _job_line(job_id: str | None, info: JobInfo | None, log: Path) -> str:
    if job_id is None:
        return "not submitted"
    if info is None:
        return f"{job_id} (no longer known to Slurm) log {log}"
    reason = f" ({info.reason})" if info.reason not in ("None", "") else ""
    node = f" on {info.node}" if info.node else ""
    return f"{job_id} {info.state}{reason}{node} exit {info.exit_code} log {log}"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _read_from(path: Path, offset: int, partial: bool = True) -> tuple[list[str], int]:
    """Lines of `path` after byte `offset` (each ending in newline), and the offset after them.

    With partial=False a last line without its newline yet is left for the next read.
    """
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], offset
    end = len(data) if partial else data.rfind(b"\n") + 1
    lines = data[:end].decode(errors="replace").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines, offset + end
