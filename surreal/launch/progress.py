"""Watching a launched run: live progress lines on the terminal, and when to stop."""

from __future__ import annotations

import time
from typing import Any, TextIO

from surreal.api.config import RunConfig
from surreal.launch.progress_view import (
    PlainView,
    RateWindow,
    fields,
    policy_lag,
    progress_line,
    startup_message,
)
from surreal.monitoring.crash import CrashWatch
from surreal.monitoring.crash import report as crash_report
from surreal.monitoring.plot import series
from surreal.runtime.processes.common import STOP_DEADLINE_S
from surreal.runtime.runfolder.rundir import RunDir, read_json
from surreal.runtime.wire import waits
from symphony.backends.base import ExperimentStatus
from symphony.launcher import ExperimentHandle
from symphony.states import ALIVE_STATES

ENDED = ("exited", "failed", "stopped")
UNKNOWN_GRACE_S = 15.0  # a backend may briefly not know a process's state (tmux under load)
KEPT_FROM_BEFORE = ("global_step", "actor_steps", "episodes")
"""What an earlier launch's status still says truly about a resumed run (its figures do not)."""


def buffer_size(status: dict[str, Any]) -> float | None:
    """What the buffers hold: the sum of the replay shards' sizes (`buffer/shard<k>_size`, in
    transitions) when they report them, else `buffer/fill` (the FIFO buffer's count of segments)."""
    shards = [v for k, v in status.items() if k.startswith("buffer/shard") and k.endswith("_size")]
    return sum(shards) if shards else status.get("buffer/fill")


def format_status(status: dict[str, Any], elapsed: float, total: int = 0) -> str:
    """One progress line from `status.json` (`total`: the step budget, until the sink says)."""

    def num(key: str, fmt: str = "{:.1f}") -> str:
        return show(status.get(key), fmt)

    def show(value: float | None, fmt: str) -> str:
        return "-" if value is None else fmt.format(value)

    return (
        f"[{elapsed:6.1f}s] step {status.get('global_step', 0):,}/{status.get('total_steps') or total:,}"
        f" | {num('charts/sps', '{:,.0f}')} steps/s overall"
        f" | return {num('episodic_return')} | eval {num('charts/eval_return')}"
        f" | learner {num('charts/learner_its', '{:.2f}')} it/s"
        f" | lag {show(policy_lag(status), '{:.2f}')}"
        f" | buffer {show(buffer_size(status), '{:,.0f}')}"
    )


def best_eval(run_dir: RunDir, status: dict[str, Any] | None = None) -> float | None:
    """The best evaluation return the run recorded so far, over all its launches: the largest
    `charts/eval_return` in RUN/metrics.jsonl (every launch appends to it) and the status's
    `best_eval_return`; None if it has none."""
    saved = (status or {}).get("best_eval_return")
    found = [] if saved is None else [float(saved)]
    try:
        found += series(run_dir.path).get("charts/eval_return", ([], []))[1]
    except OSError:  # no metrics yet (a new run), or a mirror without them
        pass
    return max(found) if found else None


class StatusReader:
    """The run's `status.json` as the watch shows it.

    A resumed run's status file is first the one the earlier launch left (the new metrics sink
    replaces it once it runs): its budget, returns and learner figures are not this launch's.
    Until it changes, only its step counts are shown, with this launch's budget `total`. The
    best eval is the run's best so far (`best_eval`), also once the new sink (which starts its
    best afresh) writes the status.
    """

    def __init__(self, run_dir: RunDir, total: int = 0) -> None:
        self.path, self.total = run_dir.status_file, total
        first = read_json(self.path, {}) or {}
        updated = first.get("updated")
        self.old = updated if updated is not None and updated < time.time() else None
        self.best = best_eval(run_dir, first)
        self.launch_best: float | None = None
        """The best eval of this launch's evaluations (what `run.stop_at_return` compares)."""

    def read(self) -> tuple[dict[str, Any], bool]:
        """(what to show, whether it is still the earlier launch's status)."""
        status = read_json(self.path, {}) or {}
        stale = self.old is not None and status.get("updated") == self.old
        self.launch_best = None if stale else status.get("best_eval_return")
        if stale:
            budget = self.total or status.get("total_steps")
            status = {k: status[k] for k in KEPT_FROM_BEFORE if k in status}
            status["total_steps"] = budget
        best = [b for b in (self.best, status.get("best_eval_return")) if b is not None]
        if best:
            status["best_eval_return"] = max(best)
        return status, stale


def make_view(out: TextIO | None, title: str, live: bool | None = None) -> Any:
    """A live panel when `out` is a terminal (or `live`), plain lines otherwise; None: silent."""
    if out is None:
        return None
    if live if live is not None else _isatty(out):
        from surreal.launch.live_view import LiveView  # rich: only on a terminal

        return LiveView(out, title)
    return PlainView(out)


def _isatty(out: TextIO) -> bool:
    try:
        return out.isatty()
    except (AttributeError, ValueError):
        return False


def monitor(
    handle: Any,
    run_dir: RunDir,
    stop_at_return: float | None = None,
    every_s: float = 2.0,
    out: TextIO | None = None,
    total: int = 0,
    live: bool | None = None,
    crashes_since: float | None = None,
) -> int:
    """Show progress until the learner ends (or the eval target is reached); returns the exit code.

    `out` a terminal: a live panel; otherwise plain lines, only when they changed (`every_s`
    at most); None: nothing. The caller stops the experiment afterwards (also on Ctrl-C).
    A process that crashed more than `run.max_restarts` times since `crashes_since` (epoch
    seconds; default now) ends the watch with exit code 1 and its traceback's end shown.
    """
    view = make_view(out, getattr(handle, "name", "surreal"), live)
    if view is not None and hasattr(view, "every_s"):
        view.every_s = every_s
    try:
        since = time.time() if crashes_since is None else crashes_since
        return _Watch(handle, run_dir, stop_at_return, total, view, since).run()
    finally:
        if view is not None:
            view.close()


class _Watch:
    """The monitoring loop of `monitor` (`run()`): one look at the run per `step()`, progress
    shown on `view` (None: nothing), and the verdict once it has one."""

    def __init__(
        self,
        handle: Any,
        run_dir: RunDir,
        stop_at_return: float | None,
        total: int,
        view: Any,
        since: float,
    ) -> None:
        self.handle, self.run_dir, self.view = handle, run_dir, view
        self.stop_at_return, self.total = stop_at_return, total
        self.rates, self.unknown_since = RateWindow(), None
        self.started = time.monotonic()
        self.crashes = CrashWatch(run_dir.path, _max_restarts(run_dir), since)
        self.reader = StatusReader(run_dir, total)
        self.resume_hint = f"Continue the run with: surreal launch --resume {run_dir.path}"
        self.stall = Stall(_stall_timeout(run_dir), self.started)

    def run(self) -> int:
        """Look until the run has ended for `monitor`; its exit code."""
        while True:
            code = self.step()
            if code is not None:
                return code
            time.sleep(0.25)  # polling the status with no deadline: the run decides when it ends

    def say(self, phase: str, text: str, urgent: bool = False, values: dict | None = None) -> None:
        if self.view is not None:
            self.view.show(phase, text, urgent=urgent, values=values)

    def fail(self, text: str) -> int:
        self.say("failed", text, urgent=True)
        return 1

    def step(self) -> int | None:
        """Look once: the exit code when the run has ended for `monitor`, else None."""
        described = self.handle.status()
        if _supervisor_lost(described):
            self.fail(
                f"the run's supervisor (pid {described.details.get('supervisor_pid')}) died: "
                "its processes stop by themselves, the learner writing its checkpoint first. "
                + self.resume_hint
            )
            _wait_for_stop(self.handle)
            return 1
        processes = described.processes
        status, stale = self.reader.read()
        now = time.monotonic()
        self.crashes.poll()
        looping = self.crashes.loop_report()
        if looping:  # a learner past its restarts: its checkpoint is there to continue from
            learner = (self.crashes.looping() or {}).get("process") == "learner"
            hint = f"\n{self.resume_hint}" if learner else ""
            return self.fail(f"stopping the run: {looping}{hint}")
        waiting = waiting_for(status, stale)
        self.show(status, stale, processes, now, waiting)
        learner = next((p for p in processes if p.name == "learner"), None)
        if learner is not None and learner.state == "exited":
            return 0
        failed = [p.name for p in processes if p.state == "failed" and p.name != "learner"]
        if failed and _reached_budget(status, self.total):
            failed = []  # the learner is finishing its last steps: a helper's end is no failure
        verdicts = (
            lambda: self.learner_ended(learner, now),
            lambda: self.helpers_failed(failed),
            self.goal,  # 0: a verdict too (an `or` chain would read it as none)
            lambda: self.stalled(status, now, waiting),
        )
        for verdict in verdicts:
            code = verdict()
            if code is not None:
                return code
        return None

    def show(
        self, status: dict, stale: bool, processes: list, now: float, waiting: str | None = None
    ) -> None:
        """Show the progress line (or, before the learner's first report, what starts), with
        the wait that explains a standstill (`waiting for param-server: no answer for 35 s`)."""
        step = status.get("global_step")
        if not step:
            text = startup_message(processes)
            self.say("starting", f"{text}; waiting for {waiting}" if waiting else text, urgent=True)
            return
        rate = None if stale else self.rates.add(now, step)
        values = fields(status, rate, self.total, processes, elapsed=now - self.started)
        values["crashes"] = self.crashes.summary()
        if waiting:
            values["waiting for"] = waiting
        budget = status.get("total_steps") or self.total
        done = bool(budget) and step >= budget
        phase = "budget used: the learner writes its checkpoint" if done else "training"
        phase = "resuming: waiting for this launch's first report" if stale else phase
        line = progress_line(values)
        text = f"{phase} (step {values['step']})" if done else line  # said once
        self.say(phase, text, urgent=done, values=values)

    def learner_ended(self, learner: Any, now: float) -> int | None:
        """1 once the learner failed, stopped, or is unknown for UNKNOWN_GRACE_S."""
        if learner is None or learner.state == "unknown":
            self.unknown_since = self.unknown_since or now
        else:
            self.unknown_since = None
        lost = self.unknown_since is not None and now - self.unknown_since > UNKNOWN_GRACE_S
        if not lost and (learner is None or learner.state not in ENDED):
            return None
        code = learner.exit_code if learner else None
        why = _last_error(self.handle)
        return self.fail(
            f"the learner ended ({learner.state if learner else 'missing'}, exit code "
            f"{code}){': ' + why if why else ''}; see {self.run_dir.path}/logs/learner.log. "
            + self.resume_hint
        )

    def helpers_failed(self, failed: list[str]) -> int | None:
        """1 once a process other than the learner failed past its restart limit."""
        if not failed:
            return None
        last = self.crashes.latest()
        crash = crash_report(last, self.crashes.counts()[last["process"]]) if last else None
        return self.fail(
            f"process(es) {', '.join(failed)} failed past their restart limit; see "
            f"{self.run_dir.path}/logs/ after the stop. Fix the cause, then continue with: "
            f"surreal launch --resume {self.run_dir.path}"
            + (f"\nlast crash: {crash}" if crash else "")
        )

    def stalled(self, status: dict, now: float, waiting: str | None) -> int | None:
        """1 once the learner's step has not moved for `run.stall_timeout_s` (a run that
        stands still ends, saying what it waits for, instead of hanging)."""
        if _reached_budget(status, self.total):
            return None  # the learner is writing its last checkpoint
        quiet = self.stall.still(status.get("global_step"), now)
        if quiet is None:
            return None
        why = f"waiting for {waiting}" if waiting else "no process said what it waits for"
        return self.fail(
            f"the run made no progress for {quiet:.0f} s (run.stall_timeout_s="
            f"{self.stall.timeout_s:g}; the learner's step stayed at "
            f"{status.get('global_step', 0):,}): {why}; stopping it. The learner's last "
            f"checkpoint is kept. {self.resume_hint}"
        )

    def goal(self) -> int | None:
        """0 once this launch's best eval return reached run.stop_at_return."""
        reached, goal = self.reader.launch_best, self.stop_at_return
        if goal is None or reached is None or reached < goal:
            return None
        self.say("goal reached", f"eval return {reached:.1f} >= {goal}: stopping", urgent=True)
        return 0


class Stall:
    """When the learner's step last moved (a run whose step stands still for `timeout_s`
    seconds, 0: never, has stalled)."""

    def __init__(self, timeout_s: float, now: float) -> None:
        self.timeout_s, self.since, self.step = timeout_s, now, None

    def still(self, step: Any, now: float) -> float | None:
        """The seconds the step has stood still once that is over `timeout_s`, else None."""
        if step != self.step:
            self.step, self.since = step, now
        quiet = now - self.since
        return quiet if self.timeout_s > 0 and quiet > self.timeout_s else None


def waiting_for(status: dict[str, Any], stale: bool, now: float | None = None) -> str | None:
    """What the run waits for (`surreal.runtime.wire.waits.pick`), or the metrics sink itself when
    its status has not changed for `waits.WAIT_SAY_S` (it is stopped or gone); None."""
    now = time.time() if now is None else now
    found = waits.pick(status.get("waits") or {}, now)
    updated = status.get("updated")
    if found is None and not stale and isinstance(updated, int | float):
        if now - updated >= waits.WAIT_SAY_S:
            return f"metrics: no status written for {now - updated:.0f} s"
    return found


def _last_error(handle: Any) -> str:
    """The learner's last error line (its log's ` ERROR ` line or an exception's last line),
    e.g. a checkpoint that a full disk could not take; "" when there is none to read."""
    if not isinstance(handle, ExperimentHandle):
        return ""
    try:
        lines = handle.record.log_path("learner").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines[-60:]):
        if " ERROR " in line:
            text = line.split(" ERROR ", 1)[1].strip()
            if text.partition(": ")[2].startswith("stop: "):  # how it ended, not why
                continue
            return text
        if line[:1].isalpha() and "Error: " in line:  # a traceback's last line
            return line.strip()
    return ""


def _supervisor_lost(described: Any) -> bool:
    """Whether a local run's supervisor is gone (other backends do not say)."""
    return (
        isinstance(described, ExperimentStatus)
        and described.details.get("supervisor_alive") is False
    )


def _wait_for_stop(handle: Any) -> None:
    """Give processes whose supervisor died the time they have to stop by themselves (they
    end within `STOP_DEADLINE_S` of its death signal), so stopping the run afterwards does not
    kill a learner that is writing its checkpoint."""
    deadline = time.monotonic() + STOP_DEADLINE_S + 5.0
    while time.monotonic() < deadline:
        if not any(p.state in ALIVE_STATES for p in handle.status().processes):
            return
        time.sleep(0.25)  # polling the process table: the processes decide when they end


def _stall_timeout(run_dir: RunDir) -> float:
    """The run's `run.stall_timeout_s` (the default when its config cannot be read)."""
    try:
        return float(run_dir.load_config().run.stall_timeout_s)
    except Exception:  # a test's bare run folder, a config being rewritten
        return RunConfig.stall_timeout_s


def _max_restarts(run_dir: RunDir) -> int:
    """The run's `run.max_restarts` (the default when its config cannot be read)."""
    try:
        return run_dir.load_config().run.max_restarts
    except Exception:  # a test's bare run folder, a config being rewritten
        return RunConfig.max_restarts


def _reached_budget(status: dict[str, Any], total: int) -> bool:
    """Whether the learner reported the end of its step budget (it exits 0 right after)."""
    budget = status.get("total_steps") or total
    return bool(status.get("finished")) or (budget > 0 and status.get("global_step", 0) >= budget)
