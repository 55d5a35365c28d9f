"""The in-process `test` backend: each process is a thread, for topology tests that run in seconds.

Options:
    targets: process name -> a Python callable `fn(ctx: ProcessContext)`; processes without a
        target run their command as a subprocess (output captured), each from its own thread.

A callable gets the same SYMPH_* environment a real process would (`ctx.env`, `ctx.address(name)`),
should return when `ctx.stopped` is set, and writes its log with `ctx.log(...)`. Returning ends the
process with exit code 0, raising with 1; the RestartPolicy applies as on the other backends.
State lives in this Python process: `describe` from another process reports "unknown".
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from symphony.addresses import Address, address, local_endpoints, process_env
from symphony.backends.base import (
    ALIVE_STATES,
    EXITED,
    FAILED,
    PENDING,
    RESTARTING,
    RUNNING,
    STOPPED,
    UNKNOWN,
    Backend,
    Capabilities,
    ExperimentStatus,
    ProcessStatus,
)
from symphony.errors import BackendError
from symphony.local import proctree
from symphony.records import ExperimentRecord
from symphony.spec import Experiment, Process

_RUNS: dict[str, dict[str, _Worker]] = {}


class ProcessContext:
    """What a target callable receives: its env, its addresses, a stop flag and a log."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.env = env
        self.stop_event = threading.Event()
        self.lines: list[str] = []

    @property
    def stopped(self) -> bool:
        """True once the experiment is being stopped; return soon after."""
        return self.stop_event.is_set()

    def address(self, service: str) -> Address:
        """`symphony.address` against this process's environment."""
        return address(service, self.env)

    def log(self, *parts: Any) -> None:
        """Append one line to this process's log."""
        self.lines.append(" ".join(str(p) for p in parts) + "\n")


class _Worker:
    """A thread that runs (and restarts) one process."""

    def __init__(self, proc: Process, ctx: ProcessContext, target: Callable | None) -> None:
        self.proc, self.ctx, self.target = proc, ctx, target
        self.status = ProcessStatus(proc.name, PENDING)
        self.popen: subprocess.Popen | None = None
        self.thread = threading.Thread(target=self._loop, name=f"symphony-{proc.name}", daemon=True)

    def _loop(self) -> None:
        while True:
            self.status.state, self.status.started, self.status.exit_code = (
                RUNNING,
                time.time(),
                None,
            )
            code = self._call() if self.target else self._command()
            self.status.exit_code, self.status.ended, self.status.pid = code, time.time(), None
            policy = self.proc.restart
            if self.ctx.stopped or not policy.should_restart(code, self.status.restarts):
                self.status.state = (
                    STOPPED if self.ctx.stopped else (EXITED if code == 0 else FAILED)
                )
                return
            self.status.state = RESTARTING
            if self.ctx.stop_event.wait(policy.delay(self.status.restarts)):
                self.status.state = STOPPED
                return
            self.status.restarts += 1

    def _call(self) -> int:
        try:
            self.target(self.ctx)
            return 0
        except Exception:  # noqa: BLE001 - a crashing target is a failed process, not a crash here
            self.ctx.lines.extend(traceback.format_exc().splitlines(keepends=True))
            return 1

    def _command(self) -> int:
        env = dict(os.environ, **self.ctx.env)
        self.popen = subprocess.Popen(
            self.proc.argv(),
            env=env,
            cwd=self.proc.cwd,
            text=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.status.pid = self.popen.pid
        for line in self.popen.stdout:
            self.ctx.lines.append(line)
        return self.popen.wait()


class InProcessBackend(Backend):
    """Threads in this Python process; see the module docstring."""

    name = "test"
    capabilities = Capabilities(single_machine=True, shares_launch_disk=True)
    in_process = True

    def __init__(
        self, records=None, targets: dict[str, Callable] | None = None, **options: Any
    ) -> None:
        if options:
            raise BackendError(f"unknown test backend option(s) {sorted(options)}; known: targets")
        super().__init__(records)
        self.targets = dict(targets or {})

    def launch(
        self, experiment: Experiment, record: ExperimentRecord, *, detach: bool = True
    ) -> None:
        """Start a thread per process; attached, join them (Ctrl-C stops them)."""
        unknown = sorted(set(self.targets) - set(experiment.process_names()))
        if unknown:
            raise BackendError(
                f"targets {unknown} name no process; processes: {experiment.process_names()}"
            )
        endpoints = local_endpoints(experiment)
        run_id = uuid.uuid4().hex
        record.data.update(
            run_id=run_id,
            owner_pid=os.getpid(),
            endpoints={s: [a.host, a.port] for s, a in endpoints.items()},
        )
        record.status = "running"
        record.save()
        workers = {}
        for proc in experiment.processes():
            env = process_env(experiment, proc, endpoints, bind_host="127.0.0.1")
            env[proctree.RUN_ID_ENV] = run_id
            workers[proc.name] = _Worker(
                proc, ProcessContext(proc.name, env), self.targets.get(proc.name)
            )
            workers[proc.name].status.group = experiment.group_of(proc.name)
        _RUNS[str(record.path)] = workers
        for worker in workers.values():
            worker.thread.start()
        if not detach:
            try:
                for worker in workers.values():
                    while worker.thread.is_alive():
                        worker.thread.join(0.1)
            except KeyboardInterrupt:
                self.delete(record)
                record.data["exit_code"] = 130
                record.set_status("stopped")

    def describe(self, record: ExperimentRecord) -> ExperimentStatus:
        """Live thread states (or "unknown" when asked from another Python process)."""
        workers = _RUNS.get(str(record.path))
        if workers is None:
            experiment = record.experiment()
            procs = [
                ProcessStatus(p, UNKNOWN, experiment.group_of(p))
                for p in experiment.process_names()
            ]
        else:
            procs = [ProcessStatus(**vars(w.status)) for w in workers.values()]
        return self.status_from_record(record, procs)

    def logs(
        self,
        record: ExperimentRecord,
        process: str,
        *,
        follow: bool = False,
        tail: int | None = None,
    ) -> Iterator[str]:
        """Lines the process printed (command) or logged with `ctx.log` (callable)."""
        worker = _RUNS.get(str(record.path), {}).get(process)
        if worker is None:
            return iter(())
        return _lines(worker, follow, tail)

    def delete(self, record: ExperimentRecord, *, force: bool = False) -> None:
        """Set every stop flag, stop command trees, and join the threads."""
        workers = _RUNS.get(str(record.path), {})
        for worker in workers.values():
            worker.ctx.stop_event.set()
        pids = [w.popen.pid for w in workers.values() if w.popen]
        proctree.stop_all(pids, record.data.get("run_id"), grace_s=0.0 if force else 2.0)
        for worker in workers.values():
            worker.thread.join(timeout=5.0)
        stuck = [w.proc.name for w in workers.values() if w.thread.is_alive()]
        if stuck:
            raise BackendError(
                f"threads of {stuck} did not return; their targets must check ctx.stopped"
            )


def _lines(worker: _Worker, follow: bool, tail: int | None) -> Iterator[str]:
    start = max(0, len(worker.ctx.lines) - tail) if tail is not None else 0
    while True:
        alive = worker.status.state in ALIVE_STATES and worker.thread.is_alive()
        end = len(worker.ctx.lines)
        yield from worker.ctx.lines[start:end]
        start = end
        if not follow or not alive:
            return
        time.sleep(0.05)
