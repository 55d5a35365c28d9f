"""bench/peers/stats.py: the windowing, medians and paired ratios every peer benchmark row uses,
checked on synthetic step counters."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "peer_stats", Path(__file__).resolve().parents[1] / "bench" / "peers" / "stats.py"
)
stats = importlib.util.module_from_spec(_SPEC)
sys.modules["peer_stats"] = stats  # dataclasses look their module up
_SPEC.loader.exec_module(stats)


def counter(startup: float, slow: float, fast: float, until: float, every: float = 2.0):
    """A counter that is 0 until `startup`, runs at `slow` steps/s for 10 s, then at `fast`."""
    samples, t, steps = [(0.0, 0.0)], startup, 0.0
    while t <= until:
        samples.append((t, steps + 1))  # the first report: 1 step past start-up
        dt = every
        rate = slow if t < startup + 10 else fast
        steps += rate * dt
        t += dt
    return samples


def test_the_window_excludes_start_up_and_the_warm_up_and_measures_the_steady_rate():
    samples = counter(startup=30.0, slow=100.0, fast=1000.0, until=120.0)
    window = stats.steady_rate(samples, skip_s=10.0)
    assert window.startup_s == 30.0
    assert window.rate == pytest.approx(1000.0)
    assert window.seconds == pytest.approx(120.0 - 40.0)
    # counting from launch would include 30 s of nothing and 10 s at 100/s
    naive = samples[-1][1] / samples[-1][0]
    assert naive < 0.75 * window.rate


def test_min_steps_moves_the_start_past_a_warm_up_phase_counted_in_steps():
    # 25k random steps in 5 s, then 200 steps/s of learning
    samples = [(float(t), 5000.0 * t) for t in range(6)]
    samples += [(5.0 + t, 25_000 + 200.0 * t) for t in range(1, 40)]
    window = stats.steady_rate(samples, skip_s=5.0, min_steps=25_000)
    assert window.startup_s == 6.0
    assert window.rate == pytest.approx(200.0)


def test_a_window_with_too_few_samples_measures_nothing():
    assert stats.steady_rate([(0.0, 0.0), (5.0, 0.0)], skip_s=1.0) is None
    assert stats.steady_rate([(1.0, 10.0), (2.0, 20.0)], skip_s=5.0) is None


def test_spread_gives_median_and_range_and_skips_rounds_that_measured_nothing():
    s = stats.spread([3.0, None, 1.0, 10.0])
    assert (s.median, s.low, s.high, s.n) == (3.0, 1.0, 10.0, 3)
    assert stats.spread([2.0, 4.0]).median == 3.0
    empty = stats.spread([None])
    assert empty.n == 0 and math.isnan(empty.median) and str(empty) == "-"


def test_ratios_pair_the_same_rounds():
    ours, base = [200.0, 300.0, None], [100.0, 300.0, 50.0]
    # round by round (2.0, 1.0), not the ratio of medians (250/100) nor mixed rounds
    assert stats.paired_ratios(ours, base) == [2.0, 1.0]
    with pytest.raises(ValueError, match="rounds differ"):
        stats.paired_ratios([1.0], [1.0, 2.0])


def test_value_at_reads_a_curve_at_equal_wall_time():
    curve = [(10.0, -5.0), (20.0, 3.0), (40.0, 9.0)]
    assert stats.value_at(curve, 5.0) is None
    assert stats.value_at(curve, 25.0) == 3.0
    assert stats.value_at(curve, 100.0) == 9.0


RUN = Path(__file__).resolve().parents[1] / "bench" / "peers" / "run.py"


def test_the_runner_explains_itself_and_refuses_an_unknown_system():
    import subprocess

    helped = subprocess.run([sys.executable, str(RUN), "--help"], capture_output=True, text=True)
    assert helped.returncode == 0
    assert "--quick" in helped.stdout and "cleanrl-td3" in helped.stdout
    bad = subprocess.run(
        [sys.executable, str(RUN), "--systems", "cleanrl-ppo,nope"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and "unknown system(s) ['nope']" in bad.stderr


@pytest.mark.integration
def test_the_table_pairs_rounds_and_names_a_peer_that_could_not_run(tmp_path):
    import json
    import subprocess

    def counter(rate):  # start-up 5 s, then `rate` steps/s, one sample a second up to 60 s
        return [[0.0, 0.0]] + [[5.0 + t, 1 + rate * t] for t in range(56)]

    runs = {
        "surreal-ppo": [{"steps": counter(300), "returns": [[50.0, -10.0]], "error": ""}] * 2,
        "cleanrl-ppo": [
            {"steps": counter(100), "returns": [], "error": ""},
            {"steps": counter(150), "returns": [], "error": ""},
        ],
    }
    saved = {
        "args": {
            "quick": False,
            "rounds": 2,
            "seconds": 60.0,
            "skip": 10.0,
            "threads": 1,
            "systems": "surreal-ppo,cleanrl-ppo,rllib-ppo",
        },
        "names": ["surreal-ppo", "cleanrl-ppo", "rllib-ppo"],
        "unavailable": {"rllib-ppo": "raylet did not start"},
        "loads": [1.0, 2.5],
        "runs": runs,
    }
    path = tmp_path / "peers.json"
    path.write_text(json.dumps(saved))
    out = subprocess.run(
        [sys.executable, str(RUN), "--table-from", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    ).stdout
    row = next(line for line in out.splitlines() if line.startswith("surreal-ppo"))
    # rate 300 every round; start-up 5 s; ratios 300/100 and 300/150 paired: median 2.5 [2-3]
    assert "300 [300-300]" in row and "5.00 [5.00-5.00]" in row and "2.50 [2.00-3.00]x" in row
    assert "rllib-ppo            not run: raylet did not start" in out
    assert "load average 1.0-2.5" in out
