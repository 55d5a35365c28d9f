"""What `surreal launch` shows while a run trains: one live panel on a terminal, plain lines else.

On a terminal (stdout is a TTY) a `rich` live display redraws one block in place: the phase,
steps with the budget, steady steps/s (over the last `RATE_WINDOW_S` seconds, not since start),
training and eval returns, learner utilisation, policy lag, buffer, and restarts per role.
Elsewhere (a pipe, a log file, CI) each update is one plain line, and a line is printed only
when its content changed, so a waiting run does not repeat itself.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Iterable
from typing import Any, TextIO

RATE_WINDOW_S = 10.0


class RateWindow:
    """Steps per second over the last `window_s` seconds of (time, step) samples."""

    def __init__(self, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, now: float, step: float) -> float | None:
        """Record `step` at `now`; the windowed rate (None until two distinct samples)."""
        if self.samples and step < self.samples[-1][1]:
            self.samples.clear()  # a restarted learner counts again from its checkpoint
        self.samples.append((now, step))
        while len(self.samples) > 2 and now - self.samples[1][0] >= self.window_s:
            self.samples.popleft()
        (t0, s0), (t1, s1) = self.samples[0], self.samples[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 and s1 > s0 else (0.0 if t1 > t0 else None)


def role(process: str) -> str:
    """A process's role: its name without the index (`actor-3` -> `actor`)."""
    return re.sub(r"-\d+$", "", process)


def restarts_by_role(processes: Iterable[Any]) -> str:
    """`actor 2 (killed by SIGKILL), replay 1` for the roles whose processes restarted, each
    with how one of them last ended where the backend says; `none` when none did."""
    counts: dict[str, int] = {}
    causes: dict[str, str] = {}
    for proc in processes:
        if proc.restarts:
            counts[role(proc.name)] = counts.get(role(proc.name), 0) + proc.restarts
            if proc.last_end:
                causes[role(proc.name)] = proc.last_end
    shown = [f"{r} {n}" + (f" ({causes[r]})" if r in causes else "") for r, n in counts.items()]
    return ", ".join(sorted(shown)) or "none"


def startup_message(processes: list[Any], first_batch: str = "the learner's first batch") -> str:
    """What a starting run waits for: the processes not running yet, else the first batch."""
    waiting = [p.name for p in processes if p.state != "running"]
    running = len(processes) - len(waiting)
    if waiting:
        names = ", ".join(waiting[:6]) + (
            f" and {len(waiting) - 6} more" if len(waiting) > 6 else ""
        )
        return f"starting: {running}/{len(processes)} processes running; waiting for {names}"
    return f"starting: all {len(processes)} processes running; waiting for {first_batch}"


def policy_lag(status: dict[str, Any]) -> float | None:
    """Policy lag in parameter versions: the learner's `charts/policy_lag` (PPO: its version
    minus the mean version of the batch's segments; ES: 0, every result is the current
    generation's) or, where the learner cannot see the versions behind its data (DDPG/TD3: replay
    transitions carry none), how far the actors' policy is behind the learner: the learner's
    reported `version` minus the mean of `policy_version_actor_<i>` the actors report, at least
    0 (the two reports arrive at different times). None when neither is reported."""
    lag = status.get("charts/policy_lag")
    actors = [
        v
        for k, v in status.items()
        if k.startswith("policy_version_actor_") and isinstance(v, int | float)
    ]
    if lag is not None or status.get("version") is None or not actors:
        return lag
    return max(0.0, float(status["version"]) - sum(actors) / len(actors))


CLOCK = ("elapsed", "ETA")
"""The values that change every second: `PlainView` prints a line for the others' changes only."""


def clock(seconds: float | None) -> str:
    """`2:05` (m:ss), `1:02:05` (h:mm:ss) from 1 hour on; `-` for None."""
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(round(max(0.0, seconds))), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def eta(step: float, budget: float, rate: float | None) -> float | None:
    """Seconds until the step budget at the recent `rate` (steps/s); None while the rate is
    unknown or 0 (or there is no budget); 0 once the budget is used."""
    if budget and step >= budget:
        return 0.0
    if not budget or not rate or rate <= 0:
        return None
    return (budget - step) / rate


def waiting_for_steps(paced: float | None) -> str:
    """ ", waits for env steps N%" when an off-policy learner spent N% (at least 5%) of its
    recent time waiting for the actors' steps (`updates_per_step`, its `UpdatePace`), else ""."""
    return "" if paced is None or paced < 0.05 else f", waits for env steps {min(paced, 1.0):.0%}"


def fields(
    status: dict[str, Any],
    rate: float | None,
    total: int,
    processes: list[Any],
    elapsed: float | None = None,
) -> dict:
    """The values the display shows, formatted; a value not reported yet is `-`. With
    `elapsed` (seconds this launch has watched), also `elapsed` and the `ETA` to the budget at
    the recent `rate` (`-` until it can tell)."""

    def show(value: float | None, fmt: str) -> str:
        return "-" if value is None else fmt.format(value)

    budget = status.get("total_steps") or total
    step = status.get("global_step", 0)
    its, learn_time = status.get("charts/learner_its"), status.get("charts/learn_time")
    busy = None if its is None or learn_time is None else min(1.0, its * learn_time)
    values = {
        "step": f"{step:,}/{budget:,}" + (f" ({100 * step / budget:.0f}%)" if budget else ""),
        "steps/s": show(rate, "{:,.0f}"),
        "return": show(status.get("episodic_return"), "{:.1f}"),
        "eval": show(status.get("charts/eval_return"), "{:.1f}")
        + (
            ""
            if status.get("best_eval_return") is None
            else f" (best {status['best_eval_return']:.1f})"
        ),
        "learner": f"{show(busy, '{:.0%}')} busy, {show(its, '{:.2f}')} it/s"
        + waiting_for_steps(status.get("charts/learner_paced")),
        "lag": show(policy_lag(status), "{:.2f}"),
        "restarts": restarts_by_role(processes),
    }
    if elapsed is not None:
        values |= {"elapsed": clock(elapsed), "ETA": clock(eta(step, budget, rate))}
    return values


def progress_line(values: dict[str, str]) -> str:
    """The fields as one plain line, without the clock (`clock_text`)."""
    return " | ".join(
        f"step {values['step']}"
        if k == "step"
        else f"{v} steps/s"
        if k == "steps/s"
        else f"{k} {v}"
        for k, v in values.items()
        if k not in CLOCK
    )


def clock_text(values: dict[str, str] | None) -> str:
    """`elapsed 2:00 ETA 3:01`, or "" when the values have no clock."""
    return " ".join(f"{k} {values[k]}" for k in CLOCK if k in (values or {}))


class PlainView:
    """Plain lines, each printed only when its content changed, and at most every `every_s`
    within one phase: an urgent line (a failure, the budget used, a run starting) is printed at
    once when it opens a new phase, so 64 actors coming up one by one make one line per
    `every_s`, not one per actor."""

    def __init__(self, out: TextIO, every_s: float = 2.0) -> None:
        self.out, self.every_s = out, every_s
        self.started = time.monotonic()
        self.last_text: str | None = None
        self.last_phase: str | None = None
        self.last_print = float("-inf")

    def show(self, phase: str, text: str, urgent: bool = False, values: dict | None = None) -> None:
        """Print `[elapsed] text` unless it says what the last line said (or it is too soon);
        a training line ends with the clock (`elapsed 2:00 ETA 3:01`), which alone never makes
        a new line."""
        now = time.monotonic()
        at_once = urgent and phase != self.last_phase
        if text == self.last_text or (not at_once and now - self.last_print < self.every_s):
            return
        shown = " | ".join(filter(None, (text, clock_text(values) if values else "")))
        self.out.write(f"[{now - self.started:6.1f}s] {shown}\n")
        self.out.flush()
        self.last_text, self.last_phase, self.last_print = text, phase, now

    def close(self) -> None:
        """Nothing to clean up."""
