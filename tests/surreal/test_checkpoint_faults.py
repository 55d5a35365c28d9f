"""Checkpoints survive the faults a long run meets: a full disk, a torn or corrupt file.

The full disk is real: a 1 MB tmpfs mounted for the test (this machine's tests run as root).
"""

import os
import subprocess
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from surreal.runtime.runfolder import checkpoint
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import start_launch, wait_until

pytestmark = pytest.mark.timeout(120)


def _learner(value: float) -> SimpleNamespace:
    """What `checkpoint.save` asks of a Learner: its state and its published parameters."""
    weights = {"w": torch.full((64, 64), value)}
    return SimpleNamespace(state_dict=lambda: {"model": weights}, params=lambda: weights)


def _step(path: Path, note=None) -> int:
    return checkpoint.load(path, note=note)["counters"]["global_step"]


def _mounted(tmp_path, size: str):
    """A filesystem of `size` of its own (a tmpfs), unmounted afterwards."""
    where = tmp_path / f"disk-{uuid.uuid4().hex[:6]}"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def small_disk(tmp_path):
    yield from _mounted(tmp_path, "1m")


@pytest.fixture
def run_disk(tmp_path):
    yield from _mounted(tmp_path, "40m")


def _fill(folder: Path) -> None:
    """Take every byte the filesystem of `folder` has left."""
    with open(folder / "filler", "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass


def test_each_save_keeps_the_one_before_and_a_truncated_latest_falls_back_to_it(tmp_path):
    path = tmp_path / "checkpoints" / "latest.pt"
    checkpoint.save(path, _learner(1.0), {"global_step": 100})
    assert not checkpoint.previous(path).exists()
    checkpoint.save(path, _learner(2.0), {"global_step": 200})
    assert _step(checkpoint.previous(path)) == 100 and _step(path) == 200
    assert sorted(p.name for p in path.parent.iterdir()) == ["latest.pt", "previous.pt"]
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])  # torn mid-write
    assert not checkpoint.intact(path) and checkpoint.intact(checkpoint.previous(path))
    notes = []
    assert _step(path, notes.append) == 100
    assert len(notes) == 1 and f"checkpoint {path} is truncated or corrupt" in notes[0]
    assert f"using {checkpoint.previous(path)} (step 100) instead" in notes[0]


def test_a_corrupt_checkpoint_with_nothing_before_it_is_one_error_naming_the_file(tmp_path):
    path = tmp_path / "latest.pt"
    path.write_bytes(b"PK\x03\x04 not really a checkpoint")
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.load(path)
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "no previous.pt" in message
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        checkpoint.load(tmp_path / "none.pt")


def test_a_full_disk_fails_the_save_in_one_line_and_leaves_both_checkpoints_whole(small_disk):
    path = small_disk / "checkpoints" / "latest.pt"
    checkpoint.save(path, _learner(1.0), {"global_step": 100})  # ~17 KB each
    checkpoint.save(path, _learner(2.0), {"global_step": 200})
    _fill(small_disk)
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.save(path, _learner(3.0), {"global_step": 300})
    message = str(err.value)
    assert "\n" not in message and "No space left on device" in message, message
    assert "the last good one is kept" in message and "free space" in message
    assert _step(path) == 200 and _step(checkpoint.previous(path)) == 100
    assert sorted(p.name for p in path.parent.iterdir()) == ["latest.pt", "previous.pt"]


@pytest.mark.integration
def test_status_and_resume_say_in_one_line_that_a_checkpoint_is_torn(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "torn" / "a"
    made = surreal_cli(
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "2000"]
        + ["--name", "torn", "--trial", "a", "--set", "run.checkpoint_every=1"],
        tmp_path,
        home,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    latest = run / "checkpoints" / "latest.pt"
    assert checkpoint.previous(latest).is_file()  # several saves: one before the last
    latest.write_bytes(latest.read_bytes()[:1000])
    shown = surreal_cli(["status", str(run)], tmp_path, home)
    assert "truncated or corrupt: --resume and eval use previous.pt" in shown.stdout
    played = surreal_cli(["eval", str(run), "--episodes", "1"], tmp_path, home)
    assert played.returncode == 0, played.stderr
    assert "truncated or corrupt" in played.stderr and "previous.pt" in played.stderr
    os.remove(checkpoint.previous(latest))
    refused = surreal_cli(["launch", "--resume", str(run), "--steps", "3000"], tmp_path, home)
    assert refused.returncode == 2
    errors = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "truncated or corrupt" in errors[0], refused.stderr


ES_SMALL = ["--set", "algo.hidden=32,32", "--set", "algo.population=16"]


@pytest.mark.integration
@pytest.mark.parametrize("algo", ["ppo", "es"])
def test_a_run_folder_that_fills_up_stops_the_run_in_one_line_and_eval_reads_it_after(
    tmp_path, run_disk, algo
):
    home, run = tmp_path / "home", run_disk / "runs" / "full" / "a"
    proc = start_launch(
        [algo, "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "10000000"]
        + ["--folder", str(run_disk / "runs"), "--name", "full", "--trial", "a"]
        + ["--set", "run.checkpoint_every=2"]
        + (ES_SMALL if algo == "es" else []),
        tmp_path,
        home,
    )
    latest = run / "checkpoints" / "latest.pt"
    try:
        wait_until(lambda: checkpoint.previous(latest).is_file(), 120, "two checkpoints", proc)
        _fill(run_disk)
        out, _ = proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, out
    ended = [line for line in out.splitlines() if "the learner ended" in line]
    assert len(ended) == 1, out
    assert f"cannot write the checkpoint {latest}: No space left on device" in ended[0]
    assert "Traceback" not in out, out
    (run_disk / "filler").unlink()
    played = surreal_cli(["eval", str(run), "--episodes", "1"], tmp_path, home)
    assert played.returncode == 0, played.stdout + played.stderr
    assert "episodes at step" in played.stdout and not played.stderr.strip(), played.stderr
