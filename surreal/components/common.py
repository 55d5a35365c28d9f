"""What every component process shares: its run, a stop flag set by SIGTERM, metrics reporting
(to the metrics sink, and its own Prometheus `/metrics`: `self.prom`)."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import Any

from surreal.rundir import RunDir


class Stopped(SystemExit):
    """Raised in a component's main thread by the stop signal."""


STOP_REQUESTED = threading.Event()
"""Set by the first stop signal: an exception after it is part of stopping, not a crash."""


class Component:
    """A component's view of its run (config, algorithm, env) and its link to the metrics sink.

    Args:
        run_dir: the run folder written by `surreal launch`.
        role: component name for metrics (`actor`, `learner`, ...).
        index: which one of several (actor index).
    """

    def __init__(self, run_dir: str | Path, role: str, index: int = 0) -> None:
        import caraml

        self.run = RunDir(Path(run_dir))
        self.config = self.run.load_config()
        self.algo = self.run.algo_class()
        self.env_info = self.run.env_info()
        self.role, self.index = role, index
        self.stopping = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        self._metrics = caraml.Pusher(self.address("metrics").tcp, hwm=10_000)
        from surreal.monitoring import crash, prometheus

        restarts = crash.note_start(self.run.path, role, index)
        self.prom = prometheus.start(self.run.path, role, index, restarts)
        """This process's Prometheus series (`surreal.monitoring.prometheus.METRICS`)."""

    def _on_signal(self, *_: object) -> None:
        """First SIGTERM/SIGINT: unwind from wherever the process blocks (a socket, an env
        step), so `finally` blocks close sockets and the learner checkpoints; later ones are
        ignored so that cleanup finishes."""
        if not self.stopping.is_set():
            self.stopping.set()
            STOP_REQUESTED.set()
            raise Stopped(0)

    @staticmethod
    def address(service: str) -> Any:
        """The symphony Address of a declared service; in a population member (`surreal.pbt`)
        the member's own one: `$SURREAL_SERVICE_PREFIX` (e.g. `m0-`) + `service`."""
        import os

        import symphony

        return symphony.address(os.environ.get("SURREAL_SERVICE_PREFIX", "") + service)

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
        self._metrics.push(message)
        self.prom.port_traffic("metrics", "out")

    def close(self) -> None:
        """Close the metrics link and stop serving `/metrics`."""
        self._metrics.close()
        self.prom.close()
