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


SLOWDOWN_ENV = "SYMPHONY_TEST_SLOWDOWN"
"""How many times slower than the reference machine this one runs (a float >= 1): the test suite
measures it once (`measure_slowdown`) and every test's waits and timeouts stretch by it."""
REFERENCE_LOOP_S = 0.025
"""Seconds the reference machine takes for `measure_slowdown`'s loop (a million `total += i` in a
CPython 3.11 function). Inferred, not measured there: the suite's timeouts were set on 2-core
machines that ran it in ~1,200 s of test time; the machines of 2026-12-05 took 3,295-4,912 s and
run this loop in 0.075-0.08 s, so about 3x slower."""
MAX_SLOWDOWN = 4.0


def measure_slowdown(rounds: int = 5) -> float:
    """This machine's speed against the reference's, from the fastest of `rounds` runs of a
    plain Python loop (under a second in all); 1.0 on a machine as fast or faster, at most
    MAX_SLOWDOWN. Python code, process start-up and imports slow down together with it."""
    fastest = float("inf")
    for _ in range(rounds):
        started, total = time.perf_counter(), 0
        for i in range(1_000_000):
            total += i
        fastest = min(fastest, time.perf_counter() - started)
    return round(min(MAX_SLOWDOWN, max(1.0, fastest / REFERENCE_LOOP_S)), 2)


def machine_slowdown() -> float:
    """The slowdown the suite measured (SLOWDOWN_ENV), 1.0 where none was set."""
    try:
        return max(1.0, float(os.environ.get(SLOWDOWN_ENV, "1")))
    except ValueError:
        return 1.0


def scaled(seconds: float) -> float:
    """`seconds` on the reference machine, in this machine's seconds (a timeout, not a pace)."""
    return seconds * machine_slowdown()


class FairClock:
    """Seconds of a fair share of the reference machine: wall time, slowed down while this one
    is overloaded, and by how much slower than the reference it runs (`machine_slowdown`).

    A wait of 120 s for a run's first learner step is a guard against a hang, not a speed claim;
    on a 2-core machine with a load of 14 each process gets a seventh of a core, and the same
    wait would fail a healthy run. Each poll adds `dt * min(1, cores / load) / slowdown`, so a
    wait lasts its timeout on a quiet reference machine and longer on a busy or slower one, up
    to `cap` times the timeout (times the slowdown).
    """

    def __init__(
        self,
        timeout: float,
        cap: float = 5.0,
        now: Callable[[], float] = time.monotonic,
        load: Callable[[], float] = lambda: os.getloadavg()[0],
        cores: int | None = None,
        slowdown: float | None = None,
    ):
        self.timeout, self.cap, self.now, self.load = timeout, cap, now, load
        self.slowdown = machine_slowdown() if slowdown is None else slowdown
        self.start = self.last = now()
        self.fair = 0.0
        self.cores = cores or os.cpu_count() or 1

    def expired(self) -> bool:
        now, load = self.now(), self.load()
        share = min(1.0, self.cores / load if load > 0 else 1.0)
        self.fair += (now - self.last) * share / self.slowdown
        self.last = now
        wall_cap = self.cap * self.timeout * self.slowdown
        return self.fair > self.timeout or now - self.start > wall_cap

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
    *args: str, env: dict[str, str] | None = None, timeout: float | None = None, **kwargs: Any
) -> subprocess.CompletedProcess:
    """Run `python -m symphony ARGS` and capture its output (text); `timeout` defaults to 120 s
    of the reference machine (`scaled`)."""
    return subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=scaled(120) if timeout is None else timeout,
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
