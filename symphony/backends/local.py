"""The `local` backend: subprocesses on this machine under a supervisor (the embedded default).

Options:
    grace_s: seconds between SIGTERM and SIGKILL when stopping (default 5).

Every service gets a free port on 127.0.0.1 (checked again right before the processes start).
Each process writes stdout and stderr to `<record>/logs/<process>.log`, restarts per its
RestartPolicy (backoff doubling up to a limit), and runs in its own session so that only the
supervisor sees Ctrl-C. Attached (`detach=False`), the supervisor runs in the caller's process;
detached, it runs as a daemon and `symphony delete` stops it with SIGTERM. A process that
declares `preload` and runs `python -m MODULE` forks from a fork server that imported those
modules once (`symphony.local.forking`; SYMPHONY_FORKSERVER=0 starts every process with Popen).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil

from symphony.addresses import Address, local_endpoints, process_env
from symphony.backends.base import (
    ALIVE_STATES,
    PENDING,
    RUNNING,
    UNKNOWN,
    Backend,
    Capabilities,
    ExperimentStatus,
    ProcessStatus,
)
from symphony.errors import BackendError
from symphony.local import proctree
from symphony.local.forking import module_of
from symphony.local.preflight import check_commands
from symphony.local.supervisor import Supervisor, read_state
from symphony.logfiles import follow_file, read_lines
from symphony.records import ExperimentRecord
from symphony.spec import Experiment

READY_TIMEOUT_S = 30.0
ENDED_BY_SUPERVISOR = ("finished", "failed", "stopped")
"""The supervisor's own statuses of an experiment that has ended (state.json)."""


class LocalBackend(Backend):
    """Processes on this machine, supervised; see the module docstring."""

    name = "local"
    capabilities = Capabilities(
        single_machine=True,
        shares_launch_disk=True,
        fork_preload=True,
        stop_grace_option="grace_s",
    )

    def __init__(self, records=None, grace_s: float = 5.0, **options: Any) -> None:
        if options:
            raise BackendError(f"unknown local backend option(s) {sorted(options)}; known: grace_s")
        super().__init__(records)
        self.grace_s = float(grace_s)

    def plan(self, experiment: Experiment) -> str:
        """The processes, their commands and the SYMPH_* addresses they would get."""
        return local_plan(experiment)

    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Start the supervisor here (attached) or as a daemon (detached); see Backend.launch."""
        check_commands(experiment)
        record.data.update(
            run_id=uuid.uuid4().hex,
            cwd=os.getcwd(),
            grace_s=self.grace_s,
            endpoints={s: [a.host, a.port] for s, a in local_endpoints(experiment).items()},
        )
        record.status = "running"
        record.save()
        if not detach:
            code = Supervisor(record, grace_s=self.grace_s).run()
            record.data["exit_code"] = code
            return
        subprocess.run(
            [
                sys.executable,
                "-m",
                "symphony.local.supervisor",
                str(record.path),
                str(self.grace_s),
            ],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            check=True,
            timeout=30,
        )
        self._wait_ready(record)

    def _wait_ready(self, record: ExperimentRecord) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            state = read_state(record)
            if state and state["status"] != "starting":
                if state.get("error"):
                    raise BackendError(f"{record.name}: {state['error']}")
                return
            time.sleep(0.05)
        log = "".join(read_lines(record.file("supervisor.log"), tail=20))
        raise BackendError(
            f"the supervisor of {record.name!r} did not start in {READY_TIMEOUT_S:g}s:\n{log}"
        )

    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """Process states from the supervisor's state.json, checked against the process table."""
        state = read_state(record)
        if state is None:
            procs = [ProcessStatus(n, PENDING, group=g) for n, g in _groups(record).items()]
            return self.status_from_record(record, procs)
        supervised = proctree.alive(state["supervisor_pid"], state.get("supervisor_started"))
        procs = []
        for name, group in _groups(record).items():
            run = state["processes"].get(name, {})
            proc = ProcessStatus(
                name,
                run.get("state", PENDING),
                group=group,
                restarts=run.get("restarts", 0),
                last_end=run.get("last_end"),
                pid=run.get("pid"),
                started=run.get("started"),
                ended=run.get("ended"),
                exit_code=run.get("exit_code"),
            )
            if proc.state in ALIVE_STATES and not supervised:
                proc.state = RUNNING if proctree.alive(proc.pid, proc.started) else UNKNOWN
            procs.append(proc)
        status = self.status_from_record(
            record,
            procs,
            supervisor_pid=state["supervisor_pid"],
            supervisor_alive=supervised,
            endpoints=state["endpoints"],
        )
        if state["status"] in ENDED_BY_SUPERVISOR:  # its word, e.g. "finished" where it
            status.status = state["status"]  # stopped the rest for an `ends_with` process
        return status

    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """Lines of `<record>/logs/<process>.log`; following ends when the process ended."""
        path = record.log_path(process)
        if not follow:
            return iter(read_lines(path, tail))

        def running() -> bool:
            status = self.describe(record)
            return status.process(process).state in ALIVE_STATES

        return follow_file(path, running, tail)

    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """SIGTERM the supervisor (it stops every tree), then sweep anything left with SIGKILL."""
        state = read_state(record) or {}
        pid, started = state.get("supervisor_pid"), state.get("supervisor_started")
        grace = 0.0 if force else float(record.data.get("grace_s", self.grace_s))
        if pid and pid != os.getpid() and proctree.alive(pid, started):
            # The supervisor stops its trees within the grace period; it gets 10 s more to exit.
            proctree.terminate(_as_procs(pid), 0.0 if force else grace + 10.0)
        pids = [
            r["pid"]
            for r in state.get("processes", {}).values()
            if proctree.alive(r.get("pid"), r.get("started"))
        ]  # never a reused pid
        proctree.stop_all(pids, record.data.get("run_id"), grace_s=0.0 if force else 1.0)

    def exec(self, record: ExperimentRecord, process: str, command: list[str]) -> int:
        """Run `command` here with `process`'s environment and working directory."""
        return run_beside(record, process, command)


def local_plan(experiment: Experiment) -> str:
    """What a local launch would start: each command and the addresses it would get."""
    check_commands(experiment)
    endpoints = local_endpoints(experiment)
    lines = [
        f"experiment {experiment.name}: {len(experiment.processes())} processes on this machine"
    ]
    for proc in experiment.processes():
        env = process_env(experiment, proc, endpoints, bind_host="127.0.0.1")
        lines.append(f"  {proc.name}: {proc.shell_command()}")
        if proc.preload and module_of(proc.argv()):
            lines.append(f"      forks from a fork server that imported {', '.join(proc.preload)}")
        lines += [f"      {k}={v}" for k, v in env.items() if k.endswith("_ADDR")]
    return "\n".join(lines) + "\n"


def run_beside(record: ExperimentRecord, process: str, command: list[str]) -> int:
    """Run `command` on this machine with a local process's SYMPH_* env and working directory."""
    experiment = record.experiment()
    proc = experiment.process(process)
    state = read_state(record) or {}
    endpoints = {
        s: Address(h, int(p), h)
        for s, (h, p) in (state.get("endpoints") or record.data["endpoints"]).items()
    }
    env = dict(os.environ, **process_env(experiment, proc, endpoints, bind_host="127.0.0.1"))
    try:
        return subprocess.run(
            command, env=env, cwd=os.path.join(record.data["cwd"], proc.cwd or "")
        ).returncode
    except FileNotFoundError as err:
        raise BackendError(f"cannot run {command[0]!r}: {err.strerror}; check the command") from err


def _as_procs(pid: int) -> list[psutil.Process]:
    try:
        return [psutil.Process(pid)]
    except psutil.Error:
        return []


def _groups(record: ExperimentRecord) -> dict[str, str]:
    """process name -> group name, from the stored spec."""
    experiment = record.experiment()
    return {p.name: experiment.group_of(p.name) for p in experiment.processes()}
