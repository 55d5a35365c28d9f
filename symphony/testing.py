"""Helpers for tests of symphony and its backends: the CLI, polling with a deadline, leftovers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import psutil

from symphony.backends import get_backend
from symphony.local.proctree import RUN_ID_ENV
from symphony.records import Records

T = TypeVar("T")


class FairClock:
    """Seconds of a fair share of the machine: wall time, slowed down while it is overloaded.

    A wait of 120 s for a run's first learner step is a guard against a hang, not a speed claim;
    on a 2-core machine with a load of 14 each process gets a seventh of a core, and the same
    wait would fail a healthy run. Each poll adds `dt * min(1, cores / load)`, so a wait lasts
    its timeout on a quiet machine and longer on a busy one, up to `cap` times the timeout.
    """

    def __init__(
        self,
        timeout: float,
        cap: float = 5.0,
        now: Callable[[], float] = time.monotonic,
        load: Callable[[], float] = lambda: os.getloadavg()[0],
        cores: int | None = None,
    ):
        self.timeout, self.cap, self.now, self.load = timeout, cap, now, load
        self.start = self.last = now()
        self.fair = 0.0
        self.cores = cores or os.cpu_count() or 1

    def expired(self) -> bool:
        now, load = self.now(), self.load()
        self.fair += (now - self.last) * min(1.0, self.cores / load if load > 0 else 1.0)
        self.last = now
        return self.fair > self.timeout or now - self.start > self.cap * self.timeout

    def describe(self) -> str:
        wall = self.now() - self.start
        if wall <= self.timeout * 1.05:
            return f"{self.timeout:g} s"
        return f"{self.timeout:g} s of a fair share of the machine ({wall:.0f} s of wall time)"


def wait_for(
    predicate: Callable[[], T], timeout: float = 30.0, poll_s: float = 0.05, what: str = "condition"
) -> T:
    """Poll `predicate` until it returns something truthy; AssertionError after `timeout` s of a
    fair share of the machine (`FairClock`: longer in wall time while the machine is overloaded)."""
    clock = FairClock(timeout)
    while True:
        value = predicate()
        if value:
            return value
        if clock.expired():
            raise AssertionError(f"timed out after {clock.describe()} waiting for {what}")
        time.sleep(poll_s)


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120, **kwargs: Any
) -> subprocess.CompletedProcess:
    """Run `python -m symphony ARGS` and capture its output (text)."""
    return subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        **kwargs,
    )


def processes_with_run_id(run_id: str) -> list[psutil.Process]:
    """Every live (non-zombie) process in the whole table whose env carries SYMPHONY_RUN_ID."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and proc.environ().get(RUN_ID_ENV) == run_id:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def stop_everything(records: Records) -> None:
    """Force-delete every experiment in `records` still running (test teardown)."""
    for record in records.all():
        try:
            get_backend(record.backend, records=records).delete(record, force=True)
        except Exception:  # noqa: BLE001 - teardown: try the others regardless
            continue


def env_with(**overrides: str) -> dict[str, str]:
    """os.environ plus `overrides` (for CLI subprocesses)."""
    env = dict(os.environ)
    env.update(overrides)
    return env


def tmux_socket_name() -> str:
    """A fresh tmux socket name, so a test gets its own tmux server."""
    return f"symphony-test-{uuid.uuid4().hex[:10]}"


def kill_tmux_server(socket: str) -> None:
    """Stop the tmux server on `socket` if it still runs."""
    subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=10)
