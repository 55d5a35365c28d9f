"""Crashes and restarts of a run's processes, as the run folder records them.

A component that ends with an exception (not a stop signal) appends one line to
`RUN/crashes.jsonl`: process, role, index, time, the exception's last line, the traceback, and
the log where its output goes (`RUN/logs/<process>.log` once `surreal launch` stopped the run).
Every start of a process is counted in `RUN/monitoring/starts/<process>` (cleared at launch),
so a process knows how often it was restarted (`surreal_process_restarts`).

`CrashWatch` is what `surreal launch` polls: the latest crash for the progress display, and the
process that crashed more than `run.max_restarts` times since the launch (then the run stops with
that traceback). `surreal status` shows the same from the file.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

TAIL_LINES = 6
"""Lines of the traceback shown (its end: the failing lines and the error)."""


def crashes_file(run_path: Path) -> Path:
    """`RUN/crashes.jsonl`."""
    return run_path / "crashes.jsonl"


def crash_files(run_path: Path) -> list[Path]:
    """`RUN/crashes.jsonl` and, in a multi-agent run, each policy's
    `RUN/policies/<P>/crashes.jsonl` (its buffer, learner, parameter server and metrics sink
    run on the policy's folder; their logs are the run's `RUN/logs/<process>-<P>.log`)."""
    return [crashes_file(run_path), *sorted(run_path.glob("policies/*/crashes.jsonl"))]


def process_name(role: str, index: int) -> str:
    """This process's symphony name (`SYMPH_PROCESS`), else `role-index`."""
    return os.environ.get("SYMPH_PROCESS") or f"{role}-{index}"


def record(run_path: Path, role: str, index: int, error: BaseException) -> dict[str, Any]:
    """Append the crash of this process (ended by `error`) to `RUN/crashes.jsonl`."""
    process = process_name(role, index)
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    entry = {
        "process": process,
        "role": role,
        "index": index,
        "time": time.time(),
        "pid": os.getpid(),
        "error": traceback.format_exception_only(type(error), error)[-1].strip(),
        "traceback": text,
        "log": str(run_path / "logs" / f"{process}.log"),
    }
    with crashes_file(run_path).open("a") as out:  # one short O_APPEND write per line
        out.write(json.dumps(entry) + "\n")
    return entry


def read(run_path: Path, since: float = 0.0) -> list[dict[str, Any]]:
    """The crashes recorded at or after `since` (epoch seconds), oldest first (the run's and,
    in a multi-agent run, its policies' with the log path in the run's `logs/`)."""
    found = []
    for path in crash_files(run_path):
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            continue
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line being written right now
            if isinstance(entry, dict) and entry.get("time", 0) >= since:
                if path.parent != run_path and "process" in entry:
                    entry["log"] = str(run_path / "logs" / f"{entry['process']}.log")
                found.append(entry)
    return sorted(found, key=lambda entry: entry.get("time", 0))


def tail(entry: dict[str, Any], lines: int = TAIL_LINES) -> str:
    """The last `lines` lines of a crash's traceback."""
    return "\n".join(entry.get("traceback", "").rstrip().splitlines()[-lines:])


def one_line(entry: dict[str, Any]) -> str:
    """`actor-0 (actor 0): ValueError: boom; log RUN/logs/actor-0.log`."""
    return (
        f"{entry['process']} ({entry['role']} {entry['index']}): {entry['error']}; "
        f"log {entry['log']}"
    )


def report(entry: dict[str, Any], count: int, limit: int | None = None) -> str:
    """A paragraph on a crash: who, how often, the traceback's end and where the log is."""
    times = f"{count} time{'s' if count != 1 else ''}"
    over = "" if limit is None else f", more than run.max_restarts={limit}"
    body = "\n".join("    " + line for line in tail(entry).splitlines())
    return (
        f"{entry['process']} (role {entry['role']}, index {entry['index']}) crashed {times}"
        f"{over}; the end of its last traceback (full log: {entry['log']}):\n{body}"
    )


class CrashWatch:
    """What `surreal launch` polls: crashes of the run since `since`, and a crash loop.

    Args:
        run_path: the run folder.
        limit: `run.max_restarts` (a process crashing more often than this is a crash loop).
        since: count crashes from this time (epoch seconds; the launch's start).
    """

    def __init__(self, run_path: Path, limit: int, since: float) -> None:
        self.run_path, self.limit, self.since = run_path, limit, since
        self.crashes: list[dict[str, Any]] = []
        self._size = -1

    def poll(self) -> list[dict[str, Any]]:
        """Re-read the file when it grew; the crashes since the launch."""
        size = sum(p.stat().st_size for p in crash_files(self.run_path) if p.exists())
        if size != self._size:
            self._size, self.crashes = size, read(self.run_path, self.since)
        return self.crashes

    def counts(self) -> Counter:
        """Crashes per process since the launch."""
        return Counter(c["process"] for c in self.crashes)

    def latest(self) -> dict[str, Any] | None:
        """The most recent crash since the launch."""
        return self.crashes[-1] if self.crashes else None

    def looping(self) -> dict[str, Any] | None:
        """The last crash of a process that crashed more than `limit` times, else None."""
        over = {p for p, n in self.counts().items() if n > self.limit}
        return next((c for c in reversed(self.crashes) if c["process"] in over), None)

    def loop_report(self) -> str | None:
        """The paragraph `surreal launch` prints when a crash loop stops the run."""
        entry = self.looping()
        if entry is None:
            return None
        return report(entry, self.counts()[entry["process"]], self.limit)

    def summary(self) -> str:
        """For the progress display: `actor-0 x2: ValueError: boom` (or `none`)."""
        entry = self.latest()
        if entry is None:
            return "none"
        return f"{entry['process']} x{self.counts()[entry['process']]}: {entry['error']}"


def note_start(run_path: Path, role: str, index: int) -> int:
    """Count a start of this process in `RUN/monitoring/starts/`; returns its restarts so far."""
    folder = run_path / "monitoring" / "starts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / process_name(role, index)
    try:
        starts = int(path.read_text() or 0)
    except (FileNotFoundError, ValueError):
        starts = 0
    path.write_text(str(starts + 1))
    return starts


def clear_starts(run_path: Path) -> None:
    """Forget the start counts and `/metrics` targets of an earlier launch (at launch)."""
    for sub in ("starts", "targets"):
        folder = run_path / "monitoring" / sub
        for path in folder.glob("*") if folder.is_dir() else ():
            path.unlink(missing_ok=True)


def status_lines(run_path: Path) -> list[str]:
    """`surreal status` lines: crashes per role and the latest crash's traceback end."""
    crashes = read(run_path)
    if not crashes:
        return []
    per_role = Counter(str(c.get("role")) for c in crashes)
    lines = ["  crashes    " + ", ".join(f"{r} {n}" for r, n in sorted(per_role.items()))]
    latest = crashes[-1]
    count = sum(1 for c in crashes if c["process"] == latest["process"])
    age = time.time() - latest.get("time", time.time())
    lines.append(f"  last crash {age:.0f} s ago: " + report(latest, count))
    return lines
