"""Checkpoints: the learner's state (model, optimizer, normalizer) with the step counters.

`save` writes `latest.pt` so that a crash, a kill or a full disk at any moment leaves a readable
one: to a temporary file, fsynced, then renamed over it, with the one before kept as
`previous.pt`. `load` falls back to `previous.pt` when `latest.pt` is truncated or corrupt,
and says so in one line.
"""

from __future__ import annotations

import os
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from surreal.api.core import Learner
from surreal.runtime.storage_sync import track

PREVIOUS = "previous.pt"
"""The checkpoint before `latest.pt`, beside it."""
BEST = "best.pt"
"""Beside `latest.pt`: the parameters of the run's best evaluation (`save_best`)."""


class CheckpointError(ValueError):
    """A checkpoint cannot be written or read; the message names the file and what to do."""


def previous(path: Path) -> Path:
    """Where the checkpoint before `path` is kept."""
    return path.with_name(PREVIOUS)


def save(path: Path, learner: Learner, counters: dict[str, int]) -> None:
    """Write `latest.pt` atomically and durably, keeping the one before as `previous.pt`.

    Raises:
        CheckpointError: it could not be written (a full disk, an unwritable folder); the
            checkpoints already there are untouched.
    """
    state = {
        "learner": learner.state_dict(),
        "params": learner.params(),
        "counters": dict(counters),
        "time": time.time(),
    }
    _write(path, state, keep=True)


def save_best(path: Path, params: dict[str, Any], step: int, eval_return: float) -> None:
    """Write `best.pt` (atomically): the published parameters of the run's best evaluation so
    far, which `surreal export --checkpoint best` reads. It holds no learner state (`--resume`
    and `surreal eval` use `latest.pt`). Raises CheckpointError as `save` does."""
    state = {
        "learner": {},
        "params": params,
        "counters": {"global_step": int(step)},
        "eval_return": float(eval_return),
        "time": time.time(),
    }
    _write(path, state, keep=False)


def _write(path: Path, state: dict[str, Any], keep: bool) -> None:
    """`state` to `path` through a temporary file, fsynced, renamed over it (the file before
    kept as `previous.pt` when `keep`)."""
    import torch

    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            torch.save(state, out)
            out.flush()
            os.fsync(out.fileno())
        if keep and path.is_file():
            _keep(path, previous(path))
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        kept = "the last good one is kept" if path.is_file() else "there is none yet"
        raise CheckpointError(
            f"cannot write the checkpoint {path}: {err.strerror or err}; {kept} (free space "
            "or fix the folder's permissions before `surreal launch --resume`)"
        ) from err
    track(path)  # a run in an object store uploads it


def _keep(path: Path, kept: Path) -> None:
    """`kept` becomes a copy of `path` (a hard link: no space, no moment without `path`)."""
    link = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
    link.unlink(missing_ok=True)
    try:
        os.link(path, link)
    except OSError:  # a filesystem without hard links
        shutil.copyfile(path, link)
    os.replace(link, kept)


def _fsync_dir(folder: Path) -> None:
    """Make the renames in `folder` durable (where the filesystem allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def intact(path: Path) -> bool:
    """Whether `path` is a whole checkpoint file (its zip directory reads), without torch."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def load(path: Path, note: Callable[[str], Any] | None = None) -> dict[str, Any]:
    """Read a checkpoint written by `save` (our own file: full unpickling is allowed).

    A truncated or corrupt `path` falls back to `previous.pt` beside it, and `note` gets one
    line saying so.

    Raises:
        FileNotFoundError: there is no checkpoint.
        CheckpointError: neither `path` nor `previous.pt` can be read.
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}; a run writes one every "
            "run.checkpoint_every learner iterations and at exit"
        )
    try:
        return _read(path)
    except CheckpointError as err:
        before = previous(path)
        if not before.is_file():
            raise CheckpointError(f"{err}, and there is no {PREVIOUS} beside it") from None
        state = _read(before)
        step = state.get("counters", {}).get("global_step", 0)
        if note is not None:
            note(f"{err}: using {before} (step {step:,}) instead")
        return state


def _read(path: Path) -> dict[str, Any]:
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise CheckpointError(f"checkpoint {path} is truncated or corrupt ({reason})") from err
    if not isinstance(state, dict) or "learner" not in state or "counters" not in state:
        raise CheckpointError(f"checkpoint {path} is not a surreal checkpoint")
    return state
