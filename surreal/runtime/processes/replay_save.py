"""Replay parts: each replay shard's transitions, saved beside the run's checkpoint and loaded back.

Replay shard k of an off-policy run keeps its part in `RUN/checkpoints/replay-k.npz` (on by
default; `--set algo.save_replay=false` turns it off). It writes one when the learner says it
wrote its checkpoint (a `checkpoint` publication on `params-pub`) and once more when it is
stopped; `--resume` and a shard restarted after a crash load the last one. A run resumed with
fewer shards merges the parts of the shards that are gone into the remaining ones (`orphans`,
`as_chunk`) and removes them once those saved.

A part is a plain uncompressed `.npz` (no pickle: `np.load(..., allow_pickle=False)` reads it)
holding the filled rows of the shard's arrays and `meta`, a JSON header as uint8 bytes: the
ring's counters (`added`, `obs_added`), its shape (`capacity`, `dedup`), the learner's step
and a SHA-256 over the header and every array (`digest`).

Saving holds the shard's lock only while the arrays are copied (`snapshot`: the copies are
allocated and their pages touched before the lock is taken); checksum and disk write run after
it, outside the learner's path. Writing is atomic (`write`: a temporary file, fsynced, renamed
over the part; a failed write removes it), so a kill at any moment leaves the last whole part.

Loading (`read`) checks a part as a file a stranger could have written: stored (uncompressed)
zip entries only, the header's fields, the checksum, each array's rows against the header and
the rows themselves against the shard's chunk schema (shapes from the env, finite floats,
discounts in [0, 1], valid actions). Any failure is a `ReplayPartError` naming the file; the
shard then logs one line and starts empty (`ReplayShard.restore`).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from surreal.runtime.processes.replay_uniform import UniformStorage
from surreal.runtime.runfolder.storage import fsync_dir
from surreal.runtime.runfolder.storage_sync import forget, track

FORMAT = "surreal-replay/1"
"""The `format` of a part's header."""

_OBS_KEYS = ("obs_table",)  # arrays with one row per stored observation (dedup), not transition
_META_INTS = ("shard", "capacity", "obs_capacity", "added", "obs_added", "rows", "obs_rows", "step")


class ReplayPartError(ValueError):
    """A replay part cannot be written or read; the message names the file and why."""


def part_path(checkpoints: Path, index: int) -> Path:
    """Where replay shard `index` keeps its part: `checkpoints/replay-<index>.npz`."""
    return checkpoints / f"replay-{index}.npz"


def remove(path: Path) -> None:
    """Delete a part whose transitions another part holds now, here and (a run in an object
    store) in the store."""
    path.unlink(missing_ok=True)
    forget(path)


def remove_stale_temporaries(path: Path) -> list[Path]:
    """Delete the temporary files an earlier incarnation of this shard left when it was killed
    mid-write (`.replay-k.npz.<pid>.tmp`); returns them."""
    stale = sorted(path.parent.glob(f".{path.name}.*.tmp")) if path.parent.is_dir() else []
    for tmp in stale:
        tmp.unlink(missing_ok=True)
    return stale


@dataclass
class Snapshot:
    """A consistent copy of a storage's filled rows, with its header (no `sha256` yet)."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray]
    pause_s: float
    """Seconds the lock was held for the copy."""

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())


def _rows(storage: UniformStorage) -> tuple[int, int]:
    """(transition rows, observation rows) in use: the ring fills rows 0.. before it wraps."""
    return len(storage), min(storage.obs_added, storage.obs_capacity) if storage.dedup else 0


def snapshot(
    storage: UniformStorage, lock: threading.Lock, shard: int = 0, step: int = 0
) -> Snapshot | None:
    """Copy the storage's filled rows under `lock` (None when it holds nothing). The copies
    are allocated and touched first, outside the lock, with room for what may arrive before
    the lock is taken; only the copy itself holds it (a rare larger fill copies into new
    arrays under the lock)."""
    with lock:
        if not storage.arrays or not len(storage):
            return None
        shapes = {k: (a.shape[1:], a.dtype) for k, a in storage.arrays.items()}
        rows, obs_rows = _rows(storage)
    margin = 4096 + storage.capacity // 16

    def room(key: str) -> int:
        cap, have = (
            (storage.obs_capacity, obs_rows) if key in _OBS_KEYS else (storage.capacity, rows)
        )
        return min(cap, have + margin)

    spare = {k: np.ones((room(k), *shape), dtype) for k, (shape, dtype) in shapes.items()}
    t0 = time.perf_counter()
    with lock:
        rows, obs_rows = _rows(storage)
        arrays = {}
        for key, live in storage.arrays.items():
            n = obs_rows if key in _OBS_KEYS else rows
            fits = len(spare[key]) >= n
            out = spare[key][:n] if fits else np.empty((n, *live.shape[1:]), live.dtype)
            np.copyto(out, live[:n])
            arrays[key] = out
        meta = {
            "format": FORMAT,
            "shard": int(shard),
            "capacity": storage.capacity,
            "obs_capacity": storage.obs_capacity,
            "dedup": storage.dedup,
            "added": storage.added,
            "obs_added": storage.obs_added,
            "rows": rows,
            "obs_rows": obs_rows,
        }
    pause = time.perf_counter() - t0
    meta.update({"step": int(step), "time": time.time()})
    return Snapshot(meta, arrays, pause)


def digest(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> str:
    """SHA-256 of the header (without its own `sha256`) and of every array: name, dtype,
    shape and bytes, in name order."""
    sha = hashlib.sha256()
    header = {k: v for k, v in meta.items() if k != "sha256"}
    sha.update(json.dumps(header, sort_keys=True).encode())
    for key in sorted(arrays):
        array = np.ascontiguousarray(arrays[key])
        sha.update(f"{key}:{array.dtype.str}:{array.shape}".encode())
        sha.update(memoryview(array).cast("B"))
    return sha.hexdigest()


def write(path: Path, snap: Snapshot) -> int:
    """Write `snap` to `path` atomically and durably; returns the bytes written.

    Raises:
        ReplayPartError: it could not be written (a full disk, an unwritable folder); the part
            already there is untouched and no temporary file is left.
    """
    meta = dict(snap.meta, sha256=digest(snap.meta, snap.arrays))
    header = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as out:
            np.savez(out, meta=header, **snap.arrays)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as err:
        kept = "the last part is kept" if path.is_file() else "there is none yet"
        raise ReplayPartError(
            f"cannot write the replay part {path}: {err.strerror or err}; {kept}"
        ) from err
    finally:
        tmp.unlink(missing_ok=True)  # renamed, or failed: never left behind
    track(path)  # a run in an object store uploads it
    return path.stat().st_size


def _bad(path: Path, why: str) -> ReplayPartError:
    return ReplayPartError(f"replay part {path} is {why}")


def read(
    path: Path,
    storage: UniformStorage,
    check: Callable[[dict[str, np.ndarray]], Any] | None = None,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The verified (header, arrays) of the part at `path`, for `storage` (its dedup must be
    the part's; a part of another capacity comes back `resized` to it). `check(chunk)` is the
    shard's chunk schema: it gets every row as one chunk (as an actor would push it) and
    raises on anything wrong.

    Raises:
        ReplayPartError: the file is not a whole part, fails its checksum, does not fit this
            shard (dedup, shapes) or holds values the schema refuses.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            packed = [i.filename for i in archive.infolist() if i.compress_type != 0]
        if packed:  # we write stored entries only; a compressed one could unpack to any size
            raise _bad(path, f"not a surreal replay part (compressed entries {packed[:3]})")
        with np.load(path, allow_pickle=False) as npz:
            names = set(npz.files)
            if "meta" not in names:
                raise _bad(path, "not a surreal replay part (no meta)")
            meta = json.loads(bytes(npz["meta"]).decode())
            arrays = {k: npz[k] for k in sorted(names - {"meta"})}
    except ReplayPartError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, UnicodeDecodeError) as err:
        reason = (str(err).splitlines() or [type(err).__name__])[0][:120]
        raise _bad(path, f"truncated or corrupt ({reason})") from None
    _check_meta(path, meta)
    if digest(meta, arrays) != meta.get("sha256"):
        raise _bad(path, "changed since it was written (its checksum does not match)")
    _check_shapes(path, meta, arrays, meta["dedup"])
    if meta["dedup"] is not storage.dedup:
        meta, arrays = converted(meta, arrays, storage.dedup)
    if (meta["capacity"], meta["obs_capacity"]) != (storage.capacity, storage.obs_capacity):
        meta, arrays = resized(meta, arrays, storage)
        if not meta["rows"]:
            raise _bad(path, "left with no transition once resized (its observations are gone)")
    _check_values(path, meta, arrays, storage.dedup, check)
    return meta, arrays


def _check_meta(path: Path, meta: Any) -> None:
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _bad(path, f"not a surreal replay part (format is not {FORMAT!r})")
    for key in _META_INTS:
        value = meta.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise _bad(path, f"not a surreal replay part (its {key} is {value!r})")
    dedup = meta.get("dedup")
    if not isinstance(dedup, bool):
        raise _bad(path, f"not a surreal replay part (its dedup is {dedup!r})")
    if meta["capacity"] < 1 or (dedup and meta["obs_capacity"] < 1):
        raise _bad(path, f"inconsistent (capacity {meta['capacity']})")
    if meta["rows"] != min(meta["added"], meta["capacity"]) or meta["rows"] < 1:
        raise _bad(path, f"inconsistent (rows {meta['rows']}, added {meta['added']})")
    if meta["obs_rows"] != (min(meta["obs_added"], meta["obs_capacity"]) if dedup else 0):
        raise _bad(path, f"inconsistent (obs_rows {meta['obs_rows']})")


def _check_shapes(path: Path, meta: dict[str, Any], arrays: dict[str, np.ndarray], dedup: bool):
    """The part's arrays are the ones its kind has, with the header's rows (and, with dedup,
    observation numbers that point at stored observations)."""
    keys = {"act", "rew", "discount"}
    keys |= {"obs_table", "obs_seq", "next_obs_seq"} if dedup else {"obs", "next_obs"}
    if set(arrays) != keys:
        raise _bad(path, f"not a surreal replay part (arrays {sorted(arrays)})")
    for key, array in arrays.items():
        rows = meta["obs_rows"] if key in _OBS_KEYS else meta["rows"]
        if array.ndim < 1 or len(array) != rows:
            raise _bad(path, f"inconsistent ({key} has shape {list(array.shape)}, {rows} rows)")
    if dedup:
        for key in ("obs_seq", "next_obs_seq"):
            seq = arrays[key]
            if seq.dtype.kind not in "iu" or seq.ndim != 1:
                raise _bad(path, f"inconsistent ({key} is {seq.dtype} {list(seq.shape)})")
            if len(seq) and (seq.min() < 0 or seq.max() >= meta["obs_added"]):
                raise _bad(path, f"inconsistent ({key} points past the observations stored)")


def _check_values(
    path: Path,
    meta: dict[str, Any],
    arrays: dict[str, np.ndarray],
    dedup: bool,
    check: Callable[[dict[str, np.ndarray]], Any] | None,
) -> None:
    """Finite floats, and every row through the shard's chunk schema."""
    chunk = {k: arrays[k] for k in ("act", "rew", "discount")}
    if dedup:
        chunk["obs_table"] = arrays["obs_table"]
        chunk["obs_idx"] = arrays["obs_seq"] % meta["obs_capacity"]
        chunk["next_obs_idx"] = arrays["next_obs_seq"] % meta["obs_capacity"]
    else:
        chunk.update(obs=arrays["obs"], next_obs=arrays["next_obs"])
    for key, array in arrays.items():
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            raise _bad(path, f"not finite ({key})")
    if check is not None:
        try:
            check(chunk)
        except ValueError as err:  # the schema's Invalid
            raise _bad(path, f"not this run's replay ({str(err)[:160]})") from None


def resized(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], storage: UniformStorage
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A checked part of another capacity (a run resumed with another `algo.replay_capacity`)
    as a part of `storage`'s: its newest transitions that fit, oldest first from row 0, their
    observations renumbered from 0 with dedup. The header keeps what the part was in `resized`
    (`capacity`, `added`, `rows`)."""
    return _newest(meta, arrays, storage.capacity, storage.obs_capacity, storage.dedup)


def _newest(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], capacity: int, obs_capacity: int, dedup
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """`resized` to a ring of `capacity` transitions and `obs_capacity` observations."""
    was_capacity, added = meta["capacity"], meta["added"]
    order = (
        (added + np.arange(meta["rows"])) % was_capacity
        if added > was_capacity
        else np.arange(added)
    )
    keep = order[-capacity:]
    out: dict[str, np.ndarray] = {}
    obs_added = 0
    if dedup:
        oldest = meta["obs_added"] - meta["obs_capacity"]  # an evicted observation is gone
        alive = (arrays["obs_seq"][keep] >= oldest) & (arrays["next_obs_seq"][keep] >= oldest)
        keep = keep[alive]
        while True:  # the observations the kept transitions use must fit the new ring
            seqs = np.unique(
                np.concatenate([arrays["obs_seq"][keep], arrays["next_obs_seq"][keep]])
            )
            if len(seqs) <= obs_capacity:
                break
            keep = keep[len(seqs) - obs_capacity :]
        out["obs_table"] = arrays["obs_table"][seqs % meta["obs_capacity"]]
        for key in ("obs_seq", "next_obs_seq"):
            out[key] = np.searchsorted(seqs, arrays[key][keep]).astype(np.int64)
        obs_added = len(seqs)
    for key, array in arrays.items():
        if key not in out:
            out[key] = array[keep]
    rows = len(keep)
    was = {k: meta[k] for k in ("capacity", "added", "rows")}
    meta = dict(meta, capacity=capacity, obs_capacity=obs_capacity, resized=was)
    meta.update(added=rows, rows=rows, obs_added=obs_added, obs_rows=obs_added)
    return meta, out


def converted(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], dedup: bool
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A checked part saved with the other `algo.dedup_obs`, in the form of `dedup`: its
    transitions oldest first from row 0; with dedup, each distinct observation stored once,
    numbered in the order it first appears. The header keeps what the part was in `converted`
    (`dedup`, `capacity`, `added`, `rows`)."""
    was = {k: meta[k] for k in ("dedup", "capacity", "added", "rows")}
    part_dedup = bool(meta["dedup"])
    meta, arrays = _newest(meta, arrays, meta["rows"], max(meta["obs_rows"], 1), part_dedup)
    out = {k: arrays[k] for k in ("act", "rew", "discount")}
    rows, distinct = meta["rows"], 0
    if part_dedup:  # -> plain: each transition's observations copied out of the table
        table = arrays["obs_table"]
        out.update(obs=table[arrays["obs_seq"]], next_obs=table[arrays["next_obs_seq"]])
    else:  # -> dedup: obs_0, next_obs_0, obs_1, ... each distinct row once
        both = np.stack([arrays["obs"], arrays["next_obs"]], axis=1)
        both = both.reshape(2 * rows, *arrays["obs"].shape[1:])
        flat = np.ascontiguousarray(both.reshape(2 * rows, -1))
        keys = flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1])))[:, 0]
        _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        order = np.argsort(first)  # distinct rows in the order they first appear
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        seq = rank[inverse.reshape(-1)].astype(np.int64)
        out.update(obs_table=both[first[order]], obs_seq=seq[0::2], next_obs_seq=seq[1::2])
        distinct = len(order)
    meta = dict(meta, dedup=dedup, converted=was)
    meta.update(obs_added=distinct, obs_rows=distinct, obs_capacity=max(distinct, 1))
    return meta, out


def as_chunk(meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A verified part's transitions, oldest first, as one chunk `UniformStorage.add` takes
    (with dedup: the observations they still use, once each)."""
    dedup = "obs_table" in arrays
    obs_rows = max(meta["obs_rows"], 1)
    meta, arrays = _newest(meta, arrays, max(meta["rows"], 1), obs_rows, dedup)
    chunk = {k: arrays[k] for k in ("act", "rew", "discount")}
    if dedup:
        chunk.update(
            obs_table=arrays["obs_table"],
            obs_idx=arrays["obs_seq"],
            next_obs_idx=arrays["next_obs_seq"],
        )
    else:
        chunk.update(obs=arrays["obs"], next_obs=arrays["next_obs"])
    return chunk


def header(path: Path) -> dict[str, Any]:
    """The header of the part at `path` as written, unverified ({} when it cannot be read):
    only for planning a load (`shares`); `read` checks everything."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            meta = json.loads(bytes(npz["meta"]).decode())
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError, UnicodeDecodeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def shares(own: Path, others: list[Path], capacity: int) -> dict[Path, int]:
    """How many of its newest transitions each part keeps when a shard loads its own part and
    merges `others` (`orphans`) and together they do not fit `capacity`: a share of the ring
    in proportion to each part's rows ({} when they fit). A part the shard's own already
    merged (its `merged` lists the other's sha256) counts as none."""
    mine = header(own) if own.is_file() else {}
    done = set(mine.get("merged") or ()) if isinstance(mine.get("merged"), list) else set()

    def rows(meta: dict[str, Any]) -> int:
        n = meta.get("rows")
        taken = meta.get("sha256") in done
        return 0 if taken or not isinstance(n, int) or n < 0 else min(n, capacity)

    counts = {own: rows(mine), **{path: rows(header(path)) for path in others}}
    total = sum(counts.values())
    if total <= capacity:
        return {}
    return {path: max(1, capacity * n // total) for path, n in counts.items() if n}


def newest(
    meta: dict[str, Any], arrays: dict[str, np.ndarray], keep: int, storage: UniformStorage
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """A verified part (in `storage`'s form) cut to its newest `keep` transitions, oldest
    first; the header notes `kept_of` (the rows it had)."""
    if meta["rows"] <= keep:
        return meta, arrays
    cut, out = _newest(meta, arrays, keep, storage.obs_capacity, storage.dedup)
    cut["resized"] = meta.get("resized", cut["resized"])  # what it was saved as, if resized
    cut["kept_of"] = meta["rows"]
    return cut, out


def orphans(checkpoints: Path, index: int, shards: int) -> list[Path]:
    """The parts a run with more replay shards left that shard `index` of `shards` takes over
    on `--resume`: `replay-j.npz` for every j >= shards with j % shards == index."""
    found = []
    for path in checkpoints.glob("replay-*.npz") if checkpoints.is_dir() else ():
        j = path.stem.removeprefix("replay-")
        if j.isdigit() and int(j) >= shards and int(j) % shards == index:
            found.append((int(j), path))
    return [path for _, path in sorted(found)]


def restore(storage: UniformStorage, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Put a verified part's rows back into an empty `storage` (full-capacity arrays; a
    part that filled the ring is used as it is, without a copy)."""
    storage.arrays = {}
    for key, array in arrays.items():
        size = storage.obs_capacity if key in _OBS_KEYS else storage.capacity
        if len(array) == size:
            storage.arrays[key] = array
        else:
            full = np.zeros((size, *array.shape[1:]), array.dtype)
            full[: len(array)] = array
            storage.arrays[key] = full
    storage.added, storage.obs_added = int(meta["added"]), int(meta["obs_added"])
