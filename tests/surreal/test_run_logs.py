"""What a person can read about a run: every process's log, and symphony's record after it ended.

One short real run (`surreal launch ppo`, 2 actors, 2,000 steps) with progress lines every 0.5 s
(`SURREAL_LOG_PROGRESS_S`, so that a short run has some), then its logs in `RUN/logs/` and
through `symphony logs/list/describe`, and the name a relaunch gets (that test drops the run's
record, as a resume does: it comes last of the three); a run that crashes (kept as failed, the
traceback in its log); the log helpers on their own.
"""

import io
import json
import logging
import re
import subprocess
import sys
import time

import pytest

from surreal.launch.experiment import _free_experiment_name, plan
from surreal.launch.stopping import ending_why, keep_log
from surreal.monitoring import logs
from surreal.monitoring.logs import PROGRESS_ENV, DropReport, Progress, Warnings, ending, setup
from surreal.runtime.runfolder.rundir import RunDir, stop_reason, write_ending, write_json
from surreal.runtime.wire.guard import PortGuard
from surreal.testing import surreal_cli
from symphony.records import Records
from symphony.testing import scaled
from tests.surreal.helpers import QUICK, env_for

pytestmark = [pytest.mark.timeout(300), pytest.mark.integration]

NAME = "logs-a"  # the symphony experiment of runs/logs/a
PROCESSES = ("metrics", "buffer", "learner", "param-server", "evaluator", "actor-0", "actor-1")
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d (INFO|WARNING|ERROR) ([\w-]+): ")


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("run-logs")
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "2000"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(PROGRESS_ENV, "0.5")
        result = surreal_cli(
            ["launch", *args, "--name", "logs", "--trial", "a", "--quiet", *QUICK],
            root,
            root / "home",
        )
    assert result.returncode == 0, result.stdout + result.stderr
    return root, root / "runs" / "logs" / "a"


def symphony(root, *args):
    return subprocess.run(
        [sys.executable, "-m", "symphony", *args],
        cwd=root,
        env=env_for(root / "home"),
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


def test_every_process_logs_its_start_progress_and_stop(finished_run):
    _, run = finished_run
    for process in PROCESSES:
        lines = (run / "logs" / f"{process}.log").read_text().splitlines()
        ours = [line for line in lines if (m := LINE.match(line)) and m.group(2) == process]
        assert ours, f"{process}.log has no line of its own: {lines}"
        role = process.split("-")[0] if process.startswith("actor") else process
        assert f"INFO {process}: start: role {role}, index " in ours[0], ours[0]
        assert re.search(
            r"pid \d+ on .+; run .+/runs/logs/a; services .*metrics=127\.0\.0\.1:", ours[0]
        )
        assert any(": progress: " in line for line in ours), f"{process}: no progress line"
        assert "stop: " in ours[-1], f"{process}.log does not end with a stop line: {ours[-1]}"
        assert "Traceback" not in "\n".join(lines), f"{process}.log has a traceback"
    learner = (run / "logs" / "learner.log").read_text()
    assert "stop: finished after" in learner  # it used the budget; the others were stopped
    assert re.search(r"budget used at step [\d,]+ of 2,000 .*checkpoint .*latest\.pt", learner)
    assert re.search(r"progress: step [\d,]+ \([\d.,]+/s\), updates \d+", learner)
    actor = (run / "logs" / "actor-0.log").read_text()
    assert "connects experience tcp://127.0.0.1:" in actor and "first parameters: version" in actor
    assert re.search(r"progress: env steps [\d,]+ \([\d.,]+/s\), segments", actor)
    # the launcher stopped it because the learner used its budget: said so, not "a signal"
    assert re.search(r"stop: the run finished \(budget used\) after [\d.]+ s$", actor, re.M)
    assert "stopped by a signal" not in "".join(
        (run / "logs" / f"{p}.log").read_text() for p in PROCESSES
    )
    buffer = (run / "logs" / "buffer.log").read_text()
    assert re.search(r"binds experience tcp://127\.0\.0\.1:\d+ \(segments in\)", buffer)
    assert re.search(r"took [1-9][\d,]* segments, answered [1-9][\d,]* batches", buffer)


def test_symphony_keeps_the_ended_run_with_its_logs(finished_run):
    root, run = finished_run
    listed = symphony(root, "list", "--all")
    assert listed.returncode == 0, listed.stderr
    row = next((r for r in listed.stdout.splitlines() if r.startswith(f"{NAME} ")), None)
    assert row is not None, listed.stdout
    assert row.split()[2:4] == ["local", "finished"] and row.split()[-1] == "0/7"
    # how long it ran, and its last eval return and step (what surreal kept in the record)
    status = json.loads((run / "status.json").read_text())
    shown = f"eval {status['charts/eval_return']:.1f} step {status['global_step']:,}"
    assert re.search(rf" \d+:\d\d +{re.escape(shown)} +0/7$", row), (row, shown)
    described = symphony(root, "describe", NAME)
    assert described.returncode == 0, described.stderr
    assert "status=finished" in described.stdout
    assert re.search(r"^learner\s+learner\s+exited\s", described.stdout, re.M), described.stdout
    logs = symphony(root, "logs", NAME, "learner")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout == (run / "logs" / "learner.log").read_text()  # the run's copy, the same
    assert "learner: start: " in logs.stdout and "learner: stop: finished" in logs.stdout
    tail = symphony(root, "logs", NAME, "act", "--tail", "1")  # ambiguous process prefix
    assert tail.returncode == 2 and "ambiguous" in tail.stderr
    followed = symphony(root, "logs", NAME, "actor-1", "-f", "--tail", "1")  # ended: returns
    assert followed.returncode == 0
    assert "actor-1: stop: the run finished (budget used)" in followed.stdout
    status = surreal_cli(["status", str(run)], root, root / "home")
    assert f"not running (finished; `symphony describe {NAME}`)" in status.stdout, status.stdout
    assert "  state      finished (budget used)\n" in status.stdout, status.stdout
    # an ended run's checkpoint: when it was written, not an age that reads as a warning
    assert re.search(r"latest\.pt \(written \d{4}-\d\d-\d\d \d\d:", status.stdout)
    assert " s old" not in status.stdout


def test_a_relaunch_of_the_run_takes_over_its_record_another_run_gets_its_own(finished_run):
    """(A real `--resume` in the same state directory: tests/surreal/test_launch.py.)"""
    root, run = finished_run
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SYMPHONY_HOME", str(root / "home"))
        # the same folder names elsewhere make the same name: that run gets a name of its own
        elsewhere = plan(
            "ppo", env="gym:CartPole-v1", folder=str(root / "elsewhere"), name="logs", trial="a"
        )
        assert elsewhere.experiment_name == NAME
        assert _free_experiment_name(elsewhere) == f"{NAME}-2"
        assert Records(root / "home").load(NAME).outcome == "finished"  # untouched
        # `--resume` of the run itself: its ended launch's record makes room for the new one
        resumed = plan(None, resume=str(run))
        assert _free_experiment_name(resumed) == NAME
        assert NAME not in {r.name for r in Records(root / "home").all()}


BROKEN = """
import os

from surreal.algos.ppo.learner import PPOLearner
from surreal.algos.ppo.policy import PPOPolicy


class BrokenPolicy(PPOPolicy):
    def act(self, obs, deterministic=False):
        if os.environ.get("SYMPH_PROCESS", "").startswith("actor-"):
            raise ValueError("act() is broken on purpose")
        return super().act(obs, deterministic)


class Broken(PPOLearner):
    @classmethod
    def make_policy(cls, config, env_info):
        return BrokenPolicy(config, env_info)
"""


def test_a_crashed_run_stays_as_failed_with_the_traceback_in_its_log(tmp_path):
    """The actor crashes in act() (the launch check passes: act() works outside the actors);
    with run.max_restarts=0 the first crash ends the run (tests/surreal/test_monitoring_run.py)."""
    (tmp_path / "broken.py").write_text(BROKEN)
    args = ["launch", "broken.py:Broken", "--env", "gym:CartPole-v1", "--actors", "1"]
    args += ["--set", "run.max_restarts=0", "--name", "b", "--quiet", *QUICK]
    result = surreal_cli(args, tmp_path, tmp_path / "home")
    assert result.returncode == 1, result.stdout + result.stderr
    listed = symphony(tmp_path, "list", "--all").stdout
    row = next((r for r in listed.splitlines() if r.startswith("b-t1 ")), None)
    assert row is not None and row.split()[3] == "failed", listed
    log = symphony(tmp_path, "logs", "b-t1", "actor-0").stdout
    crash = log.index("actor-0: stop: crashed: ValueError: act() is broken on purpose")
    assert "Traceback (most recent call last)" in log[crash:]  # right below the stop line
    assert log.index("actor-0: start: role actor, index 0") < crash
    learner = symphony(tmp_path, "logs", "b-t1", "learner").stdout  # stopped because of it
    assert "learner: stop: the run failed (surreal launch stopped it: see its output)" in learner
    status = surreal_cli(
        ["status", str(tmp_path / "runs" / "b" / "t1")], tmp_path, tmp_path / "home"
    )
    assert "  state      failed (surreal launch stopped it: see its output)\n" in status.stdout


# The pieces, without a run: rate-limited progress and warnings, drop counts, the stop line.


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def captured():
    """This process's logging set up as a component's (`actor-3`), into a string; undone after."""
    root = logging.getLogger()
    handlers, level, process = list(root.handlers), root.level, logs._process
    stream = io.StringIO()
    yield setup("actor-3", stream), stream
    root.handlers[:] = handlers
    root.setLevel(level)
    logs._process = process


def test_progress_lines_are_rate_limited_and_carry_rates_since_the_last(captured):
    log, stream = captured
    clock = Clock()
    progress = Progress(log, every_s=30, start={"steps": 1000}, clock=clock)
    clock.now = 10
    assert not progress.tick({"steps": 2000})  # too soon: nothing written
    clock.now = 30
    assert progress.tick({"steps": 4000}, {"version": 7, "return": None})
    clock.now = 45
    assert not progress.tick({"steps": 9000})
    clock.now = 60
    assert progress.tick({"steps": 7000})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("INFO actor-3: progress: steps 4,000 (100/s), version 7")
    assert lines[1].endswith("progress: steps 7,000 (100/s)")


def test_a_warning_of_one_kind_is_written_once_per_window_with_the_count(captured):
    log, stream = captured
    clock = Clock()
    warnings = Warnings(log, every_s=300, clock=clock)
    assert warnings.warn("lost", "segments were lost")
    for t in range(1, 11):
        clock.now = t
        assert not warnings.warn("lost", "segments were lost")
    assert warnings.warn("other", "another kind")  # kinds are separate
    clock.now = 301
    assert warnings.warn("lost", "segments were lost again")
    clock.now = 302
    warnings.warn("lost", "and once more")
    warnings.flush()
    lines = [line.split(": ", 1)[1] for line in stream.getvalue().splitlines()]
    assert lines == [
        "segments were lost",
        "another kind",
        "segments were lost again (and 10 more like it in the last 301 s)",
        "and once more (1 time in the last 1 s)",
    ]
    assert all(" WARNING actor-3: " in line for line in stream.getvalue().splitlines())


def test_drops_are_reported_per_port_with_kinds_and_totals(captured):
    log, stream = captured
    guard = PortGuard("experience", out=io.StringIO())
    drops = DropReport(log, [guard])
    assert drops.check() == 0
    for _ in range(3):
        guard.reject("not a dict", "not-a-dict")
    guard.reject("wrong shape", "bad-shape")
    assert drops.check() == 4
    assert drops.check() == 0  # nothing new: nothing written
    guard.reject("wrong shape", "bad-shape")
    assert drops.check() == 1
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].endswith(
        "WARNING actor-3: dropped 4 messages on port experience since the last check "
        "(not-a-dict 3, bad-shape 1); 4 in all"
    )
    assert lines[1].endswith("(bad-shape 1); 5 in all")


def test_other_libraries_reach_the_log_from_warning_up_and_only_once(captured):
    log, stream = captured
    logging.getLogger("caraml").info("chatter")
    logging.getLogger("caraml").warning("rejected malformed message #1")
    own = logging.getLogger("has-its-own-handler")
    own.addHandler(logging.NullHandler())
    try:
        own.warning("printed by its own handler")
    finally:
        own.handlers.clear()
    log.info("ours")
    text = stream.getvalue()
    assert "chatter" not in text and "printed by its own handler" not in text
    assert "WARNING caraml: rejected malformed message #1" in text
    assert "INFO actor-3: ours" in text


@pytest.mark.parametrize(
    "error, stopping, expected",
    [
        (None, False, (logging.INFO, "finished")),
        (SystemExit(0), True, (logging.INFO, "stopped by a signal")),
        (
            OSError("socket closed"),
            True,
            (logging.INFO, "stopped by a signal (OSError: socket closed)"),
        ),
        (ValueError("bad"), False, (logging.ERROR, "crashed: ValueError: bad (traceback below)")),
        (SystemExit(3), False, (logging.ERROR, "SystemExit(3)")),
    ],
)
def test_the_stop_line_says_how_the_process_ended(error, stopping, expected):
    assert ending(error, stopping) == expected


def test_a_stop_signal_the_run_explained_is_logged_as_what_it_meant(tmp_path):
    run = RunDir(tmp_path)
    began = time.time()
    assert stop_reason(run, began) is None  # nobody said why: "stopped by a signal"
    assert ending(SystemExit(0), True, stop_reason(run, began))[1] == "stopped by a signal"
    write_json(run.status_file, {"finished": True, "updated": began - 60})
    assert stop_reason(run, began) is None  # an earlier launch's status is not about it
    write_json(run.status_file, {"finished": True, "updated": began + 1})
    assert stop_reason(run, began) == "the run finished (budget used)"
    for outcome, why, said in (
        ("finished", "eval 480.0 >= run.stop_at_return 475.0", "the run finished (eval 480.0"),
        ("stopped", "surreal launch was interrupted", "stopped (surreal launch was interrupted)"),
        ("failed", "surreal launch stopped it: see its output", "the run failed (surreal"),
    ):
        write_ending(run, outcome, why)
        assert stop_reason(run, began).startswith(said)
        level, text = ending(OSError("socket closed"), True, stop_reason(run, began))
        assert level == logging.INFO and text.endswith(") (OSError: socket closed)")
    assert stop_reason(run, time.time() + 60) is None  # said before this process started
    assert ending(ValueError("bad"), False, "the run finished")[1].startswith("crashed: ")


def test_the_launcher_says_why_it_ends_the_run(tmp_path):
    run = RunDir(tmp_path)
    write_json(run.status_file, {"global_step": 900, "total_steps": 1000})
    assert ending_why(run, 0) == "budget used"  # the learner exited 0 before its last report
    assert ending_why(run, 130) == "surreal launch was interrupted"
    assert ending_why(run, 1).startswith("surreal launch stopped it")


def test_run_logs_only_grow_whether_or_not_the_record_held_the_earlier_launches(tmp_path):
    kept = tmp_path / "learner.log"
    keep_log(b"one\n", kept)
    keep_log(b"one\n--- resumed at step 5 ---\ntwo\n", kept)  # the record took over the first
    assert kept.read_bytes() == b"one\n--- resumed at step 5 ---\ntwo\n"
    keep_log(b"--- resumed at step 9 ---\nthree\n", kept)  # the record was deleted in between
    assert (
        kept.read_bytes()
        == b"one\n--- resumed at step 5 ---\ntwo\n--- resumed at step 9 ---\nthree\n"
    )
