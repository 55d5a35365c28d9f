"""Issue 49 item 2, end to end: a TD3 Pendulum run's replay shard saves its part beside the
checkpoint; killed (kill -9) it comes back with that part instead of empty; `--resume` of the
finished run starts from the same replay (same size, same contents checksum) and keeps adding to
it; and a part changed on disk is refused with one line, the shard starting empty."""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest

from surreal.runtime.processes import replay_save
from surreal.runtime.processes.replay_uniform import UniformStorage
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import describe, own_lines, start_launch, status, wait_until

pytest.importorskip("torch")

LOADED = re.compile(
    r"loaded the replay part (\S+): ([\d,]+) transitions of ([\d,]+) added \(saved at learner "
    r"step [\d,]+, sha256 ([0-9a-f]{12}), verified\)"
)
SMALL = ["--set", "env.num_envs=1", "--set", "algo.hidden=64,64", "--set", "algo.batch_size=64"]
SMALL += ["--set", "algo.replay_start=1000", "--set", "algo.checkpoint_every_s=2"]


def part(run) -> tuple[dict, dict]:
    """The verified header and arrays of replay-0's part."""
    return replay_save.read(
        replay_save.part_path(run / "checkpoints", 0), UniformStorage(1_000_000)
    )


def loaded(home) -> list[tuple[int, str]]:
    """(transitions, sha256 prefix) of every part replay-0 loaded, in order (its log as
    symphony keeps it)."""
    log = home / "experiments" / "keep-a" / "logs" / "replay-0.log"
    text = log.read_text() if log.is_file() else ""
    found = [LOADED.search(line) for line in own_lines(text, "replay-0")]
    return [(int(m.group(2).replace(",", "")), m.group(4)) for m in found if m]


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_a_killed_shard_and_a_resumed_run_start_from_the_saved_replay(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "keep" / "a"
    args = ["td3", "--env", "gym:Pendulum-v1", "--actors", "2", "--steps", "4000"]
    args += ["--folder", str(tmp_path / "runs"), "--name", "keep", "--trial", "a", "--quiet"]
    proc = start_launch(args + SMALL, tmp_path, home)
    try:
        wait_until(lambda: status(run).get("version", 0) >= 5, 180, "learner updates", proc)
        wait_until(lambda: _rows(run) >= 1000, 120, "a saved replay part", proc)
        held = _rows(run)
        assert status(run)["global_step"] < 3000, "the budget must outlast the kill"
        os.kill(describe(home, "keep-a").process("replay-0").pid, signal.SIGKILL)
        wait_until(lambda: loaded(home), 120, "the restarted shard to load its part", proc)
        assert proc.wait(timeout=scaled(400)) == 0, "the run ended with its budget used"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
    assert describe(home, "keep-a").process("replay-0").restarts == 1
    [(reloaded, _)] = loaded(home)
    assert reloaded >= held  # the last part written before the kill (or a later one)
    assert status(run)["finished"] and status(run)["global_step"] >= 4000

    before, arrays = part(run)  # written when the shard was stopped at the run's end
    assert before["rows"] > reloaded  # the reloaded part, and what came after it
    again = surreal_cli(["launch", "--resume", str(run), "--steps", "5500"], tmp_path, home)
    assert again.returncode == 0, again.stdout + again.stderr
    assert loaded(home)[-1] == (before["rows"], before["sha256"][:12])  # the same replay
    learner = (run / "logs" / "learner.log").read_text()
    resumed = learner[learner.rindex("resumed from") :]
    assert "refilling" not in resumed  # no warm-up to wait for: the replay was there
    after, grown = part(run)
    assert after["rows"] > before["rows"] and status(run)["global_step"] >= 5500
    for key, value in arrays.items():  # the old transitions are still there, unchanged
        np.testing.assert_array_equal(grown[key][: before["rows"]], value)

    # a part changed on disk is refused with one line; the shard starts empty, the run goes on
    path = replay_save.part_path(run / "checkpoints", 0)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    again = surreal_cli(["launch", "--resume", str(run), "--steps", "7000"], tmp_path, home)
    assert again.returncode == 0, again.stdout + again.stderr
    log = (home / "experiments" / "keep-a" / "logs" / "replay-0.log").read_text()
    refused = [ln for ln in own_lines(log, "replay-0") if "starting empty" in ln]
    assert len(refused) == 1 and f"replay part {path} is " in refused[0], refused
    assert status(run)["global_step"] >= 7000
    assert part(run)[0]["rows"] < after["rows"]  # what the emptied shard took since


MERGED = re.compile(r"merged the replay part (\S+) of a run with more replay shards: ([\d,]+) ")


@pytest.mark.integration
@pytest.mark.timeout(400)
def test_a_resume_with_fewer_replay_shards_keeps_every_shards_transitions(tmp_path):
    """--resume with algo.replay_shards 2 -> 1: replay-0 takes replay-1's part too, and
    replay-1.npz is removed once replay-0 saved them (before: left out of the replay, and left
    on disk for a later resume with 2 shards to load as if it were current)."""
    home, run = tmp_path / "home", tmp_path / "runs" / "keep" / "a"
    args = ["launch", "td3", "--env", "gym:Pendulum-v1", "--actors", "2", "--steps", "2500"]
    args += ["--quiet"]
    args += ["--folder", str(tmp_path / "runs"), "--name", "keep", "--trial", "a"]
    first = surreal_cli(args + SMALL + ["--set", "algo.replay_shards=2"], tmp_path, home)
    assert first.returncode == 0, first.stdout + first.stderr
    checkpoints = run / "checkpoints"
    rows = [
        replay_save.read(replay_save.part_path(checkpoints, k), UniformStorage(9000))[0]
        for k in (0, 1)
    ]
    assert all(r["rows"] for r in rows) and sum(r["rows"] for r in rows) >= 2500
    resume = ["launch", "--resume", str(run), "--steps", "3500", "--quiet"]
    again = surreal_cli(resume + ["--set", "algo.replay_shards=1"], tmp_path, home)
    assert again.returncode == 0, again.stdout + again.stderr
    log = (home / "experiments" / "keep-a" / "logs" / "replay-0.log").read_text()
    merged = [m for ln in own_lines(log, "replay-0") if (m := MERGED.search(ln))]
    assert [(m.group(1), int(m.group(2).replace(",", ""))) for m in merged] == [
        (str(replay_save.part_path(checkpoints, 1)), rows[1]["rows"])
    ]
    assert sorted(p.name for p in checkpoints.glob("replay-*")) == ["replay-0.npz"]
    after = part(run)[0]
    assert after["rows"] >= rows[0]["rows"] + rows[1]["rows"] + 500  # both, and the new steps
    assert status(run)["global_step"] >= 3500


def _rows(run) -> int:
    """Transitions in replay-0's saved part (0 before the first one)."""
    path = replay_save.part_path(run / "checkpoints", 0)
    return part(run)[0]["rows"] if path.is_file() else 0
