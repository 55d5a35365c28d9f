"""Issue 49 item 1: the single replay shard killed (kill -9) after the learner started comes back
empty, refills, and the run finishes its budget: while the learner has no batch it says so in
its publications, and the actors act on instead of waiting for a parameter version that only
their own transitions can bring. With `algo.save_replay=false` the shard neither loads nor
writes a part of the replay (tests/surreal/test_replay_resume.py: the default, saved)."""

from __future__ import annotations

import os
import signal

import pytest

from symphony.testing import scaled
from tests.surreal.helpers import describe, start_launch, status, wait_until

pytest.importorskip("torch")


@pytest.mark.integration
@pytest.mark.timeout(420)
def test_the_single_replay_shard_killed_after_the_learner_started_the_run_finishes(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "refill" / "a"
    args = ["td3", "--env", "gym:Pendulum-v1", "--actors", "2", "--steps", "6000"]
    args += ["--folder", str(tmp_path / "runs"), "--name", "refill", "--trial", "a", "--quiet"]
    args += ["--set", "env.num_envs=1", "--set", "algo.hidden=64,64"]
    args += ["--set", "algo.batch_size=64", "--set", "algo.replay_start=1000"]
    # the replay not saved: the restarted shard comes back empty (and nothing is written)
    args += ["--set", "algo.save_replay=false"]
    proc = start_launch(args, tmp_path, home)
    try:
        wait_until(lambda: status(run).get("version", 0) >= 5, 180, "learner updates", proc)
        step_at_kill = status(run)["global_step"]
        assert step_at_kill < 3_000, "the budget must outlast the kill and the refill"
        os.kill(describe(home, "refill-a").process("replay-0").pid, signal.SIGKILL)
        assert proc.wait(timeout=scaled(300)) == 0, "the run ended with its budget used"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    final = status(run)
    assert final["finished"] and final["global_step"] >= 6_000
    assert describe(home, "refill-a").process("replay-0").restarts >= 1
    learner_log = (run / "logs" / "learner.log").read_text()
    assert "replay-0 refilling (" in learner_log  # what the learner waited for, said
    saved = [p.name for p in (run / "checkpoints").iterdir()]
    assert "latest.pt" in saved and not [n for n in saved if "replay" in n], saved
