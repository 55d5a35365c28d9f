"""What every component process shares: its run, a stop flag set by SIGTERM, metrics reporting
(to the metrics sink, and its own Prometheus `/metrics`: `self.prom`), and its log (`self.log`,
`surreal.monitoring.logs`)."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import caraml
import symphony
from surreal.monitoring import crash, logs, prometheus
from surreal.runtime.runfolder.rundir import RunDir
from surreal.runtime.wire import report_token
from surreal.runtime.wire.waits import Waits


class Stopped(SystemExit):
    """Raised in a component's main thread by the stop signal: the process exits with 128 + the
    signal's number (143 on SIGTERM, 130 on SIGINT), as one killed by it would. A stop is not a
    success: a Kubernetes Job whose process exited 0 on a drained or preempted node's SIGTERM
    would count as complete and never run again (for the learner: the run ended as if at its
    budget), and every supervisor's `on-failure` policy would leave it ended. Exiting as
    stopped, it comes back (a kill from outside never counts against its restarts:
    `symphony.resources.outside_kill`)."""

    stop = True
    """How `surreal.monitoring.logs.ending` tells a stop from a `SystemExit` of the code's own."""


STOP_REQUESTED = threading.Event()
"""Set by the first stop signal: an exception after it is part of stopping, not a crash."""

STOP_DEADLINE_S = 30.0
"""A process still stopping this long after its stop signal exits at once. Its supervisor
kills it sooner (after the backend's grace period); this bounds a stop that has no supervisor
left to kill it (one killed with SIGKILL sends SIGTERM to each process it started)."""


class Component:
    """A component's view of its run (config, algorithm, env) and its link to the metrics sink.

    Args:
        run_dir: the run folder written by `surreal launch`.
        role: component name for metrics (`actor`, `learner`, ...).
        index: which one of several (actor index).
    """

    def __init__(self, run_dir: str | Path, role: str, index: int = 0) -> None:
        self.run = RunDir(Path(run_dir))
        self.config = self.run.load_config()
        self.env_info = self.run.env_info()
        self.role, self.index = role, index
        self.log = logs.get()
        """This process's logger (`surreal.monitoring.logs`: start, progress, warnings, stop)."""
        self.warnings = logs.Warnings(self.log)
        """Rate-limited warnings: each kind at most every `logs.WARN_S` seconds, counted."""
        self.progress = logs.Progress(self.log)
        """`progress:` lines (`tick`); a component that writes none gets them from its reports."""
        self.own_progress = False
        """True once the component writes progress lines itself (`tick`, or set by its main
        before its first report): its reports then make none."""
        self.stopping = threading.Event()
        self.stop_code: int | None = None
        """The exit code of a stop this process asked of itself (`checkpoint.STALLED_EXIT`);
        None: a stop signal's 128 + its number."""
        self._parent = os.getppid()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self._metrics = caraml.Pusher(self.address("metrics").tcp, hwm=10_000)
        self.token = report_token.read()
        """The run's metrics token (`surreal.runtime.wire.report_token`), sent with each report."""
        self.boot = os.urandom(4).hex()
        """This process's start, told apart from the role's earlier ones by the sink."""
        self.started_at: int | None = None
        """The learner's step when it started (its checkpoint's): the sink's step goes back to it
        and `metrics.jsonl` loses the rows past it (`surreal.runtime.processes.metrics`)."""
        restarts = self.restarts = crash.note_start(self.run.path, role, index)
        """Earlier starts of this process in this launch (0: its first start)."""
        if restarts:
            self.log.warning(
                "restarted: %d earlier start%s of this process in this launch (crashes: %s)",
                restarts,
                "" if restarts == 1 else "s",
                crash.crashes_file(self.run.path),
            )
        self.prom = prometheus.start(self.run.path, role, index, restarts)
        """This process's Prometheus series (`surreal.monitoring.prometheus.METRICS`)."""
        self.reports = 0
        self.waits = Waits(self.log, self.report_waits)
        """What this process waits on (`surreal.runtime.wire.waits`): said in its log and reports."""

    @functools.cached_property
    def algo(self) -> type:
        """The run's Learner class, imported on first use: a process that never asks for it
        (the parameter server, the metrics sink) never imports the learner's module or torch."""
        return self.run.algo_class()

    def _on_signal(self, signum: int, _frame: object) -> None:
        """First SIGTERM/SIGINT: unwind from wherever the process blocks (a socket, an env
        step), so `finally` blocks close sockets and the learner checkpoints; later ones are
        ignored so that cleanup finishes."""
        if not self.stopping.is_set():
            self.stopping.set()
            STOP_REQUESTED.set()
            if os.getppid() != self._parent:  # the supervisor died (its death signal)
                self.log.warning(
                    "the supervisor (pid %d) is gone: stopping (the run can be continued "
                    "with `surreal launch --resume %s`)",
                    self._parent,
                    self.run.path,
                )
            deadline = threading.Timer(STOP_DEADLINE_S, os._exit, (1,))
            deadline.daemon = True
            deadline.start()
            raise Stopped(self.stop_code or 128 + signum)

    @staticmethod
    def address(service: str) -> Any:
        """The symphony Address of a declared service; in a population member (`surreal.pbt`)
        the member's own one: `$SURREAL_SERVICE_PREFIX` (e.g. `m0-`) + `service`."""
        return symphony.address(os.environ.get("SURREAL_SERVICE_PREFIX", "") + service)

    @staticmethod
    def declares(service: str) -> bool:
        """Whether this process declared `service` (binds or connects it): a service the
        experiment wires only for some runs (`surreal.runtime.wire.goal`)."""
        name = os.environ.get("SURREAL_SERVICE_PREFIX", "") + service
        return name in os.environ.get("SYMPH_SERVICES", "").split(",")

    def report(self, step: int, scalars: dict[str, float] | None = None, **extra: Any) -> None:
        """Send metrics at the global `step` to the metrics sink (never blocks for long)."""
        message = {
            "source": self.role,
            "index": self.index,
            "step": int(step),
            "time": time.time(),
            "scalars": {k: float(v) for k, v in (scalars or {}).items()},
        }
        message.update(extra)
        self._metrics.push(self.signed(message))
        self.prom.port_traffic("metrics", "out")
        self.reports += 1
        if not self.own_progress:  # ES, DDPG's learner, multi-agent roles: from their reports
            shown = {k: logs.rate(v) for k, v in list(message["scalars"].items())[:6]}
            self.progress.tick({"reports": self.reports}, {"step": step, **shown})

    def report_waits(self) -> None:
        """Send this process's waits alone (`surreal.runtime.wire.waits`); the sink keeps them in
        `status.json` for the launcher's progress line."""
        message = {
            "source": self.role,
            "index": self.index,
            "step": 0,
            "time": time.time(),
            "scalars": {},
            "process": crash.process_name(self.role, self.index),
            "waiting": self.waits.field(),
            "wait_only": True,
        }
        self._metrics.push(self.signed(message))

    def signed(self, message: dict[str, Any]) -> dict[str, Any]:
        """`message` with what the sink checks: the run's token, this process's start, and a
        learner's first step."""
        message["boot"] = self.boot
        if self.token is not None:
            message["token"] = self.token
        if self.started_at is not None:
            message["start"] = self.started_at
        return message

    def tick(self, totals: dict[str, float], state: dict[str, Any] | None = None) -> bool:
        """A `progress:` line when one is due (`logs.Progress.tick`); from the first call on, the
        process's reports no longer make progress lines of their own."""
        self.own_progress = True
        return self.progress.tick(totals, state)

    def close(self) -> None:
        """Close the metrics link and stop serving `/metrics` (and write pending warnings)."""
        self.warnings.flush()
        self._metrics.close()
        self.prom.close()
