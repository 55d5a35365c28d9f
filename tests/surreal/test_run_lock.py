"""One run folder, one launch: a second launch of a running run is refused before it writes."""

import fcntl
import os

import pytest

from surreal.testing import surreal_cli
from tests.surreal.helpers import QUICK, ctrl_c, start_launch, status, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _error_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Error:")]


def _snapshot(run) -> dict[str, float]:
    """What a launch writes before it starts anything: config, run record, spec, monitoring."""
    files = [run / "config.json", run / "run.json", run / "experiment.yaml"]
    files += sorted((run / "monitoring").rglob("*"))
    return {str(f): f.stat().st_mtime_ns for f in files}


def test_a_second_launch_of_a_running_run_is_refused_and_the_first_goes_on(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "once" / "a"
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "10000000"]
    proc = start_launch([*args, "--name", "once", "--trial", "a", *QUICK], tmp_path, home)
    try:
        wait_until(lambda: status(run).get("global_step", 0) > 0, 120, "first learner step", proc)
        before = _snapshot(run)
        again = surreal_cli(["launch", *args, "--name", "once", "--trial", "a"], tmp_path, home)
        resumed = surreal_cli(["launch", "--resume", str(run)], tmp_path, home)
        for result, says in ((again, "exists"), (resumed, "the run is still running")):
            assert result.returncode == 2, result.stdout + result.stderr
            assert len(_error_lines(result)) == 1 and says in _error_lines(result)[0]
        assert "surreal status -f" in _error_lines(resumed)[0]
        assert _snapshot(run) == before  # nothing rewritten under the running run
        step = status(run)["global_step"]
        wait_until(lambda: status(run).get("global_step", 0) > step, 60, "the first run", proc)
        ctrl_c(proc)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    # its lock was the launcher's: once it ended, --resume may go on with the run
    with open(run / ".launch.lock", "a") as held:  # what a launch in progress holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        busy = surreal_cli(["launch", "--resume", str(run), "--steps", "1"], tmp_path, home)
    assert busy.returncode == 2 and "is being launched or run by another" in busy.stderr
    assert os.path.getsize(run / ".launch.lock") == 0
    done = surreal_cli(["launch", "--resume", str(run), "--steps", "1"], tmp_path, home)
    assert done.returncode == 0, done.stdout + done.stderr
