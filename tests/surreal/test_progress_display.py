"""The progress display of `surreal launch`: a live panel on a terminal, plain lines elsewhere.

Both are driven by `surreal.launch.progress_demo`, a scripted run through the real `monitor`: processes
start one by one, an actor restarts twice, the learner trains to its budget and exits.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import uuid

import pytest

from surreal.launch.progress_view import PlainView, RateWindow, fields, restarts_by_role
from symphony.testing import scaled, wait_for

pytestmark = pytest.mark.timeout(120)


def test_steps_per_second_is_the_rate_of_the_last_window_not_since_start():
    rates = RateWindow(window_s=10.0)
    rates.add(0.0, 0)
    rates.add(100.0, 1000)  # a slow start-up: 10 steps/s on average so far
    for t in range(101, 131):
        rate = rates.add(float(t), 1000 + (t - 100) * 500)  # then a steady 500 steps/s
    assert rate == pytest.approx(500.0)
    assert rates.add(131.0, 10) is None  # a restarted learner counts again: the window restarts


def test_the_eta_is_the_rest_of_the_budget_at_the_recent_rate_and_a_dash_until_known():
    status = {"global_step": 40_000, "total_steps": 100_000}
    values = fields(status, 200.0, 0, [], elapsed=120.3)
    assert values["elapsed"] == "2:00" and values["ETA"] == "5:00"  # 60,000 steps at 200/s
    assert fields(status, None, 0, [], elapsed=5.0)["ETA"] == "-"  # one sample: no rate yet
    assert fields(status, 0.0, 0, [], elapsed=5.0)["ETA"] == "-"  # stalled: no honest ETA
    assert fields(status, 10.0, 0, [], elapsed=3725.0)["elapsed"] == "1:02:05"
    assert fields(status, 10.0, 0, [], elapsed=1.0)["ETA"] == "1:40:00"
    assert "elapsed" not in fields(status, 200.0, 0, [])  # `surreal status`: no clock


def test_a_plain_line_whose_clock_alone_changed_is_not_printed_again(tmp_path):
    out = io.StringIO()
    view = PlainView(out, every_s=0.0)
    status = {"global_step": 40_000, "total_steps": 100_000}
    for elapsed in (10.0, 11.0, 12.0):  # a waiting run: the same step, the clock moving
        values = fields(status, 0.0, 0, [], elapsed=elapsed)
        view.show("training", "step 40,000/100,000 (40%)", values=values)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].endswith("step 40,000/100,000 (40%) | elapsed 0:10 ETA -")


def test_restarts_are_summed_per_role():
    class P:
        def __init__(self, name, restarts, last_end=None):
            self.name, self.restarts, self.last_end = name, restarts, last_end

    procs = [P("actor-0", 2), P("actor-1", 1), P("replay-0", 0), P("learner", 1)]
    assert restarts_by_role(procs) == "actor 3, learner 1"
    assert restarts_by_role([P("actor-0", 0)]) == "none"
    killed = [P("actor-0", 2, "killed by SIGKILL"), P("replay-0", 1, "exited with 1")]
    assert restarts_by_role(killed) == "actor 2 (killed by SIGKILL), replay 1 (exited with 1)"


def _strip_time(line: str) -> str:
    return re.sub(r"^\[\s*[\d.]+s\] ", "", line)


@pytest.mark.integration
def test_plain_mode_says_what_it_waits_for_and_never_repeats_a_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "surreal.launch.progress_demo", str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=scaled(100),
    )
    assert result.returncode == 0, result.stderr
    lines = [_strip_time(line) for line in result.stdout.splitlines()]
    assert "\x1b" not in result.stdout  # no terminal escapes in a pipe
    assert lines[0] == (
        "starting: 0/4 processes running; waiting for learner, replay, actor-0, actor-1"
    )
    assert "starting: 2/4 processes running; waiting for actor-0, actor-1" in lines
    assert "starting: all 4 processes running; waiting for the learner's first batch" in lines
    assert all(a != b for a, b in zip(lines, lines[1:], strict=False)), lines
    assert len(lines) == len(set(lines))
    training = [line for line in lines if line.startswith("step ")]
    assert len(training) >= 5
    assert "restarts actor 2" in training[-1] and "eval 42.0 (best 42.0)" in training[-1]
    assert "learner 80% busy, 20.00 it/s" in training[-1] and "lag 0.50" in training[-1]
    assert lines[-1].startswith(
        "budget used: the learner writes its checkpoint (step 1,000/1,000 (100%)) | elapsed "
    ) and lines[-1].endswith(" ETA 0:00")
    assert all(re.search(r" \| elapsed \d+:\d\d ETA (-|\d+:\d\d)$", line) for line in training)
    assert re.search(r"ETA \d+:\d\d$", training[-1])  # the demo's steady rate gives one


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.integration
def test_on_a_terminal_one_panel_updates_in_place(tmp_path):
    socket = f"surreal-progress-{uuid.uuid4().hex[:8]}"
    run = tmp_path / "run"
    command = f"{sys.executable} -m surreal.launch.progress_demo {run}; sleep 60"
    try:
        subprocess.run(
            ["tmux", "-L", socket, "new-session", "-d", "-x", "100", "-y", "40", command],
            check=True,
            timeout=20,
        )
        wait_for(lambda: (run / "done").exists(), timeout=90, what="the scripted run to end")
        screen = subprocess.run(
            ["tmux", "-L", socket, "capture-pane", "-p"], capture_output=True, text=True, timeout=20
        ).stdout
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=20)
    rows = [r for r in screen.splitlines() if r.strip()]
    assert screen.count("phase") == 1, screen  # one panel redrawn, not a scroll of lines
    assert rows[0].startswith("╭") and "demo" in rows[0] and rows[-1].startswith("╰"), screen
    text = " ".join(screen.split())
    for expected in (
        "phase budget used: the learner writes its checkpoint",
        "step 1,000/1,000 (100%)",
        "eval 42.0 (best 42.0)",
        "learner 80% busy, 20.00 it/s",
        "lag 0.50",
        "restarts actor 2",
    ):
        assert expected in text, (expected, screen)
    assert "starting" not in screen  # the start-up phase was replaced in place


def test_quiet_lines_of_64_actors_starting_one_by_one_are_one_line_and_a_failure_shows_at_once():
    out = io.StringIO()
    view = PlainView(out, every_s=30.0)  # --quiet
    for running in range(1, 65):  # every poll sees one more process running
        view.show("starting", f"starting: {running}/64 processes running", urgent=True)
    view.show("failed", "the learner ended (failed, exit code 1)", urgent=True)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert "starting: 1/64" in lines[0] and "the learner ended" in lines[1]
