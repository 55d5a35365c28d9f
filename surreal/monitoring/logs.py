"""What a run's processes write to their logs (`RUN/logs/<process>.log`, `symphony logs EXP PROC`).

Every component process (`surreal.runtime.processes.component.run_component`) sets Python logging up once
(`setup`): one handler on stderr, which the backend sends to the process's log file (local,
tmux, slurm) or to the container's output (compose, kube), flushed at every line so that
`symphony logs -f` and `tail -f` show it as it happens. A line reads

    2025-01-31 12:00:00 INFO learner: progress: step 12,288/200,000 (410/s), updates 12 (0.4/s)

What a component writes, and how much (never a line per message):

- `start:` what it is (role, index), pid and host, the run folder and the services it uses
  (`name=host:port`); a restarted process also says how many starts came before (WARNING);
- `binds ...` / `connects ...`: its ports, once they are open;
- `progress:` every PROGRESS_S (30) seconds, or `$SURREAL_LOG_PROGRESS_S` (an actor every
  PROGRESS_S x actors / 100 when there are more than 100, so 1,000 actors write about 3 lines a
  second in all): totals, rates since the previous line, the state that tells a stuck run from a
  slow one; a process that waits (for parameters, for its first batch) says so as often;
- warnings, each kind at most once per WARN_S seconds with the count since (`Warnings`):
  messages dropped on a port (counted per kind, `DropReport`), waits that gave up, restarts;
- `stop:` how it ended (finished, stopped by a signal, crashed) and after how long; a crash's
  traceback follows it.

Other libraries' records reach the log from WARNING up (caraml's malformed-message warnings); a
library's logger with a handler of its own (robosuite's) keeps printing through that handler only.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

PROGRESS_S = 30.0
"""Seconds between two progress lines of one process (env PROGRESS_ENV overrides it)."""

PROGRESS_ENV = "SURREAL_LOG_PROGRESS_S"
"""Set in `surreal launch`'s environment, every process of the run writes progress this often."""

WARN_S = 300.0
"""A warning of one kind is written at most this often (the ones in between are counted)."""

ACTORS_PER_LINE = 100
"""Above this many actors, each actor's progress lines come proportionally less often."""

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
HANDLER_NAME = "surreal-component-log"

_process = "surreal"


class _NotHandledElsewhere(logging.Filter):
    """Skips the records of a logger that has handlers of its own (it printed them already)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == _process or not logging.getLogger(record.name).handlers


class _Stderr(logging.StreamHandler):
    """A handler on whatever `sys.stderr` is when a record comes (the process's log; in a test
    that runs a component in its own process, pytest's capture of the moment)."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property
    def stream(self) -> Any:  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def setup(process: str, stream: Any = None) -> logging.Logger:
    """Configure this process's logging (once; again only replaces the stream) and return the
    logger named after the process (`actor-0`): INFO and up from it, WARNING and up from others."""
    global _process
    _process = process
    root = logging.getLogger()
    for handler in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(handler)
    handler = _Stderr() if stream is None else logging.StreamHandler(stream)  # flushes each
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(logging.Formatter(FORMAT, DATE_FORMAT))
    handler.addFilter(_NotHandledElsewhere())
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level < logging.WARNING:
        root.setLevel(logging.WARNING)
    log = logging.getLogger(process)
    log.setLevel(logging.INFO)
    return log


def get() -> logging.Logger:
    """This process's logger (the one `setup` configured; `surreal` before that)."""
    log = logging.getLogger(_process)
    if log.level == logging.NOTSET:
        log.setLevel(logging.INFO)
    return log


def services(environ: Mapping[str, str] | None = None) -> str:
    """`name=host:port ...` of the symphony services this process declared (`SYMPH_SERVICES`)."""
    env = os.environ if environ is None else environ
    names = [s for s in env.get("SYMPH_SERVICES", "").split(",") if s]
    shown = []
    for name in names:
        key = "SYMPH_" + name.upper().replace("-", "_") + "_ADDR"
        shown.append(f"{name}={env.get(key, '?')}")
    return " ".join(shown) or "none"


def start_line(role: str, index: int, run_dir: str) -> str:
    """What the `start:` line says about this process."""
    return (
        f"start: role {role}, index {index}, pid {os.getpid()} on {socket.gethostname()}; "
        f"run {run_dir}; services {services()}"
    )


def ending(error: BaseException | None, stopping: bool, why: str | None = None) -> tuple[int, str]:
    """(level, text) of the `stop:` line for a process that ended with `error` (None: returned);
    `why`: what its stop signal meant, when the run said (e.g. "the run finished (budget
    used)"), else it was "stopped by a signal"."""
    signal = why or "stopped by a signal"
    if error is None:
        return logging.INFO, "finished"
    if getattr(error, "stop", False):  # the stop signal's exit (`common.Stopped`)
        return logging.INFO, signal
    if isinstance(error, SystemExit) and error.code in (0, None):
        return logging.INFO, signal if stopping else "finished"
    if isinstance(error, KeyboardInterrupt):
        return logging.INFO, "interrupted"
    what = f"{type(error).__name__}: {error}".strip()
    if stopping:  # an exception while unwinding from the stop signal: part of stopping
        return logging.INFO, f"{signal} ({what})"
    if isinstance(error, SystemExit):
        return logging.ERROR, f"SystemExit({error.code!r})"
    return logging.ERROR, f"crashed: {what} (traceback below)"


def rate(value: float) -> str:
    """A rate or count for humans: 1,234 / 12.3 / 0.45."""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2f}"


def count(value: float) -> str:
    """A total for humans: integers with thousands separators, other numbers as `rate`."""
    if float(value).is_integer():
        return f"{int(value):,}"
    return rate(value)


def progress_s() -> float:
    """Seconds between two progress lines: `$SURREAL_LOG_PROGRESS_S` if it is a positive number,
    else PROGRESS_S."""
    try:
        seconds = float(os.environ.get(PROGRESS_ENV, ""))
    except ValueError:
        return PROGRESS_S
    return seconds if seconds > 0 else PROGRESS_S


def progress_every(actors: int = 1) -> float:
    """Seconds between an actor's progress lines when the run has `actors` of them."""
    return progress_s() * max(1.0, actors / ACTORS_PER_LINE)


class Progress:
    """Rate-limited `progress:` lines: totals with their rates since the previous line.

    Args:
        log: where the lines go.
        every_s: at most one line this often (the first one `every_s` after creation);
            default `progress_s()`.
        start: the totals at creation (a resumed learner's step), so the first rate is right.
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self,
        log: logging.Logger,
        every_s: float | None = None,
        start: Mapping[str, float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.every_s, self.clock = log, every_s or progress_s(), clock
        self.last = clock()
        self.previous: dict[str, float] = dict(start or {})
        self.lines = 0

    def due(self) -> bool:
        """Whether a line would be written now."""
        return self.clock() - self.last >= self.every_s

    def tick(self, totals: Mapping[str, float], state: Mapping[str, Any] | None = None) -> bool:
        """Write `progress: NAME TOTAL (RATE/s), ..., KEY VALUE, ...` if one is due; returns
        whether it did. `totals` get rates; `state` entries (None ones left out) are shown as
        they are."""
        if not self.due():
            return False
        self.log.info("progress: %s", self.line(totals, state or {}))
        return True

    def line(self, totals: Mapping[str, float], state: Mapping[str, Any]) -> str:
        """The text of a progress line (and the start of the next rate window)."""
        now = self.clock()
        elapsed = max(now - self.last, 1e-9)
        parts = [
            f"{name} {count(total)} ({rate((total - self.previous.get(name, 0)) / elapsed)}/s)"
            for name, total in totals.items()
        ]
        for key, value in state.items():
            if value is not None:
                parts.append(f"{key} {count(value) if isinstance(value, (int, float)) else value}")
        self.previous, self.last = dict(totals), now
        self.lines += 1
        return ", ".join(parts)


class Warnings:
    """Each kind of warning written at most once per `every_s` seconds, with the count since.

    The first of a kind is written at once; later ones within `every_s` are only counted, and
    the next one written after that says how many there were (`flush` writes what is pending).
    """

    def __init__(
        self,
        log: logging.Logger,
        every_s: float = WARN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.every_s, self.clock = log, every_s, clock
        self.written: dict[str, float] = {}
        self.pending: Counter[str] = Counter()
        self.last_text: dict[str, str] = {}

    def warn(self, kind: str, text: str) -> bool:
        """Count one `kind` warning; write it if none of its kind was written lately."""
        now = self.clock()
        if kind in self.written and now - self.written[kind] < self.every_s:
            self.pending[kind] += 1
            self.last_text[kind] = text
            return False
        self._write(kind, text, now)
        return True

    def flush(self) -> None:
        """Write the latest warning of every kind that has some not written yet."""
        for kind in [k for k, n in self.pending.items() if n]:
            self._write(kind, self.last_text[kind], self.clock(), repeat=True)

    def _write(self, kind: str, text: str, now: float, repeat: bool = False) -> None:
        held = self.pending.pop(kind, 0)
        since = now - self.written.get(kind, now)
        if repeat:
            suffix = f" ({held} time{'' if held == 1 else 's'} in the last {since:.0f} s)"
        elif held:
            suffix = f" (and {held} more like it in the last {since:.0f} s)"
        else:
            suffix = ""
        self.log.warning("%s%s", text, suffix)
        self.written[kind] = now


class DropReport:
    """Warns when the messages dropped on some ports (`surreal.runtime.wire.guard.PortGuard`) grew since the
    last `check`: `dropped 12 messages on port experience since the last check (not-a-dict 10,
    bad-shape 2); 15 in all`. Call `check` from the progress tick (it is rate-limited there)."""

    def __init__(self, log: logging.Logger, guards: Iterable[Any]) -> None:
        self.log = log
        self.guards = list(guards)
        self.seen: dict[int, Counter[str]] = {id(g): Counter() for g in self.guards}

    def add(self, guard: Any) -> None:
        """Also watch `guard`."""
        self.guards.append(guard)
        self.seen[id(guard)] = Counter()

    def check(self) -> int:
        """Write one warning per port whose drops grew; returns the new drops in all."""
        new_in_all = 0
        for guard in self.guards:
            now = Counter(guard.dropped)
            new = now - self.seen[id(guard)]
            self.seen[id(guard)] = now
            if not new:
                continue
            n = sum(new.values())
            new_in_all += n
            kinds = ", ".join(f"{kind} {k}" for kind, k in new.most_common())
            self.log.warning(
                "dropped %s message%s on port %s since the last check (%s); %s in all",
                f"{n:,}",
                "" if n == 1 else "s",
                guard.port,
                kinds,
                f"{sum(now.values()):,}",
            )
        return new_in_all
