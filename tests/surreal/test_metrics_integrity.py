"""The run's step is its learner's, and only the run's processes report it (issue 50).

A report without the run's token is dropped and counted; a learner that starts behind what the
run had reached (a crash, then `--resume`) takes the step back with it and `metrics.jsonl` loses
the rows past it, so no scalar's steps go back or repeat; a deleted `metrics.jsonl` is written
anew.
"""

from __future__ import annotations

import json
import os
import signal
import stat
from collections import defaultdict
from pathlib import Path

import pytest

import caraml
from surreal.runtime.processes.metrics import MetricsSink
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.wire import report_token, schemas
from surreal.runtime.wire.guard import Invalid
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import describe, metric_records, start_launch, status, wait_until
from tests.surreal.run_ports import endpoints

pytestmark = pytest.mark.timeout(180)


def _report(step: int, boot: str, start: int | None = None, **scalars: float) -> dict:
    message = {"source": "learner", "index": 0, "step": step, "boot": boot, "scalars": scalars}
    return schemas.report(message if start is None else {**message, "start": start})


def _rows(run: Path) -> dict[str, list[int]]:
    """Each scalar's steps, in the order of `metrics.jsonl`."""
    steps: dict[str, list[int]] = defaultdict(list)
    for row in metric_records(run):
        steps[row["name"]].append(row["step"])
    return steps


def test_a_report_without_the_runs_token_is_refused():
    good = {"source": "learner", "step": 5, "token": "a" * 32}
    assert schemas.report(good, token="a" * 32)["step"] == 5
    for forged in ({**good, "token": "b" * 32}, {**good, "token": 7}, {"source": "learner"}):
        with pytest.raises(Invalid) as err:
            schemas.report(forged, token="a" * 32)
        assert err.value.kind == "no-token"
    assert schemas.report({"source": "learner", "step": 5})["step"] == 5  # a run without one


def test_a_learner_that_starts_behind_takes_the_step_and_the_rows_back_with_it(tmp_path):
    notes: list[str] = []
    sink = MetricsSink(tmp_path, 10_000, tensorboard=False, say=notes.append)
    for step in (0, 100, 200, 300, 400):
        sink.handle(_report(step, "first", start=0, loss=float(step)))
    sink.flush()
    assert sink.status["global_step"] == 400
    sink.handle(_report(200, "second", start=200))  # restarted from its step-200 checkpoint
    sink.handle(_report(400, "first", start=0, loss=-1.0))  # the crashed one's, arrived late
    assert sink.status["global_step"] == 200
    for step in (300, 400, 500):
        sink.handle(_report(step, "second", start=200, loss=float(step)))
    sink.close()
    assert _rows(tmp_path)["loss"] == [0, 100, 200, 300, 400, 500]
    assert [r["value"] for r in metric_records(tmp_path) if r["step"] == 400] == [400.0]
    assert sink.status["global_step"] == 500
    assert (
        len(notes) == 1
        and "began at step 200 (its checkpoint), behind the run's 400: 2 rows" in notes[0]
    )


def test_a_deleted_metrics_file_is_written_anew(tmp_path):
    notes: list[str] = []
    sink = MetricsSink(tmp_path, 10_000, tensorboard=False, say=notes.append)
    sink.handle(_report(100, "a", start=0, loss=1.0))
    sink.flush()
    (tmp_path / "metrics.jsonl").unlink()
    sink.handle(_report(200, "a", start=0, loss=2.0))
    sink.flush()
    sink.handle(_report(300, "a", start=0, loss=3.0))
    sink.close()
    assert _rows(tmp_path)["loss"] == [200, 300]
    assert len(notes) == 1 and "was deleted or replaced" in notes[0]


def _actor(index: int, env_steps: int) -> dict:
    return schemas.report(
        {"source": "actor", "index": index, "step": 0, "env_steps": env_steps, "scalars": {}}
    )


def test_a_restarted_sink_does_not_count_the_actors_steps_twice(tmp_path):
    """Before: a metrics process killed mid-run counted each actor's whole step count again
    from its first report after the restart (TD3 Pendulum, 6,000 steps: actor_steps 9,600)."""
    sink = MetricsSink(tmp_path, 10_000, tensorboard=False, say=lambda line: None)
    for index, steps in ((0, 500), (1, 400), (0, 1000), (1, 800)):
        sink.handle(_actor(index, steps))
    sink.close()  # killed after its last status.json
    again = MetricsSink(tmp_path, 10_000, tensorboard=False, say=lambda line: None)
    for index, steps in ((0, 1200), (1, 800), (1, 100)):  # actor 1 restarted: from 0 again
        again.handle(_actor(index, steps))
    again.close()
    shown = json.loads((tmp_path / "status.json").read_text())
    assert shown["actor_steps"] == 1200 + 800 + 100
    assert shown["actor_env_steps"] == {"0": 1200, "1": 100}
    (tmp_path / "status.json").write_text(json.dumps({**shown, "actor_env_steps": ["junk"]}))
    MetricsSink(tmp_path, 10_000, tensorboard=False).close()  # junk: counted as nothing, no crash


QUICK_RUN = ["ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--quiet"]


@pytest.mark.integration
def test_a_forged_report_is_dropped_and_a_deleted_metrics_file_gets_the_later_rows(tmp_path):
    """The issue's forged report (a learner at 1.5x the budget, finished), sent to the live run's
    metrics port without the run's token and with a wrong one: dropped and counted, the step
    stays the learner's. Then metrics.jsonl is deleted while the run trains: it comes back
    with the rows after it."""
    home, run, budget = tmp_path / "home", tmp_path / "runs" / "forged" / "a", 16_000
    proc = start_launch(
        [*QUICK_RUN, "--steps", str(budget), "--name", "forged", "--trial", "a"], tmp_path, home
    )
    try:
        wait_until(lambda: status(run).get("global_step", 0) > 0, 120, "first learner step", proc)
        token = run / "keys" / report_token.FILE
        assert stat.S_IMODE(token.stat().st_mode) == 0o600 and token.read_text().strip()
        host, port = endpoints(home, "forged-a")["metrics"]
        pusher = caraml.Pusher(f"tcp://{host}:{port}")
        forged = {"source": "learner", "index": 0, "step": budget * 3 // 2, "finished": True}
        try:
            for message in (forged, {**forged, "token": "0" * 32}):
                pusher.push({**message, "scalars": {"charts/sps": 1e9}})
            wait_until(lambda: status(run).get("invalid_messages", 0) >= 2, 60, "drops", proc)
        finally:
            pusher.close()  # after they arrived: a closed Pusher drops what it did not send
        deleted_at = status(run)["global_step"]
        (run / "metrics.jsonl").unlink()
        out, _ = proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    final = status(run)
    assert budget <= final["global_step"] < budget * 3 // 2 and final["invalid_messages"] == 2
    assert max(_rows(run)["charts/sps"]) == final["global_step"] > deleted_at
    assert 1e9 not in [r["value"] for r in metric_records(run)]
    sink_log = (run / "logs" / "metrics.log").read_text()
    assert "dropped a message (no-token)" in sink_log and "was deleted or replaced" in sink_log


def _stopped_ahead_of_its_checkpoint(home: Path, run: Path, pid: int) -> int | None:
    """Hold the learner (SIGSTOP) and return its checkpoint's step when the run's step is past
    it; else let it go on (None)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        saved = checkpoint.load(run / "checkpoints" / "latest.pt")["counters"]["global_step"]
    except (FileNotFoundError, checkpoint.CheckpointError):
        saved = None
    if saved is not None and status(run).get("global_step", 0) > saved:
        return saved
    os.kill(pid, signal.SIGCONT)
    return None


@pytest.mark.integration
def test_the_step_never_goes_back_across_a_learner_crash_and_a_resume(tmp_path):
    """The issue's run: the learner killed past its checkpoint, then resumed. The resumed run's
    step starts at the checkpoint's (not the largest any report claimed), and metrics.jsonl keeps
    one row per step for the learner's scalars, in order."""
    home, run = tmp_path / "home", tmp_path / "runs" / "mono" / "a"
    proc = start_launch(
        [*QUICK_RUN, "--steps", "10000000", "--name", "mono", "--trial", "a"]
        + ["--set", "run.checkpoint_every=4"]
        + ["--set", "run.max_restarts=0"],  # the killed learner stays dead: the run ends
        tmp_path,
        home,
    )
    try:
        wait_until(lambda: (run / "checkpoints" / "latest.pt").is_file(), 120, "a checkpoint", proc)
        pid = describe(home, "mono-a").process("learner").pid
        saved = wait_until(
            lambda: _stopped_ahead_of_its_checkpoint(home, run, pid), 120, "steps past it", proc
        )
        reached = status(run)["global_step"]
        os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out
    resumed = surreal_cli(
        ["launch", "--resume", str(run), "--steps", str(reached + 2000), "--quiet"], tmp_path, home
    )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    final = checkpoint.load(run / "checkpoints" / "latest.pt")["counters"]["global_step"]
    assert status(run)["global_step"] == final >= reached + 2000
    rows = _rows(run)
    for name in ("charts/sps", "losses/policy_loss"):
        assert rows[name] == sorted(set(rows[name])), (name, rows[name])  # no step back or twice
    assert max(max(steps) for steps in rows.values()) == final
    sink_log = (run / "logs" / "metrics.log").read_text()
    assert f"the learner began at step {saved:,} (its checkpoint), behind the run's " in sink_log
    assert json.loads((run / "status.json").read_text())["invalid_messages"] == 0
