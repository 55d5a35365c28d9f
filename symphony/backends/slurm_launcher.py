"""Runs inside a Slurm job: resolves a group's addresses, then starts and watches its processes.

`python -m symphony.backends.slurm_launcher FOLDER GROUP` is the whole batch script of a group's
job. FOLDER is the experiment's shared folder (spec.yaml, slurm.json, names/, status/, logs/).

1. For every service the group binds: a port free on this node, published in `names/`.
2. For every service it connects to: wait for its record (see `slurm_names`).
3. Start each process with the SYMPH_* variables (`symphony.addresses.process_env`), its output
   appended to `logs/<process>.log`; restart per its policy; record its state in
   `status/<process>.json` (what `symphony describe` reads).
4. On SIGTERM (scancel, time limit) pass SIGTERM to every process group, SIGKILL after a grace
   period. Exit 0 when every process exited 0, else 1 (Slurm then shows the job FAILED).
5. `Experiment.ends_with`: once such a process of this group ended for good (exited, or failed
   past its restarts), write `ended.json` (the process, its state and exit code, the launch id);
   every group's launcher, this one included, finds it on the shared folder and stops its
   processes as on SIGTERM, then exits 0 (they were stopped for the experiment's end), so no
   job holds its node until the time limit.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from symphony.addresses import Address, free_port, process_env
from symphony.backends.slurm_jobs import guard_id, run_id
from symphony.backends.slurm_names import NameRecord, NameStore
from symphony.local.proctree import RUN_ID_ENV, die_with_parent
from symphony.spec import Experiment, Process, ProcessGroup

GRACE_S = 10.0
POLL_S = 0.2
ENDED = "ended.json"
"""The end marker in the experiment's folder (step 5 of the module docstring)."""
END_CHECK_S = 1.0
"""How often a launcher looks for the end marker (a read on the shared filesystem each time)."""


def node_host() -> str:
    """The host name other nodes reach this one by (env SYMPHONY_SLURM_HOST overrides)."""
    return os.environ.get("SYMPHONY_SLURM_HOST") or socket.gethostname()


def write_status(folder: Path, name: str, **fields: Any) -> None:
    """Atomically write `status/<name>.json`."""
    write_json(folder / "status" / f"{name}.json", fields)


def write_json(path: Path, fields: dict[str, Any]) -> None:
    """Atomically write `path` (readers on other nodes never see half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(fields))
    os.replace(tmp, path)


def resolve_endpoints(
    folder: Path, exp: Experiment, group: ProcessGroup, launch: dict
) -> dict[str, Address]:
    """Publish the group's bound services, then wait for the ones it connects to."""
    store = NameStore(folder, launch["launch_id"])
    host, job_id = node_host(), os.environ.get("SLURM_JOB_ID", "")
    endpoints: dict[str, Address] = {}
    for proc in group.processes:
        for service in proc.bound:
            port = free_port("0.0.0.0")
            while any(a.port == port for a in endpoints.values()):
                port = free_port("0.0.0.0")
            endpoints[service] = Address(host, port)
            store.publish(NameRecord(service, host, port, proc.name, job_id, launch["launch_id"]))
    wanted = sorted({s for p in group.processes for s in p.connected} - set(endpoints))
    for service, rec in store.resolve(wanted, float(launch.get("resolve_timeout_s", 600))).items():
        endpoints[service] = Address(rec.host, rec.port)
    return endpoints


class GroupRunner:
    """Starts a group's processes, restarts them per policy, and stops them on SIGTERM."""

    def __init__(
        self,
        folder: Path,
        exp: Experiment,
        group: ProcessGroup,
        endpoints: dict[str, Address],
        run_id: str = "",
        launch_id: str = "",
    ) -> None:
        self.folder, self.exp, self.group, self.endpoints = folder, exp, group, endpoints
        self.run_id, self.launch_id = run_id, launch_id
        self.ended_by: dict[str, Any] | None = None  # the end marker that stopped this group
        self._end_checked = 0.0
        self.children: dict[str, subprocess.Popen] = {}
        self.restarts = {p.name: 0 for p in group.processes}
        self.due: dict[str, float] = {}  # process -> when its restart is due
        self.started: dict[str, float] = {}
        self.stopping = threading.Event()
        self.location = f"job {os.environ.get('SLURM_JOB_ID', '?')} on {os.environ.get('SLURMD_NODENAME', node_host())}"

    def start(self, proc: Process) -> None:
        env = {**os.environ, **process_env(self.exp, proc, self.endpoints, bind_host="*")}
        if self.run_id:
            env[RUN_ID_ENV] = self.run_id
        log = open(self.folder / "logs" / f"{proc.name}.log", "ab")  # noqa: SIM115 - child owns it
        with log:
            child = subprocess.Popen(
                proc.argv(),
                env=env,
                cwd=proc.cwd or None,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=die_with_parent,  # noqa: PLW1509 - no threads start children here
            )
        self.children[proc.name] = child
        self.started[proc.name] = time.time()
        write_status(
            self.folder,
            proc.name,
            state="running",
            pid=child.pid,
            location=self.location,
            started=self.started[proc.name],
            restarts=self.restarts[proc.name],
        )

    def on_exit(self, proc: Process, code: int) -> None:
        del self.children[proc.name]
        count = self.restarts[proc.name]
        again = not self.stopping.is_set() and proc.restart.should_restart(code, count)
        state = (
            "restarting"
            if again
            else ("stopped" if self.stopping.is_set() else ("exited" if code == 0 else "failed"))
        )
        write_status(
            self.folder,
            proc.name,
            state=state,
            exit_code=code,
            ended=time.time(),
            started=self.started.get(proc.name),
            location=self.location,
            restarts=count,
        )
        print(
            f"symphony: {proc.name} ended with exit code {code}; {state}",
            file=sys.stderr,
            flush=True,
        )
        if again:
            self.due[proc.name] = time.monotonic() + proc.restart.delay(count)
        elif proc.name in self.exp.ends_with and state in ("exited", "failed"):
            end = {"process": proc.name, "state": state, "exit_code": code}
            write_json(self.folder / ENDED, {**end, "launch_id": self.launch_id})

    def _check_end(self) -> None:
        """Stop this group's processes once the experiment's end marker of this launch is there."""
        if self.stopping.is_set() or not self.exp.ends_with:
            return
        if time.monotonic() < self._end_checked + END_CHECK_S:
            return
        self._end_checked = time.monotonic()
        try:
            end = json.loads((self.folder / ENDED).read_text())
        except (OSError, ValueError):
            return
        if isinstance(end, dict) and end.get("launch_id") == self.launch_id:
            self.ended_by = end
            self.terminate(signal.SIGTERM, None)

    def terminate(self, signum: int, frame: Any) -> None:
        """Signal handler: pass SIGTERM on to every process group; the loop then reaps them."""
        self.stopping.set()
        self.due.clear()
        for child in self.children.values():
            _signal_group(child.pid, signal.SIGTERM)

    def run(self) -> int:
        """Start everything and supervise until every process ended; returns the job's exit code."""
        procs = {p.name: p for p in self.group.processes}
        codes: dict[str, int] = {}
        for proc in self.group.processes:
            self.start(proc)
        stop_deadline = None
        while self.children or self.due:
            self._check_end()
            for name, child in list(self.children.items()):
                code = child.poll()
                if code is not None:
                    codes[name] = code
                    self.on_exit(procs[name], code)
            for name, when in list(self.due.items()):
                if time.monotonic() >= when:
                    del self.due[name]
                    self.restarts[name] += 1
                    self.start(procs[name])
            if self.stopping.is_set():
                stop_deadline = stop_deadline or time.monotonic() + GRACE_S
                if time.monotonic() >= stop_deadline:
                    for child in self.children.values():
                        _signal_group(child.pid, signal.SIGKILL)
            time.sleep(POLL_S)  # polling children with a deadline; SIGTERM sets `stopping`
        if self.ended_by is not None:  # stopped for the experiment's end: only a leader's code
            mine = [codes.get(n, 0) for n in procs if n in self.exp.ends_with]
            return 0 if all(c == 0 for c in mine) else 1
        if self.stopping.is_set():
            return 128 + signal.SIGTERM
        return 0 if all(c == 0 for c in codes.values()) else 1


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    """Entry point: `python -m symphony.backends.slurm_launcher FOLDER GROUP`."""
    folder_arg, group_name = (argv if argv is not None else sys.argv[1:])[:2]
    folder = Path(folder_arg)
    exp = Experiment.from_yaml((folder / "spec.yaml").read_text())
    launch = json.loads((folder / "slurm.json").read_text())
    group = next(g for g in exp.groups() if g.name == group_name)
    for proc in group.processes:
        write_status(
            folder,
            proc.name,
            state="pending",
            location=f"job {os.environ.get('SLURM_JOB_ID', '?')}",
        )
    try:
        endpoints = resolve_endpoints(folder, exp, group, launch)
    except Exception as err:  # noqa: BLE001 - report it where `symphony logs` looks, then fail
        for proc in group.processes:
            with open(folder / "logs" / f"{proc.name}.log", "a") as log:
                log.write(f"symphony: could not start {proc.name}: {err}\n")
            write_status(folder, proc.name, state="failed", exit_code=None, ended=time.time())
        print(f"symphony: {err}", file=sys.stderr, flush=True)
        return 1
    marker = run_id(launch["launch_id"], group.name)
    guard = start_guard(marker, folder)
    runner = GroupRunner(folder, exp, group, endpoints, marker, launch["launch_id"])
    signal.signal(signal.SIGTERM, runner.terminate)
    signal.signal(signal.SIGINT, runner.terminate)
    code = runner.run()
    guard.terminate()  # nothing is left to guard; it sweeps once more and exits
    return code


def start_guard(marker: str, folder: Path) -> subprocess.Popen:
    """The guard (`slurm_guard`) that ends the processes marked `marker` if this launcher dies."""
    env = {**os.environ, RUN_ID_ENV: guard_id(marker)}  # not `marker`: it never sweeps itself
    env["SYMPHONY_GUARD_PARENT"] = str(os.getpid())
    return subprocess.Popen(
        [sys.executable, "-m", "symphony.backends.slurm_guard", marker, str(folder)],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


if __name__ == "__main__":
    sys.exit(main())
