"""Helpers for the end-to-end tests: launching in the background, reading a run's files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from symphony.testing import FairClock, scaled

QUICK = [
    "--set",
    "env.num_envs=4",
    "--set",
    "actor.rollout_length=16",
    "--set",
    "algo.update_epochs=2",
    "--set",
    "algo.num_minibatches=2",
    "--set",
    "algo.batch_size=0",  # one segment per actor: many small updates, as these runs were built
    "--set",
    "eval.episodes=2",
    "--set",
    "eval.every_s=1",
]

PENDULUM_SMALL = [
    "--set",
    "env.num_envs=1",
    "--set",
    "algo.hidden=64,64",
    "--set",
    "algo.batch_size=128",
]
"""The README's small Pendulum networks for TD3/DDPG runs (-200 in ~3k steps)."""

ES_SMALL = ["--set", "algo.hidden=32,32", "--set", "algo.population=16", "--set", "eval.every_s=1"]
"""A small ES on CartPole: 32x32 networks, a population of 16, an evaluation every second."""

RESUMED = re.compile(r"resumed from \S+ at step ([\d,]+)")
"""The line a learner that loaded its checkpoint writes (`surreal.runtime.runfolder.checkpoint`)."""


def resumed_steps(log: str) -> list[int]:
    """The steps every start of the learner in `log` resumed from, in order."""
    return [int(m.group(1).replace(",", "")) for m in RESUMED.finditer(log)]


def env_for(home: Path) -> dict[str, str]:
    return dict(os.environ, SYMPHONY_HOME=str(home), PYTHONUNBUFFERED="1")


def symphony_cli(home: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m symphony ARGS` with symphony's state in `home` (the environment else as here)."""
    return subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (?:INFO|WARNING|ERROR) ([\w-]+): ")
"""A line a run's process writes to its log (`surreal.monitoring.logs`); group 1: the process."""


def own_lines(text: str, process: str) -> list[str]:
    """The lines of a log's `text` that `process` wrote itself."""
    return [ln for ln in text.splitlines() if (m := LOG_LINE.match(ln)) and m.group(1) == process]


def shown_log(home: Path, experiment: str, process: str = "actor-0") -> list[str]:
    """`process`'s own lines as `symphony logs EXPERIMENT PROCESS` prints them, once they are
    its `start:` line and two more; [] before (for `wait_until`)."""
    result = symphony_cli(home, "logs", experiment, process)
    lines = own_lines(result.stdout, process) if result.returncode == 0 else []
    return lines if len(lines) >= 3 and f" {process}: start: " in lines[0] else []


def listed_status(home: Path, experiment: str) -> str | None:
    """`experiment`'s STATUS in `symphony list --all` (None: not listed)."""
    rows = symphony_cli(home, "list", "--all").stdout.splitlines()
    return next((r.split()[3] for r in rows if r.split()[:1] == [experiment]), None)


def start_launch(args: list[str], cwd: Path, home: Path) -> subprocess.Popen:
    """`surreal launch ARGS` in the background, in its own process group (like a terminal job)."""
    return subprocess.Popen(
        [sys.executable, "-m", "surreal", "launch", *args],
        cwd=cwd,
        env=env_for(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def ctrl_c(proc: subprocess.Popen) -> None:
    """What Ctrl-C in a terminal does: SIGINT to the job's whole process group."""
    os.killpg(proc.pid, signal.SIGINT)


def status(run: Path) -> dict:
    try:
        return json.loads((run / "status.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def wait_until(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    """Poll `predicate` until truthy (returns its value) or fail after `timeout` seconds."""
    clock = FairClock(timeout)  # longer in wall time while the machine is overloaded
    while not clock.expired():
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"launch ended ({proc.returncode}) while waiting for {what}:\n{proc.stdout.read()}"
            )
        time.sleep(0.2)
    raise AssertionError(f"timed out after {clock.describe()} waiting for {what}")


def metric_records(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def processes_of(run: Path) -> list[psutil.Process]:
    """Every live process whose command line mentions the run folder."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(run.resolve()) in part for part in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def shm_segments() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("caraml_*")}


def run_segments(pids: set[int]) -> set[str]:
    """The caraml shared-memory segments (`caraml_<creator pid>_<id>`) created by one of PIDS:
    /dev/shm is machine-wide, and other tests' runs hold segments of their own."""
    named = [(name, name.split("_")) for name in shm_segments()]
    return {name for name, parts in named if parts[1].isdigit() and int(parts[1]) in pids}


def describe(home: Path, experiment: str):
    """symphony's view of the run's processes."""
    from symphony.backends import get_backend
    from symphony.records import Records

    records = Records(home)
    record = records.load(experiment)
    return get_backend(record.backend, records=records).describe(record)


def launch_unwatched(args: list[str], cwd: Path, home: Path, run: Path) -> None:
    """`surreal launch ARGS` whose launcher is killed (SIGKILL) once the run's processes run:
    a run nobody watches, as on kube or after a closed terminal."""
    proc = start_launch(args, cwd, home)
    try:
        wait_until(lambda: processes_of(run), 180, "the run's processes", proc)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()


def process_log(home: Path, experiment: str, process: str) -> str:
    """What `symphony logs EXPERIMENT PROCESS` prints (the record's log of a process)."""
    return subprocess.run(
        [sys.executable, "-m", "symphony", "logs", experiment, process],
        env=env_for(home),
        capture_output=True,
        text=True,
        timeout=scaled(60),
    ).stdout
