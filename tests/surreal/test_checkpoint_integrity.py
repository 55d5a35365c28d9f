"""Every reader verifies a checkpoint before it uses it (issue 50): finite tensors, the keys, its
own checksum, and that the learner or policy takes it; a bad `latest.pt` falls back to
`previous.pt` in one line, two bad ones are one error naming both. A save that fails leaves no
temporary file."""

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from surreal.runtime.runfolder import checkpoint, storage_sync
from surreal.testing import surreal_cli
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(120)


def _learner(value: float) -> SimpleNamespace:
    """What `checkpoint.save` asks of a Learner: its state and its published parameters."""
    weights = {"w": torch.full((8, 8), value)}
    return SimpleNamespace(state_dict=lambda: {"model": weights}, params=lambda: weights)


def _two(tmp_path: Path) -> Path:
    """latest.pt at step 200 over previous.pt at step 100."""
    path = tmp_path / "checkpoints" / "latest.pt"
    checkpoint.save(path, _learner(1.0), {"global_step": 100, "version": 1, "iterations": 1})
    checkpoint.save(path, _learner(2.0), {"global_step": 200, "version": 2, "iterations": 2})
    return path


def _poison(path: Path, value: float = float("nan"), recompute: bool = False) -> None:
    """Rewrite `path` with its weights set to `value` (same keys, same size): as a user with
    torch would; `recompute`: with a checksum that matches the new contents."""
    state = torch.load(path, weights_only=False)
    for weights in (state["learner"]["model"], state["params"]):
        weights["w"].fill_(value)
    if recompute:
        state[checkpoint.INTEGRITY] = {"sha256": checkpoint._digest(state, torch)[0]}
    size = path.stat().st_size
    with open(path, "wb") as out:
        torch.save(state, out)
    assert path.stat().st_size == size  # a valid file of the same size


def _step(path: Path, **kw) -> int:
    return checkpoint.load(path, **kw)["counters"]["global_step"]


@pytest.mark.parametrize(
    "value, recompute, why",
    [
        (float("nan"), True, "not finite"),  # NaN weights, even with a checksum that fits them
        (float("inf"), False, "not finite"),
        (3.0, False, "changed since it was written"),  # finite, but not what was written
    ],
)
def test_a_bad_latest_falls_back_to_previous_in_one_line(tmp_path, value, recompute, why):
    path = _two(tmp_path)
    assert _step(path) == 200 and checkpoint.problem(path) is None
    _poison(path, value, recompute)
    assert checkpoint.problem(path).why == why
    notes = []
    assert _step(path, note=notes.append) == 100
    assert len(notes) == 1 and "\n" not in notes[0], notes
    assert f"checkpoint {path} is {why}" in notes[0]
    assert f"using {checkpoint.previous(path)} (step 100) instead" in notes[0]


def test_both_bad_is_one_error_naming_both_files(tmp_path):
    path = _two(tmp_path)
    _poison(path)
    _poison(checkpoint.previous(path), recompute=True)
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.load(path, note=pytest.fail)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    assert str(checkpoint.previous(path)) in message and "no usable checkpoint" in message
    assert "weights: nan" not in message and "learner/model/w: nan" in message


def test_a_checkpoint_its_reader_cannot_take_falls_back_too(tmp_path):
    path = _two(tmp_path)
    state = torch.load(path, weights_only=False)
    del state["learner"]["model"]  # a key the learner needs, gone (checksum made to fit)
    state[checkpoint.INTEGRITY] = {"sha256": checkpoint._digest(state, torch)[0]}
    torch.save(state, path)
    model = torch.nn.Linear(8, 8, bias=False)

    def use(state):
        model.load_state_dict({"weight": state["learner"]["model"]["w"]})

    notes = []
    assert _step(path, note=notes.append, use=use) == 100
    assert "is not this run's (KeyError: 'model')" in notes[0]
    assert float(model.weight.detach()[0, 0]) == 1.0  # the previous one's weights, applied


def test_a_learner_that_neither_checkpoint_fits_ends_once_with_a_final_code(tmp_path):
    """Before: it crashed, was restarted run.max_restarts times reading the same files, and
    the run stopped with a traceback; now one error line and exit 65, never restarted."""
    path = _two(tmp_path)
    errors: list[str] = []
    log = SimpleNamespace(error=lambda fmt, *a: errors.append(fmt % a), warning=print, info=print)
    comp = SimpleNamespace(run=SimpleNamespace(checkpoint=path), log=log)

    def refuse(state):
        raise RuntimeError(
            "Error(s) in loading state_dict for Actor:\n\tsize mismatch for w: copying a param "
            "with shape torch.Size([8, 8]) from checkpoint, the shape in current model is [4, 4]."
        )

    with pytest.raises(SystemExit) as ended:
        checkpoint.resume(comp, SimpleNamespace(load_state_dict=refuse))
    assert ended.value.code == checkpoint.UNUSABLE_EXIT == 65
    assert len(errors) == 1 and errors[0].count("size mismatch for w") == 2, errors  # both


def test_a_checkpoint_without_the_counters_is_not_a_checkpoint(tmp_path):
    path = _two(tmp_path)
    torch.save({"learner": {}, "params": {}, "counters": {"global_step": -1}}, path)
    assert checkpoint.problem(path).why == "not a surreal checkpoint"


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
        # what torch's zip writer raises when the disk fills in the middle of a tensor
        RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0"),
    ],
    ids=["oserror", "torch-runtimeerror"],
)
def test_a_save_that_fails_midway_leaves_no_temporary_file(tmp_path, monkeypatch, failure):
    path = _two(tmp_path)

    def full_disk(state, out):
        out.write(b"PK\x03\x04" + b"\0" * 4096)  # part of the file, then the disk is full
        raise failure

    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(checkpoint.CheckpointError) as err:
        checkpoint.save(path, _learner(3.0), {"global_step": 300, "version": 3, "iterations": 3})
    monkeypatch.undo()
    message = str(err.value)
    assert "\n" not in message and f"cannot write the checkpoint {path}" in message
    assert "the last good one is kept" in message
    assert _leftovers(path.parent) == [] and _step(path) == 200
    assert _step(checkpoint.previous(path)) == 100


def test_a_state_that_is_not_finite_is_not_written(tmp_path):
    path = _two(tmp_path)
    with pytest.raises(checkpoint.CheckpointError, match=r"not finite \(learner/model/w: nan\)"):
        checkpoint.save(path, _learner(float("nan")), {"global_step": 300})
    assert _step(path) == 200 and _leftovers(path.parent) == []


def test_the_learner_that_falls_back_sets_the_bad_one_aside_so_the_next_save_keeps_a_good_one(
    tmp_path,
):
    path = _two(tmp_path)
    _poison(path)
    notes = []
    assert _step(path, note=notes.append, repair=True) == 100
    assert f"it is kept as {checkpoint.REJECTED}" in notes[0]
    assert checkpoint.problem(path.with_name(checkpoint.REJECTED)).why == "not finite"
    assert _step(path) == 100  # latest.pt is previous.pt's copy now
    checkpoint.save(path, _learner(4.0), {"global_step": 300})
    assert _step(path) == 300 and _step(checkpoint.previous(path)) == 100  # not the NaN one


def test_previous_is_uploaded_too_for_a_run_in_an_object_store(tmp_path):
    """Before, only latest.pt reached the bucket: a --resume from it (a fresh mirror) had no
    previous.pt to fall back to when latest.pt was refused."""
    path = tmp_path / "checkpoints" / "latest.pt"
    checkpoint.save(path, _learner(1.0), {"global_step": 100})
    assert path.absolute() in storage_sync.tracked()
    assert checkpoint.previous(path).absolute() not in storage_sync.tracked()  # none yet
    checkpoint.save(path, _learner(2.0), {"global_step": 200})
    assert checkpoint.previous(path).absolute() in storage_sync.tracked()


def _run(tmp_path: Path, home: Path, *args: str):
    return surreal_cli(list(args), tmp_path, home, timeout=scaled(120))


@pytest.mark.integration
def test_a_nan_checkpoint_is_refused_by_status_eval_and_resume(tmp_path):
    """The issue's run: a checkpoint whose weights were set to NaN (a valid file of the same
    size). Status says so, eval and --resume use previous.pt (the resumed run trains on, it
    does not hang); with both poisoned, eval and --resume fail in one line naming both."""
    home, run = tmp_path / "home", tmp_path / "runs" / "nan" / "a"
    made = _run(
        tmp_path,
        home,
        *["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "2000"],
        *["--name", "nan", "--trial", "a", "--set", "run.checkpoint_every=1", "--quiet"],
    )
    assert made.returncode == 0, made.stdout + made.stderr
    latest = run / "checkpoints" / "latest.pt"
    before = checkpoint.previous(latest)
    kept_step = _step(before)
    _poison_run(latest)
    shown = _run(tmp_path, home, "status", str(run))
    assert "not finite: --resume and eval use previous.pt" in shown.stdout, shown.stdout
    played = _run(tmp_path, home, "eval", str(run), "--episodes", "1")
    assert played.returncode == 0, played.stderr
    assert f"episodes at step {kept_step:,}:" in played.stdout
    assert f"checkpoint {latest} is not finite" in played.stderr and str(before) in played.stderr
    resumed = _run(tmp_path, home, "launch", "--resume", str(run), "--steps", "4000", "--quiet")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    warned = [line for line in resumed.stderr.splitlines() if "is not finite" in line]
    assert len(warned) == 1 and f"using {before} (step {kept_step:,})" in warned[0], resumed.stderr
    assert _step(latest) >= 4000 and checkpoint.problem(before) is None  # the NaN one set aside

    _poison_run(latest)
    _poison_run(before)
    for refused in (
        _run(tmp_path, home, "eval", str(run), "--episodes", "1"),
        _run(tmp_path, home, "launch", "--resume", str(run), "--steps", "6000"),
    ):
        assert refused.returncode == 2, refused.stdout + refused.stderr
        lines = refused.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: "), refused.stderr
        assert str(latest) in lines[0] and str(before) in lines[0] and "not finite" in lines[0]


@pytest.mark.integration
def test_a_resume_whose_settings_change_the_networks_is_refused_before_anything_is_written(
    tmp_path,
):
    """Before: `--resume RUN --set algo.hidden_sizes=32,32` saved that config over the run's,
    the learner could not load its checkpoint, crashed past run.max_restarts, and every later
    `--resume RUN` failed the same way."""
    home, run = tmp_path / "home", tmp_path / "runs" / "shape" / "a"
    made = _run(
        tmp_path,
        home,
        *["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "1000"],
        *["--name", "shape", "--trial", "a", "--quiet"],
    )
    assert made.returncode == 0, made.stdout + made.stderr
    files = {name: (run / name).read_bytes() for name in ("config.json", "run.json")}
    refused = _run(
        tmp_path,
        home,
        *["launch", "--resume", str(run), "--steps", "2000", "--quiet"],
        *["--set", "algo.hidden_sizes=32,32", "--set", "run.actors=2"],
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: --resume {run}: its checkpoint"), lines
    assert "algo.hidden_sizes: (64, 64) -> (32, 32)" in lines[0] and "size mismatch" in lines[0]
    assert "run.actors" not in lines[0]  # how the run goes on is not what changed its networks
    assert {name: (run / name).read_bytes() for name in files} == files  # nothing written


def _poison_run(path: Path) -> None:
    """A run's checkpoint with every floating tensor (weights, optimizer, parameters) NaN."""
    state = torch.load(path, weights_only=False)
    for tensor in _tensors(state):
        tensor.fill_(float("nan"))
    with open(path, "wb") as out:
        torch.save(state, out)


def _tensors(value):
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return [value]
    if hasattr(value, "dtype") and value.dtype.kind == "f":  # numpy parameters
        return [torch.from_numpy(value)]
    return []
