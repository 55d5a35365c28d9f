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
from symphony.proctree import RUN_ID_ENV
from symphony.records import Records

T = TypeVar("T")


def wait_for(
    predicate: Callable[[], T], timeout: float = 30.0, poll_s: float = 0.05, what: str = "condition"
) -> T:
    """Poll `predicate` until it returns something truthy; AssertionError after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
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
