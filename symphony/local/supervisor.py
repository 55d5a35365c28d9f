"""The local backend's supervisor: starts each process, logs it, restarts it, stops every tree.

It runs in the `symphony launch` process (attached) or as a daemon (`--detach`,
`python -m symphony.local.supervisor RECORD_DIR`). Only the supervisor handles Ctrl-C / SIGTERM: each
process runs in its own session, so a terminal's Ctrl-C reaches the supervisor alone, which then
sends SIGTERM to every process tree, waits the grace period and SIGKILLs what is left (a second
Ctrl-C kills at once).

It writes `state.json` in the record folder (atomically) whenever something changes:

    {"supervisor_pid", "supervisor_started", "status": starting|running|stopping|finished|failed|
     stopped, "error", "endpoints": {service: [host, port]}, "updated",
     "processes": {name: {"state", "pid", "started", "ended", "exit_code", "restarts"}},
     "fork_servers": [{"pid", "state", "preload", "processes"}]}

A process that declares `preload` starts as a fork of a fork server that imported those modules
once (`symphony.local.forking`; it stays `pending` while the server imports); any other with Popen.
Either way it is the supervisor's child. Lines about the fork servers go to `supervisor.log`.

A process's log (`logs/<process>.log`) is only ever appended to: a restart adds
`--- restarted after signal 9 (attempt 2) ---` below the earlier attempt's lines, then the new
attempt's output.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from symphony.addresses import Address, free_port, port_is_free, process_env
from symphony.local import proctree
from symphony.local.forking import ForkServers
from symphony.records import ExperimentRecord
from symphony.resources import ending, restart_mark
from symphony.spec import Experiment, Process
from symphony.states import EXITED, FAILED, PENDING, RESTARTING, RUNNING, STOPPED, ended_leader

STATE_FILE = "state.json"
SUPERVISOR_LOG = "supervisor.log"


@dataclass
class _Run:
    """What the supervisor tracks for one process."""

    state: str = PENDING
    pid: int | None = None
    started: float | None = None
    ended: float | None = None
    exit_code: int | None = None
    restarts: int = 0
    last_end: str | None = None  # how it last ended, kept over restarts ("killed by SIGKILL")


class Supervisor:
    """Runs one experiment's processes until they end or a stop is requested.

    Args:
        record: the experiment's record (its folder holds logs and state.json).
        grace_s: seconds between SIGTERM and SIGKILL when stopping.
        poll_s: how often children are checked.
    """

    def __init__(
        self, record: ExperimentRecord, grace_s: float = 5.0, poll_s: float = 0.05
    ) -> None:
        self.record = record
        self.experiment: Experiment = record.experiment()
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.runs = {p.name: _Run() for p in self.experiment.processes()}
        self.popens: dict[str, Any] = {}  # subprocess.Popen, or a ForkedChild
        self.forks = ForkServers(self._log_line, str(record.file(SUPERVISOR_LOG)))
        self.due: dict[str, float] = {}
        self.restart_times: dict[str, list[float]] = {n: [] for n in self.runs}  # the backoff
        self.crash_times: dict[str, list[float]] = {n: [] for n in self.runs}  # max_restarts
        self.stops_requested = 0
        self.previous_handlers: dict[int, Any] = {}
        self.status = "starting"
        self.error: str | None = None
        self.endpoints = {
            s: Address(h, int(p), h) for s, (h, p) in record.data["endpoints"].items()
        }

    def run(self) -> int:
        """Supervise until done; returns 0 (all exited 0), 1 (a process failed), 130 (stopped)."""
        self._install_signal_handlers()
        self._reserve_ports()
        processes = self.experiment.processes()
        launches = [(p.name, p.argv(), self._env(p), p.preload) for p in processes]
        self.forks.start(launches, self.record.data["cwd"])
        if not self._start_pending():
            return self._finish("failed", 1)
        self.status = "running"
        self._save()
        while not self.stops_requested:
            self.forks.step({p.pid for p in self.popens.values()})
            if not self._start_pending():
                return self._finish("failed", 1)
            alive = self._step()
            leader = ended_leader(self.experiment.ends_with, self._states())
            if leader is not None:  # Experiment.ends_with: its end is the experiment's end
                failed = self.runs[leader].state == FAILED
                self._note(leader, "ended: it ends the experiment, stopping the other processes")
                self._stop_all()
                ended = "failed" if failed else "finished"
                return self._finish(ended, 1 if failed else 0, outcome=ended)
            if not alive:
                failed = any(r.state == FAILED for r in self.runs.values())
                return self._finish("failed" if failed else "finished", 1 if failed else 0)
            time.sleep(self.poll_s)
        self._stop_all()
        return self._finish("stopped", 130)

    def _start_pending(self) -> bool:
        """Start each process not started yet, unless its fork server is still importing;
        False (every process stopped, the error recorded) when one cannot start."""
        for proc in self.experiment.processes():
            if self.runs[proc.name].state == PENDING and not self.forks.waiting(proc.name):
                try:
                    self._spawn(proc)
                except OSError as err:
                    self.error = f"could not start: {err}"
                    self._stop_all()
                    return False
        return True

    def _states(self) -> dict[str, str]:
        return {name: run.state for name, run in self.runs.items()}

    def request_stop(self, *_: Any) -> None:
        """Signal handler: the first call stops gracefully, the second kills at once."""
        self.stops_requested += 1
        if self.stops_requested > 1:  # impatient: kill everything now, mid grace period
            self.grace_s = 0.0
            pids = [p.pid for p in self.popens.values()]
            for proc in proctree.gather(pids, self.record.data["run_id"]):
                try:
                    proc.kill()
                except proctree.psutil.Error:
                    pass

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self.previous_handlers[sig] = signal.signal(sig, self.request_stop)

    def _restore_signal_handlers(self) -> None:
        for sig, handler in self.previous_handlers.items():
            signal.signal(sig, handler)

    def _reserve_ports(self) -> None:
        """Re-check each port right before starting; a port taken since allocation gets a new one."""
        taken = {a.port for a in self.endpoints.values()}
        for service, addr in self.endpoints.items():
            if not port_is_free(addr.port, addr.host):
                port = free_port(addr.host)
                while port in taken:
                    port = free_port(addr.host)
                taken.add(port)
                self.endpoints[service] = Address(addr.host, port, addr.bind_host)

    def _env(self, proc: Process) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        env[proctree.RUN_ID_ENV] = self.record.data["run_id"]
        env.update(process_env(self.experiment, proc, self.endpoints, bind_host="127.0.0.1"))
        return env

    def _spawn(self, proc: Process) -> None:
        run = self.runs[proc.name]
        log_path = self.record.log_path(proc.name)
        cwd = os.path.join(self.record.data["cwd"], proc.cwd or "")
        with open(log_path, "ab") as log:  # a fork server's fork, or Popen (symphony.local.forking)
            self.popens[proc.name] = self.forks.start_process(
                proc.name, proc.argv(), self._env(proc), cwd, log
            )
        pid = self.popens[proc.name].pid
        run.state, run.pid, run.started = RUNNING, pid, proctree.create_time(pid) or time.time()
        run.ended = run.exit_code = None
        self._save()

    def _step(self) -> bool:
        """Reap ended processes, restart due ones; False when nothing is alive or pending."""
        now = time.time()
        for proc in self.experiment.processes():
            run = self.runs[proc.name]
            if run.state == RUNNING and (code := self.popens[proc.name].poll()) is not None:
                self._ended(proc, run, code, now)
            elif run.state == RESTARTING and now >= self.due[proc.name]:
                run.restarts += 1
                self.restart_times[proc.name].append(now)
                crashes = self.crash_times[proc.name]
                if proc.restart.counts(run.exit_code):
                    crashes.append(now)
                counted = proc.restart.counted(crashes, now)
                limit = proc.restart.max_restarts
                within = "" if proc.restart.window_s is None else f" in {proc.restart.window_s:g}s"
                self._note(proc.name, f"restart {run.restarts} ({counted}/{limit} crashes{within})")
                self._mark(proc.name, restart_mark(run.exit_code, run.restarts + 1))
                try:
                    self._spawn(proc)
                except OSError as err:
                    self._note(proc.name, f"restart failed: {err}")
                    run.state = FAILED
                    self._save()
        return any(r.state in (PENDING, RUNNING, RESTARTING) for r in self.runs.values())

    def _ended(self, proc: Process, run: _Run, code: int, now: float) -> None:
        run.ended, run.exit_code, run.pid = now, code, None
        # Children that outlived the process would survive it: stop them now.
        proctree.terminate(proctree.tree(self.popens[proc.name].pid), 1.0)
        run.last_end = ending(code)
        crashes = proc.restart.counted(self.crash_times[proc.name], now)
        if proc.restart.should_restart(code, crashes if proc.restart.counts(code) else 0):
            run.state = RESTARTING
            delay = proc.restart.delay(proc.restart.counted(self.restart_times[proc.name], now))
            self.due[proc.name] = now + delay
            self._note(proc.name, f"{run.last_end}; restarting in {delay:g}s")
        else:
            run.state = EXITED if code == 0 else FAILED
        self._save()

    def _note(self, process: str, text: str) -> None:
        """Append a supervisor line to a process's log, so the log tells the whole story."""
        with open(self.record.log_path(process), "a") as log:
            log.write(f"[symphony] {time.strftime('%H:%M:%S')} {process}: {text}\n")

    def _mark(self, process: str, line: str) -> None:
        """Append `line` (`resources.restart_mark`) to a process's log, below its earlier
        attempts' lines."""
        with open(self.record.log_path(process), "a") as log:
            log.write(line + "\n")

    def _log_line(self, text: str) -> None:
        """Append a line to the supervisor's own log (e.g. how the fork servers fare)."""
        with open(self.record.file(SUPERVISOR_LOG), "a") as log:
            log.write(f"[symphony] {time.strftime('%H:%M:%S')} {text}\n")

    def _stop_all(self) -> None:
        self.status = "stopping"
        self._save()
        pids = [p.pid for p in self.popens.values()]
        self.forks.close(set(pids))  # no more forks; orphans go to init again
        proctree.stop_all(pids, self.record.data["run_id"], self.grace_s)
        now = time.time()
        for name, run in self.runs.items():
            if name in self.popens:
                self.popens[name].poll()
            if run.state in (RUNNING, RESTARTING, PENDING):
                run.state, run.ended, run.pid = STOPPED, now, None

    def _finish(self, status: str, code: int, outcome: str | None = None) -> int:
        """Record how it ended; `outcome` when the supervisor itself ended the experiment
        (`ends_with`: the other processes it stopped do not make it "stopped")."""
        self._restore_signal_handlers()
        self.forks.close({p.pid for p in self.popens.values()})
        self.status = status
        self._save()
        try:  # else only the status: an `outcome` the launcher wrote meanwhile stays
            ended = {"outcome": outcome} if outcome else {}
            self.record.update(status=status, ended=time.time(), **ended)
        except OSError:
            pass  # the record was deleted under us (symphony delete --force)
        return code

    def _save(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            "supervisor_started": proctree.create_time(os.getpid()),
            "status": self.status,
            "error": self.error,
            "endpoints": {s: [a.host, a.port] for s, a in self.endpoints.items()},
            "updated": time.time(),
            "processes": {n: asdict(r) for n, r in self.runs.items()},
            "fork_servers": self.forks.describe(),
        }
        write_json(self.record.file(STATE_FILE), state)


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON atomically (readers never see half a file); a vanished folder is ignored."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, path)
    except FileNotFoundError:
        pass


def read_state(record: ExperimentRecord) -> dict[str, Any] | None:
    """The supervisor's last state.json (None before it wrote one)."""
    try:
        return json.loads(record.file(STATE_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def daemon_main(argv: list[str]) -> None:
    """`python -m symphony.local.supervisor RECORD_DIR GRACE_S`: detach twice, then supervise."""
    folder, grace_s = Path(argv[0]), float(argv[1])
    if os.fork() > 0:
        os._exit(0)  # the launcher reaps this middle process; the supervisor is adopted by init
    os.setsid()
    try:
        record = ExperimentRecord.load(folder)
        log = os.open(record.file(SUPERVISOR_LOG), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    except FileNotFoundError:  # the launch was interrupted and removed its record: no run
        os._exit(0)
    for fd in (1, 2):
        os.dup2(log, fd)
    os._exit(Supervisor(record, grace_s=grace_s).run())


if __name__ == "__main__":
    daemon_main(sys.argv[1:])
