"""Checkpoints: the learner's state (model, optimizer, normalizer) with the step counters.

`save` writes `latest.pt` so that a crash, a kill or a full disk at any moment leaves a readable
one: to a temporary file, fsynced, then renamed over it, with the one before kept as
`previous.pt`; a save that fails removes its temporary file. Each checkpoint carries its own
checksum (`integrity`: a SHA-256 over every tensor, array and value it holds).

Every reader (`load`, `problem`) verifies a checkpoint before using it: a whole file, the keys a
learner needs, finite tensors, a matching checksum and, when the reader passes `use`, that its
learner or policy takes it. A `latest.pt` that fails falls back to `previous.pt` with one line;
when both fail, one error names both.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from surreal.api.core import Learner
from surreal.runtime.runfolder.storage import fsync_dir
from surreal.runtime.runfolder.storage_sync import track

PREVIOUS = "previous.pt"
"""The checkpoint before `latest.pt`, beside it."""
BEST = "best.pt"
"""Beside `latest.pt`: the parameters of the run's best evaluation (`save_best`)."""

REJECTED = "rejected.pt"
"""A `latest.pt` that failed its checks, set aside by the learner that fell back (`load`)."""

REQUIRED = ("learner", "params", "counters")
"""What every checkpoint holds (`save`)."""
COUNTERS = ("global_step", "version", "iterations")
"""The learner's counters: `global_step` always, whole numbers >= 0."""
UNWRITABLE_EXIT = 73
"""A learner's exit code when it stopped because its checkpoint could not be written (sysexits'
EX_CANTCREAT): a restart cannot fix a full disk, so it is never restarted (`final_codes`)."""
STALLED_EXIT = 75
"""A learner's exit code when its own stall watch ended the run (sysexits' EX_TEMPFAIL:
`surreal.runtime.processes.stall_watch`); never restarted either (`final_codes`)."""
UNUSABLE_EXIT = 65
"""A learner's exit code when neither of the run's checkpoints loads into it (sysexits'
EX_DATAERR): a restart would read the same files, so it is never restarted (`final_codes`)."""
INTEGRITY = "integrity"
"""The checkpoint's own checksum: {"sha256": hex digest of everything else it holds}."""


class CheckpointError(ValueError):
    """A checkpoint cannot be written or read; the message names the file and what to do.

    `why`: the short reason (`truncated or corrupt`, `not finite`, ...) without the file.
    """

    def __init__(self, message: str, why: str = "") -> None:
        super().__init__(message)
        self.why = why or message


def _bad(path: Path, why: str, detail: str = "") -> CheckpointError:
    """`checkpoint PATH is WHY (DETAIL)`."""
    return CheckpointError(f"checkpoint {path} is {why}" + (f" ({detail})" if detail else ""), why)


def previous(path: Path) -> Path:
    """Where the checkpoint before `path` is kept."""
    return path.with_name(PREVIOUS)


def save(path: Path, learner: Learner, counters: dict[str, int]) -> None:
    """Write `latest.pt` atomically and durably, keeping the one before as `previous.pt`.

    Raises:
        CheckpointError: it could not be written (a full disk, an unwritable folder) or the
            learner's state is not finite; the checkpoints already there are untouched and no
            temporary file is left.
    """
    state = {
        "learner": learner.state_dict(),
        "params": learner.params(),
        "counters": dict(counters),
        "time": time.time(),
    }
    _save_state(path, state, keep=True)


def resume(comp: Any, learner: Learner) -> tuple[dict[str, int], bool]:
    """A learner process's start: the run's checkpoint, verified (whole, finite, its checksum,
    taken by this learner; else `previous.pt`, `load`), into `learner`; (its counters
    global_step, version and iterations, zero without a checkpoint; whether one was loaded).
    A loaded one is a line on the process's log, whatever the learner (ES's master too)."""
    counters = {"global_step": 0, "version": 0, "iterations": 0}
    if not comp.run.checkpoint.is_file():
        return counters, False
    try:
        state = load(
            comp.run.checkpoint,
            note=comp.log.warning,
            use=lambda state: learner.load_state_dict(state["learner"]),
            repair=True,
        )
    except CheckpointError as err:  # restarting would read the same files: end here, once
        comp.log.error("%s", err)
        raise SystemExit(UNUSABLE_EXIT) from None
    counters.update({k: int(v) for k, v in state["counters"].items() if k in counters})
    comp.log.info(
        "resumed from %s at step %s (version %d, %d updates before)",
        comp.run.checkpoint,
        f"{counters['global_step']:,}",
        counters["version"],
        counters["iterations"],
    )
    return counters, True


def save_or_stop(comp: Any, learner: Learner, counters: dict[str, int]) -> str:
    """`save` for a learner process: a checkpoint that cannot be written (a full disk, a state
    that is not finite) is one error line on its log and asks the process to stop (the
    checkpoints before it stay); returns why ("" when it was written)."""
    try:
        save(comp.run.checkpoint, learner, counters)
    except CheckpointError as err:
        comp.log.error("%s", err)
        comp.stopping.set()
        return str(err)
    return ""


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
    _save_state(path, state, keep=False)


def _save_state(path: Path, state: dict[str, Any], keep: bool) -> None:
    """`state`, checked finite and with its checksum, to `path` through a temporary file,
    fsynced and renamed over it (the file before kept as `previous.pt` when `keep`)."""
    import torch

    sha, bad = _digest(state, torch)
    if bad:
        kept = "the last good one is kept" if path.is_file() else "there is none yet"
        raise CheckpointError(
            f"not writing the checkpoint {path}: the learner's state is not finite ({bad}); "
            f"{kept} (the run diverged: lower algo.lr, or resume from the kept checkpoint)",
            "not finite",
        )
    state[INTEGRITY] = {"sha256": sha}
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(tmp, state, torch)
        if keep and path.is_file():
            _keep(path, previous(path))
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except (OSError, RuntimeError) as err:  # torch's writer raises RuntimeError on ENOSPC
        kept = "the last good one is kept" if path.is_file() else "there is none yet"
        why = getattr(err, "strerror", None) or str(err).splitlines()[0][:120]
        raise CheckpointError(
            f"cannot write the checkpoint {path}: {why}; {kept} (free space "
            "or fix the folder's permissions before `surreal launch --resume`)",
            "not written",
        ) from err
    finally:
        tmp.unlink(missing_ok=True)  # written and renamed, or failed: never left behind
    track(path)  # a run in an object store uploads it,
    if keep and previous(path).is_file():  # and the one before, which --resume falls back to
        track(previous(path))


def _write(tmp: Path, state: dict[str, Any], torch: Any) -> None:
    """`state` into `tmp`, flushed to the disk."""
    with open(tmp, "wb") as out:
        torch.save(state, out)
        out.flush()
        os.fsync(out.fileno())


def _keep(path: Path, kept: Path) -> None:
    """`kept` becomes a copy of `path` (a hard link: no space, no moment without `path`)."""
    link = kept.with_name(f".{kept.name}.{os.getpid()}.tmp")
    link.unlink(missing_ok=True)
    try:
        try:
            os.link(path, link)
        except OSError:  # a filesystem without hard links
            shutil.copyfile(path, link)
        os.replace(link, kept)
    finally:
        link.unlink(missing_ok=True)


def _digest(state: Any, torch: Any) -> tuple[str, str]:
    """(SHA-256 of everything in `state` but its INTEGRITY entry, the first non-finite tensor
    or array as `where: nan`, or "" when all are finite)."""
    sha, bad = hashlib.sha256(), []
    stack: list[tuple[str, Any]] = [("", state)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            items = sorted(((str(k), v) for k, v in value.items() if k != INTEGRITY), reverse=True)
            sha.update(f"{where}:dict:{[k for k, _ in items]}".encode())
            stack += [(f"{where}/{k}", v) for k, v in items]
        elif isinstance(value, (list, tuple)):
            sha.update(f"{where}:{type(value).__name__}:{len(value)}".encode())
            stack += [(f"{where}/{i}", v) for i, v in reversed(list(enumerate(value)))]
        else:
            _leaf(sha, bad, where, value, torch)
    return sha.hexdigest(), bad[0] if bad else ""


def _leaf(sha: Any, bad: list[str], where: str, value: Any, torch: Any) -> None:
    """Hash one tensor, array or plain value; note it in `bad` when it is not finite."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        finite = not value.is_floating_point() or bool(torch.isfinite(value).all())
        raw = value.reshape(-1).contiguous().view(torch.uint8).numpy().tobytes()
        sha.update(f"{where}:tensor:{value.dtype}:{tuple(value.shape)}".encode() + raw)
    elif isinstance(value, np.ndarray):
        finite = value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
        array = np.ascontiguousarray(value)
        raw = array.tobytes() if array.dtype != object else repr(array.tolist()).encode()
        sha.update(f"{where}:array:{array.dtype}:{array.shape}".encode() + raw)
    elif isinstance(value, (bool, int, float, str, bytes, type(None), np.generic)):
        finite = True  # a plain float may be -inf by design (e.g. a best return so far)
        sha.update(f"{where}:{type(value).__name__}:{value!r}".encode())
    else:  # another object: its type only (its repr may hold an address)
        finite = True
        sha.update(f"{where}:{type(value).__module__}.{type(value).__qualname__}".encode())
    if not finite:
        bad.append(f"{where.lstrip('/')}: {_first_bad(value)}")


def _first_bad(value: Any) -> str:
    """`nan` or `inf`: the kind of the first non-finite entry of a tensor or array."""
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    first = float(flat[~np.isfinite(flat)][0])
    return "nan" if math.isnan(first) else "inf"


def intact(path: Path) -> bool:
    """Whether `path` is a whole checkpoint file (its zip directory reads), without torch."""
    try:
        with zipfile.ZipFile(path) as archive:
            return bool(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False


def problem(path: Path) -> CheckpointError | None:
    """What is wrong with the checkpoint at `path` (None: it is whole, finite, has the keys
    and its checksum matches)."""
    try:
        _read(path)
    except CheckpointError as err:
        return err
    return None


def load(
    path: Path,
    note: Callable[[str], Any] | None = None,
    use: Callable[[dict[str, Any]], Any] | None = None,
    repair: bool = False,
) -> dict[str, Any]:
    """Read and verify a checkpoint written by `save` (our own file: full unpickling is
    allowed); `use(state)`, when given, applies it (to a learner or a policy), and a state it
    cannot take counts as a bad checkpoint too.

    A `path` that fails falls back to `previous.pt` beside it, and `note` gets one line saying
    so. `repair` (the run's writer, its learner): the bad file is then kept as `rejected.pt` and
    `path` becomes a copy of `previous.pt`, so the next save keeps a good one before it.

    Raises:
        FileNotFoundError: there is no checkpoint.
        CheckpointError: neither `path` nor `previous.pt` passes (one line naming both).
    """
    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}; a run writes one every "
            "run.checkpoint_every learner iterations and at exit"
        )
    try:
        return _usable(path, use)
    except CheckpointError as err:
        before = previous(path)
        if not before.is_file():
            raise CheckpointError(
                f"{err}, and there is no {PREVIOUS} beside it; start a new run (or restore "
                "the file)",
                err.why,
            ) from None
        try:
            state = _usable(before, use)
        except CheckpointError as also:
            raise CheckpointError(
                f"{err}, and {also}; no usable checkpoint is left: start a new run (or restore "
                "one of them)",
                err.why,
            ) from None
        step = state["counters"]["global_step"]
        if repair:
            _keep(path, path.with_name(REJECTED))
            _keep(before, path)
        if note is not None:
            kept = f"; it is kept as {REJECTED}" if repair else ""
            note(f"{err}: using {before} (step {step:,}) instead{kept}")
        return state


def _usable(path: Path, use: Callable[[dict[str, Any]], Any] | None) -> dict[str, Any]:
    """The verified state of `path`, applied with `use` (its failure: a CheckpointError)."""
    state = _read(path)
    if use is not None:
        try:
            use(state)
        except Exception as err:  # missing keys, wrong shapes: torch raises KeyError, RuntimeError
            raise _bad(path, "not this run's", mismatch(err)) from err
    return state


def mismatch(err: Exception, limit: int = 240) -> str:
    """`Type: ...` of a state that did not load, on one line: torch's first two lines (its
    error and the first mismatching key or shape), cut at `limit` characters."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return f"{type(err).__name__}: {' '.join(lines[:2])[:limit]}" if lines else type(err).__name__


def _read(path: Path) -> dict[str, Any]:
    """The state in `path`, verified: keys, counters, finite tensors, checksum."""
    import torch

    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # torch raises RuntimeError, EOFError, UnpicklingError, ...
        reason = str(err).splitlines()[0][:120] if str(err) else type(err).__name__
        raise _bad(path, "truncated or corrupt", reason) from err
    if not isinstance(state, dict) or not all(key in state for key in REQUIRED):
        have = sorted(map(str, state)) if isinstance(state, dict) else type(state).__name__
        raise _bad(path, "not a surreal checkpoint", f"it holds {have}, not {list(REQUIRED)}")
    counters = state["counters"]
    if not isinstance(counters, dict) or not all(
        _count(counters.get(key)) for key in COUNTERS if key == "global_step" or key in counters
    ):
        raise _bad(path, "not a surreal checkpoint", f"its counters are {counters!r}")
    sha, bad = _digest(state, torch)
    if bad:
        raise _bad(path, "not finite", bad)
    written = state.get(INTEGRITY)
    if written is not None and (not isinstance(written, dict) or written.get("sha256") != sha):
        raise _bad(path, "changed since it was written", "its checksum does not match")
    return state


def _count(value: Any) -> bool:
    """Whether `value` is a counter: a whole number >= 0."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= 0
