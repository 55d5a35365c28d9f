"""The `tmux` backend: a tmux session per experiment, a window per process (through libtmux).

Options:
    socket: tmux socket name (`tmux -L NAME`); default env SYMPHONY_TMUX_SOCKET, else the config
        file's `tmux_socket`, else tmux's default server (so `tmux attach -t EXP` just works).
    grace_s: seconds between SIGTERM and SIGKILL when stopping (default 5).

Each window runs `python -m symphony.local.runner`, which runs the process's command with its env
(the SYMPH_* addresses on free 127.0.0.1 ports), copies all output to the pane and to
`<record>/logs/<process>.log`, restarts it per its RestartPolicy and writes
`<record>/tmux/<process>.json` (pid, restarts, exit code). The runner of a process named in
`Experiment.ends_with` stops the other runners when that process has ended for good, so the
experiment ends by itself with no launcher watching (`describe` then says finished, or failed
when that process failed). Windows stay open after their process
ends (remain-on-exit), so the last output stays readable in tmux. Each window's env (`tmux -e`,
tmux >= 3.2) holds the process's variables plus PATH, PYTHONPATH, VIRTUAL_ENV and a few more from
the launching shell, since a long-running tmux server keeps the environment it started with.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import libtmux

from symphony.addresses import local_endpoints, process_env
from symphony.backends.base import (
    ALIVE_STATES,
    FAILED,
    PENDING,
    STOPPED,
    UNKNOWN,
    Backend,
    Capabilities,
    ExperimentStatus,
    ProcessStatus,
)
from symphony.backends.local import local_plan, run_beside
from symphony.errors import BackendError, LaunchRefused
from symphony.local import proctree
from symphony.local.preflight import check_commands
from symphony.local.runner import ENDS_FLAG, read_runner_state
from symphony.logfiles import follow_file, read_lines
from symphony.records import ExperimentRecord, load_config
from symphony.spec import Experiment, Process
from symphony.states import ended_status

INHERITED = (
    "PATH",
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "LD_LIBRARY_PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "CUDA_VISIBLE_DEVICES",
    "MUJOCO_GL",
    "PYOPENGL_PLATFORM",
)


class TmuxBackend(Backend):
    """One tmux session per experiment; see the module docstring."""

    name = "tmux"
    capabilities = Capabilities(
        single_machine=True, shares_launch_disk=True, stop_grace_option="grace_s"
    )

    def __init__(
        self, records=None, socket: str | None = None, grace_s: float = 5.0, **options: Any
    ) -> None:
        if options:
            raise BackendError(
                f"unknown tmux backend option(s) {sorted(options)}; known: socket, grace_s"
            )
        if shutil.which("tmux") is None:
            raise BackendError(
                "tmux is not installed; install it (e.g. `apt-get install tmux`) "
                "or use --backend local"
            )
        super().__init__(records)
        self.socket = (
            socket or os.environ.get("SYMPHONY_TMUX_SOCKET") or load_config().get("tmux_socket")
        )
        self.grace_s = float(grace_s)

    @staticmethod
    def _server(socket: str | None) -> libtmux.Server:
        return libtmux.Server(socket_name=socket) if socket else libtmux.Server()

    def plan(self, experiment: Experiment) -> str:
        """The session and windows a launch would create, with commands and addresses."""
        where = f"tmux session {experiment.name!r} on socket {self.socket or '(default)'}"
        return f"{where}, a window per process:\n" + local_plan(experiment)

    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Create the session and one window per process; attached, wait until all ended or Ctrl-C."""
        check_commands(experiment)
        server = self._server(self.socket)
        if _has_session(server, experiment.name):
            raise LaunchRefused(
                f"tmux session {experiment.name!r} exists already (socket "
                f"{self.socket or 'default'}); kill it or launch with another --name"
            )
        endpoints = local_endpoints(experiment)
        record.data.update(
            run_id=uuid.uuid4().hex,
            socket=self.socket,
            session=experiment.name,
            cwd=os.getcwd(),
            grace_s=self.grace_s,
            endpoints={s: [a.host, a.port] for s, a in endpoints.items()},
        )
        record.file("tmux").mkdir(exist_ok=True)
        record.status = "running"
        record.save()
        for i, proc in enumerate(experiment.processes()):
            env = process_env(experiment, proc, endpoints, bind_host="127.0.0.1")
            env = {
                **_inherited_env(),
                **env,
                proctree.RUN_ID_ENV: record.data["run_id"],
                "PYTHONUNBUFFERED": "1",
            }
            verb = (
                ["new-session", "-d", "-s", experiment.name]
                if i == 0
                else ["new-window", "-d", "-t", f"={experiment.name}:"]
            )
            args = verb + ["-n", proc.name, "-c", os.path.join(os.getcwd(), proc.cwd or "")]
            args += [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
            args += [
                self._window_command(record, proc, proc.name in experiment.ends_with),
                ";",
                "set-option",
                "-w",
                "-t",
                f"={experiment.name}:{proc.name}",
                "remain-on-exit",
                "on",
            ]
            result = server.cmd(*args)
            if result.stderr:
                raise BackendError(f"tmux could not start {proc.name!r}: {' '.join(result.stderr)}")
        if not detach:
            self._attach(record)

    @staticmethod
    def _window_command(record: ExperimentRecord, proc: Process, ends: bool) -> str:
        runner = [
            sys.executable,
            "-m",
            "symphony.local.runner",
            str(record.file(f"tmux/{proc.name}.json")),
            str(record.log_path(proc.name)),
            json.dumps(asdict(proc.restart)),
            *([ENDS_FLAG] if ends else []),
            "--",
            *proc.argv(),
        ]
        return shlex.join(runner)

    def _attach(self, record: ExperimentRecord) -> None:
        sock = f"-L {record.data['socket']} " if record.data.get("socket") else ""
        print(
            f"watch it with `tmux {sock}attach -t {record.name}`; Ctrl-C here stops it", flush=True
        )
        try:
            while any(p.state in ALIVE_STATES for p in self.describe(record).processes):
                time.sleep(0.5)
        except KeyboardInterrupt:
            self.delete(record)
            record.data["exit_code"] = 130
            record.set_status("stopped")

    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """State from each runner's report, checked against the pane (alive, dead, exit status)."""
        server = self._server(record.data.get("socket"))
        panes = _panes(server, record.data.get("session", record.name))
        experiment = record.experiment()
        procs = []
        for proc in experiment.processes():
            state = read_runner_state(record.file(f"tmux/{proc.name}.json")) or {}
            pane = panes.get(proc.name)
            status = ProcessStatus(
                proc.name,
                state.get("state", PENDING),
                experiment.group_of(proc.name),
                restarts=state.get("restarts", 0),
                last_end=state.get("last_end"),
                pid=state.get("pid"),
                started=state.get("started"),
                ended=state.get("ended"),
                exit_code=state.get("exit_code"),
            )
            if status.state in ALIVE_STATES and (pane is None or pane["dead"]):
                status.state = STOPPED if pane is None else FAILED  # the runner itself was killed
                if pane is not None and pane["status"] is not None:
                    status.exit_code = pane["status"]
            if pane is not None and status.state == PENDING and pane["dead"]:
                status.state = UNKNOWN
            status.location = f"tmux {record.name}:{proc.name}" if pane else None
            procs.append(status)
        described = self.status_from_record(record, procs, socket=record.data.get("socket"))
        states = {p.name: p.state for p in procs}
        described.status = ended_status(experiment.ends_with, states, described.status)
        return described

    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """The complete output from the log file the runner tees into."""
        path = record.log_path(process)
        if not follow:
            return iter(read_lines(path, tail))
        return follow_file(
            path, lambda: self.describe(record).process(process).state in ALIVE_STATES, tail
        )

    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """Stop each runner (it stops its command), sweep leftovers, then kill the session."""
        server = self._server(record.data.get("socket"))
        session = record.data.get("session", record.name)
        grace = 0.0 if force else float(record.data.get("grace_s", self.grace_s))
        runners = [p["pid"] for p in _panes(server, session).values() if not p["dead"]]
        left = _stop_runners(server, runners, grace + (0 if force else 2.0))
        proctree.stop_all(left, record.data.get("run_id"), grace_s=0.0 if force else 1.0)
        if _has_session(server, session):
            server.cmd("kill-session", "-t", f"={session}")

    def exec(self, record: ExperimentRecord, process: str, command: list[str]) -> int:
        """Run `command` on this machine with `process`'s environment and working directory."""
        return run_beside(record, process, command)


def _inherited_env() -> dict[str, str]:
    """The launching shell's variables a window needs to find the same programs and settings.

    A tmux server keeps the environment it was started with, which may predate an activated
    virtualenv; these are passed explicitly (the whole environment could exceed tmux's limits).
    """
    return {k: v for k, v in os.environ.items() if k in INHERITED or k.startswith("SYMPHONY_")}


def _stop_runners(server: libtmux.Server, pids: list[int], wait_s: float) -> list[int]:
    """SIGTERM each pane's runner (it stops its command) and wait up to `wait_s` for them to end;
    returns those still running.

    A runner that ended counts as ended while it is a zombie: a tmux linked with libutempter
    can miss the SIGCHLD of a pane's exit and leave it unreaped until the next one
    (tmux/tmux#311), so tmux is sent one to reap them.
    """
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + wait_s
    while (left := [p for p in pids if proctree.alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.1)  # polling the runners' exit (they are tmux's children, not ours)
    server_pid = "".join(server.cmd("display-message", "-p", "#{pid}").stdout).strip()
    if pids and server_pid.isdigit():
        os.kill(int(server_pid), signal.SIGCHLD)
    return left


def _has_session(server: libtmux.Server, name: str) -> bool:
    return not server.cmd("has-session", "-t", f"={name}").stderr


def _panes(server: libtmux.Server, session: str) -> dict[str, dict[str, Any]]:
    """window name -> {pid, dead, status} for the first pane of each window of `session`."""
    if not _has_session(server, session):
        return {}
    fmt = "#{window_name}\t#{pane_pid}\t#{pane_dead}\t#{pane_dead_status}"
    result = server.cmd("list-panes", "-s", "-t", f"={session}", "-F", fmt)
    panes: dict[str, dict[str, Any]] = {}
    for line in result.stdout:
        name, pid, dead, status = (line.split("\t") + ["", "", "", ""])[:4]
        panes.setdefault(
            name,
            {
                "pid": int(pid) if pid.isdigit() else None,
                "dead": dead == "1",
                "status": int(status) if status.lstrip("-").isdigit() else None,
            },
        )
    return panes
