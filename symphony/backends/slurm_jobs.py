"""Slurm's side of the slurm backend: batch scripts, and sbatch/scontrol/sacct/scancel calls.

One job per ProcessGroup: `--nodes=1 --ntasks=1` keeps a group on one node, and the group's
resources are summed (`--cpus-per-task`, `--mem`, `--gres=gpu:N`). Every job is named
`<experiment>.<group>` and carries the comment `symphony:<experiment>`, so any user of the
cluster can find the jobs of an experiment with `squeue`.

Job states come from `scontrol show job` (live jobs, and finished ones for MinJobAge, 300 s by
default), then from `sacct` for older ones when the cluster has accounting (slurmdbd);
without either, the backend falls back to the status files the launcher writes.
"""

from __future__ import annotations

import math
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from symphony.errors import BackendError
from symphony.spec import ProcessGroup

DEFAULT_TIME_LIMIT = "3-00:00:00"  # SRL's experiments time out after 3 days by default
ACTIVE_JOB_STATES = (
    "PENDING",
    "CONFIGURING",
    "RUNNING",
    "COMPLETING",
    "SUSPENDED",
    "REQUEUED",
    "RESIZING",
    "SIGNALING",
    "STAGE_OUT",
)
_TIME_RE = re.compile(r"^(\d+-)?\d+(:\d{1,2}){0,2}$|^(UNLIMITED|INFINITE)$")
_CMD_TIMEOUT_S = 30
COMMENT_PREFIX = "symphony:"


@dataclass(frozen=True)
class JobInfo:
    """What Slurm says about one job.

    Attributes:
        job_id: the job id.
        state: Slurm's job state (RUNNING, COMPLETED, FAILED, TIMEOUT, CANCELLED, ...).
        reason: why it is pending or how it ended ("None" when there is nothing to say).
        node: the node list ("" while pending).
        exit_code: "code:signal" as Slurm prints it.
        comment: the job's comment (`symphony:<experiment>` for symphony's jobs).
        script: path of the batch script (scontrol's Command), "" when unknown.
    """

    job_id: str
    state: str
    reason: str = "None"
    node: str = ""
    exit_code: str = "0:0"
    comment: str = ""
    script: str = ""

    @property
    def active(self) -> bool:
        """Whether the job is queued or still has processes."""
        return self.state in ACTIVE_JOB_STATES


def run_id(launch_id: str, group: str) -> str:
    """The SYMPHONY_RUN_ID that marks every process of one group's job (and its children)."""
    return f"{launch_id}.{group}"


def guard_id(marker: str) -> str:
    """The run id of the guard of the processes marked `marker` (see `slurm_guard`)."""
    return f"{marker}.guard"


def job_name(experiment: str, group: str) -> str:
    """The Slurm job name of a group: `<experiment>.<group>`."""
    return f"{experiment}.{group}"


def check_time_limit(value: str | int) -> str:
    """A Slurm `--time` value: minutes (int) or "[D-]HH:MM:SS"-like text; BackendError otherwise."""
    text = str(value).strip()
    if not _TIME_RE.match(text):
        raise BackendError(
            f"time limit {value!r} is not a Slurm time; use minutes (90), 'HH:MM:SS' or "
            f"'D-HH:MM:SS' (e.g. '3-00:00:00', the default)"
        )
    return text


def group_resources(group: ProcessGroup) -> dict[str, int | None]:
    """The group's summed requests: cpus (whole), mem_mb (None: the cluster default), gpus."""
    res = [p.resources for p in group.processes]
    mems = [r.memory_gb for r in res if r.memory_gb is not None]
    return {
        "cpus": max(1, math.ceil(sum(r.cpu for r in res))),
        "mem_mb": math.ceil(sum(mems) * 1024) if mems else None,
        "gpus": sum(r.gpu for r in res),
    }


def batch_script(
    experiment: str,
    group: ProcessGroup,
    folder: Path,
    *,
    python: str,
    workdir: str,
    time_limit: str = DEFAULT_TIME_LIMIT,
    partition: str | None = None,
    extra_args: list[str] | None = None,
) -> str:
    """The sbatch script that runs one group through `symphony.backends.slurm_launcher`.

    Args:
        experiment: experiment name.
        group: the group (its node pool, if any, is the partition).
        folder: the experiment's shared folder (logs, names, status).
        python: the interpreter that runs the launcher on the node (it must see the same path).
        workdir: working directory of the processes that set no cwd.
        time_limit: `--time`.
        partition: default partition when the group names no node pool.
        extra_args: further `#SBATCH` options, e.g. ["--account=rl"].
    """
    res = group_resources(group)
    opts = [
        f"--job-name={job_name(experiment, group.name)}",
        f"--comment={COMMENT_PREFIX}{experiment}",
        "--nodes=1",
        "--ntasks=1",
        f"--cpus-per-task={res['cpus']}",
        f"--time={check_time_limit(time_limit)}",
        f"--output={folder / 'logs' / (group.name + '.slurm.log')}",
        f"--chdir={workdir}",
        "--open-mode=append",
    ]
    if res["mem_mb"] is not None:
        opts.append(f"--mem={res['mem_mb']}M")
    if res["gpus"]:
        opts.append(f"--gres=gpu:{res['gpus']}")
    part = group.node_pool() or partition
    if part:
        opts.append(f"--partition={part}")
    opts.extend(extra_args or [])
    lines = ["#!/bin/sh", f"# symphony: group {group.name!r} of experiment {experiment!r}"]
    lines += [f"#SBATCH {shlex.quote(o)}" for o in opts]
    launcher = [python, "-m", "symphony.backends.slurm_launcher", str(folder), group.name]
    lines.append("exec " + shlex.join(launcher))
    return "\n".join(lines) + "\n"


def _run(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    if shutil.which(args[0]) is None:
        raise BackendError(
            f"{args[0]} not found: the slurm backend needs the Slurm client tools on PATH "
            f"(Debian: apt-get install slurm-client) and SLURM_CONF pointing at the cluster"
        )
    proc = subprocess.run(args, capture_output=True, text=True, timeout=_CMD_TIMEOUT_S)
    if check and proc.returncode != 0:
        raise BackendError(
            f"`{shlex.join(args)}` failed: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def submit(script: Path) -> str:
    """`sbatch --parsable SCRIPT`; returns the job id."""
    try:
        out = _run(["sbatch", "--parsable", str(script)]).stdout.strip()
    except BackendError as err:
        raise BackendError(
            f"{err}; compare the group's resources and partition in {script} with what the "
            f"cluster has (`sinfo -o '%P %c %m %G'`)"
        ) from None
    return out.split(";")[0]


_NAMING = ("#SBATCH --job-name=", "#SBATCH --comment=", "#SBATCH --output=")
_PLACE = ("#SBATCH --chdir=", "#SBATCH --open-mode=")  # asked of no node


def request_of(script: str) -> tuple[str, ...]:
    """The `#SBATCH` lines of a batch script that ask for something (not those that name it)."""
    return tuple(
        line
        for line in script.splitlines()
        if line.startswith("#SBATCH ") and not line.startswith(_NAMING)
    )


def check_runnable(scripts: dict[str, Path]) -> None:
    """`sbatch --test-only` one script of each distinct request (a 1,024-actor run has two);
    BackendError naming the groups Slurm would never run, before anything is submitted.

    `--test-only` accepts a job that must wait for free nodes and refuses one that no node of
    its partition can hold (more CPUs, memory or GPUs than any node has, an unknown partition).
    """
    requests: dict[tuple[str, ...], list[str]] = {}
    for group, path in scripts.items():
        requests.setdefault(request_of(path.read_text()), []).append(group)
    for request, groups in requests.items():
        proc = _run(["sbatch", "--test-only", str(scripts[groups[0]])], check=False)
        if proc.returncode == 0:
            continue
        said = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        reason = said[-1] if said else f"sbatch --test-only exited {proc.returncode}"
        also = f" (and {len(groups) - 1} more groups asking the same)" if len(groups) > 1 else ""
        asks = " ".join(
            line.removeprefix("#SBATCH ") for line in request if not line.startswith(_PLACE)
        )
        raise BackendError(
            f"Slurm would never run group {groups[0]!r}{also}: {reason}; it asks for {asks}; "
            f"the cluster's nodes: {nodes_summary()}; nothing was submitted: split the group "
            "or lower its requests"
        )


def nodes_summary() -> str:
    """Each partition's node sizes, from `sinfo` ("debug: 2 nodes of 4 CPUs, 4096 MB")."""
    proc = _run(["sinfo", "--noheader", "--format=%P %D %c %m %G"], check=False)
    rows = []
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) == 5:
            part, count, cpus, mem, gres = parts
            gpus = "" if gres == "(null)" else f", {gres}"
            rows.append(f"{part.rstrip('*')}: {count} nodes of {cpus} CPUs, {mem} MB{gpus}")
    return "; ".join(rows) or "unknown (sinfo said nothing)"


def cancel(job_ids: list[str], *, kill: bool = False) -> None:
    """`scancel` the jobs (SIGTERM, Slurm kills after KillWait; `kill`: SIGKILL at once)."""
    if job_ids:
        proc = _run(
            ["scancel", *(["--signal=KILL", "--full"] if kill else []), *job_ids], check=False
        )
        denied = [
            line
            for line in proc.stderr.splitlines()
            if "ermission denied" in line or "Access/permission denied" in line
        ]
        if denied:
            raise BackendError(
                f"scancel refused: {denied[0]}; only the owner (or an admin) can delete these jobs"
            )


def query(job_ids: list[str]) -> dict[str, JobInfo]:
    """What Slurm knows about `job_ids` (ids it has forgotten are absent)."""
    wanted = set(job_ids)
    found = {j.job_id: j for j in _scontrol_jobs() if j.job_id in wanted}
    missing = sorted(wanted - set(found))
    if missing:
        found.update(_sacct_jobs(missing))
    return found


def _scontrol_jobs() -> list[JobInfo]:
    proc = _run(["scontrol", "--oneliner", "show", "job"], check=False)
    if proc.returncode != 0:
        raise BackendError(
            f"scontrol cannot reach the cluster: {proc.stderr.strip()}; is SLURM_CONF set?"
        )
    jobs = []
    for line in proc.stdout.splitlines():
        fields = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        if "JobId" in fields:
            nodes = fields.get("NodeList", "")
            jobs.append(
                JobInfo(
                    fields["JobId"],
                    fields.get("JobState", "UNKNOWN"),
                    fields.get("Reason", "None"),
                    "" if nodes == "(null)" else nodes,
                    fields.get("ExitCode", "0:0"),
                    fields.get("Comment", ""),
                    fields.get("Command", ""),
                )
            )
    return jobs


def experiment_folders(active_only: bool = False) -> dict[str, Path]:
    """Experiments with jobs Slurm still knows (any user's) -> their shared folders.

    `active_only`: only experiments with a job still queued or running.

    A symphony job's script is `<folder>/slurm/<group>.sbatch`, so the folder (with the record
    and the spec) is found from Slurm alone; teammates whose state directories differ see each
    other's experiments this way, as long as the folders are readable on the shared filesystem.
    """
    folders: dict[str, Path] = {}
    for job in _scontrol_jobs():
        if active_only and not job.active:
            continue
        if job.comment.startswith(COMMENT_PREFIX) and job.script.endswith(".sbatch"):
            folders.setdefault(job.comment[len(COMMENT_PREFIX) :], Path(job.script).parent.parent)
    return folders


def _sacct_jobs(job_ids: list[str]) -> dict[str, JobInfo]:
    if shutil.which("sacct") is None:
        return {}
    proc = _run(
        [
            "sacct",
            "--noheader",
            "--parsable2",
            "--allocations",
            "--jobs",
            ",".join(job_ids),
            "--format=JobID,State,Reason,NodeList,ExitCode",
        ],
        check=False,
    )
    if proc.returncode != 0:  # no slurmdbd: "Slurm accounting storage is disabled"
        return {}
    return parse_sacct(proc.stdout, job_ids)


def parse_sacct(text: str, job_ids: list[str]) -> dict[str, JobInfo]:
    """Jobs from `sacct --parsable2 --format=JobID,State,Reason,NodeList,ExitCode` output."""
    jobs = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) == 5 and parts[0] in job_ids:
            state = (
                parts[1].split()[0] if parts[1] else "UNKNOWN"
            )  # "CANCELLED by 0" -> "CANCELLED"
            jobs[parts[0]] = JobInfo(parts[0], state, parts[2], parts[3], parts[4])
    return jobs


def srun_in_job(job_id: str, command: list[str]) -> int:
    """Run `command` on the job's node inside its allocation; returns its exit code."""
    _run(["srun", "--version"])
    return subprocess.run(
        ["srun", f"--jobid={job_id}", "--overlap", "--ntasks=1", "--", *command]
    ).returncode
