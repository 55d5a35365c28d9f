"""Windowing, medians and paired ratios for the peer benchmarks; the same code for every system.

A system's progress is a list of `(seconds since its launch, steps)` samples from its own step
counter (the learner's consumed env steps, or the peer's equivalent). `steady_rate` splits it into
start-up (launch to the first sample past `min_steps`) and a steady window that begins `skip_s`
later and ends at the last sample; the rate is measured between the first and last samples inside
the window, so a counter that reports every few seconds gives an exact rate, not a stale one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    """One run's start-up and steady-state rate."""

    startup_s: float  # launch to the first counted step (past min_steps)
    rate: float  # steps/s between the first and last samples of the steady window
    seconds: float  # length of the measured window
    steps: int  # steps counted inside it


def steady_rate(
    samples: Sequence[tuple[float, float]], skip_s: float, min_steps: float = 0
) -> Window | None:
    """The steady window of `samples` (sorted by time); None if it holds fewer than 2 samples."""
    started = [(t, s) for t, s in samples if s > min_steps]
    if not started:
        return None
    t_start = started[0][0]
    inside = [(t, s) for t, s in started if t >= t_start + skip_s]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    (t0, s0), (t1, s1) = inside[0], inside[-1]
    return Window(
        startup_s=t_start, rate=(s1 - s0) / (t1 - t0), seconds=t1 - t0, steps=int(s1 - s0)
    )


@dataclass(frozen=True)
class Spread:
    """Median and range of one quantity over rounds."""

    median: float
    low: float
    high: float
    n: int

    def __str__(self) -> str:
        if self.n == 0:
            return "-"
        return f"{_num(self.median)} [{_num(self.low)}-{_num(self.high)}]"


def spread(values: Sequence[float | None]) -> Spread:
    """Median, min and max of the values that exist (None: that round measured nothing)."""
    xs = [v for v in values if v is not None]
    if not xs:
        return Spread(float("nan"), float("nan"), float("nan"), 0)
    return Spread(statistics.median(xs), min(xs), max(xs), len(xs))


def paired_ratios(ours: Sequence[float | None], base: Sequence[float | None]) -> list[float]:
    """Round-by-round ratios ours[i] / base[i] (rounds where both measured and base > 0)."""
    if len(ours) != len(base):
        raise ValueError(f"rounds differ: {len(ours)} vs {len(base)}; pair the same rounds")
    return [o / b for o, b in zip(ours, base, strict=True) if o is not None and b]


def value_at(curve: Sequence[tuple[float, float]], t: float) -> float | None:
    """The last value of a (time, value) curve at or before `t` (None before its first point)."""
    last = None
    for ti, v in curve:
        if ti > t:
            break
        last = v
    return last


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.2f}"
