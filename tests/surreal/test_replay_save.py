"""Replay parts (issue 49 item 2), without processes: a shard's transitions written atomically
beside the checkpoint and read back the same, and every kind of bad part refused with one
line naming the file, the shard then starting empty."""

from __future__ import annotations

import errno
import json
import os
import re
import threading
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

import caraml
from caraml.testing import free_port
from surreal.algos.ddpg.nstep import NStepWriter, pack_chunk
from surreal.api.spaces import EnvInfo
from surreal.runtime.processes import replay_save
from surreal.runtime.processes.replay_shard import PartKeeper, ReplayShard
from surreal.runtime.processes.replay_uniform import UniformStorage
from surreal.runtime.wire.schemas import ChunkSchema
from symphony.testing import FairClock

OBS, ACT = 3, 1  # Pendulum


def env_info() -> EnvInfo:
    return EnvInfo((OBS,), False, 0, (ACT,), (-2.0,), (2.0,))


def chunks(n_chunks: int, dedup: bool, seed: int = 0, size: int = 32):
    """`n_chunks` n-step chunks of `size` transitions, as an actor packs them."""
    rng, writer, pending = np.random.default_rng(seed), NStepWriter(3, 0.99), []
    obs = rng.normal(size=OBS).astype(np.float32)
    t = 0
    while n_chunks:
        act = rng.uniform(-1, 1, ACT).astype(np.float32)
        nxt = rng.normal(size=OBS).astype(np.float32)
        t += 1
        pending += writer.step(obs, act, float(rng.normal()), nxt, False, t % 50 == 0)
        obs = nxt
        if len(pending) >= size:
            yield pack_chunk(pending[:size], dedup)
            pending, n_chunks = pending[size:], n_chunks - 1


def filled(capacity: int, n_chunks: int, dedup: bool = False) -> UniformStorage:
    storage = UniformStorage(capacity, dedup=dedup)
    for chunk in chunks(n_chunks, dedup):
        storage.add(chunk)
    return storage


def saved(tmp_path: Path, storage: UniformStorage, step: int = 7) -> Path:
    path = replay_save.part_path(tmp_path / "checkpoints", 0)
    replay_save.write(path, replay_save.snapshot(storage, threading.Lock(), 0, step))
    return path


def same(a: UniformStorage, b: UniformStorage) -> None:
    assert (a.added, a.obs_added, len(a)) == (b.added, b.obs_added, len(b))
    assert a.arrays.keys() == b.arrays.keys()
    for key in a.arrays:
        assert a.arrays[key].dtype == b.arrays[key].dtype
        np.testing.assert_array_equal(a.arrays[key], b.arrays[key])


@pytest.mark.parametrize("dedup", [False, True])
@pytest.mark.parametrize("n_chunks", [5, 40], ids=["part-filled", "wrapped"])
def test_a_part_reads_back_as_the_same_replay(tmp_path, dedup, n_chunks):
    before = filled(1000, n_chunks, dedup)
    path = saved(tmp_path, before)
    after = UniformStorage(1000, dedup=dedup)
    meta, arrays = replay_save.read(path, after, ChunkSchema(env_info(), dedup, 1000))
    replay_save.restore(after, meta, arrays)
    same(before, after)
    assert meta["step"] == 7 and meta["rows"] == len(before)
    # the restored replay samples what the original did, and keeps taking chunks
    idx = np.arange(len(before))
    for key, value in before.gather(idx).items():
        np.testing.assert_array_equal(value, after.gather(idx)[key])
    for chunk in chunks(3, dedup, seed=1):
        before.add(chunk), after.add(chunk)
    same(before, after)
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def chronological(storage: UniformStorage) -> dict[str, np.ndarray]:
    """Every stored transition, oldest first (the ring unrolled)."""
    start = storage.added % storage.capacity if storage.added > storage.capacity else 0
    return storage.gather((start + np.arange(len(storage))) % storage.capacity)


@pytest.mark.parametrize("dedup", [False, True])
@pytest.mark.parametrize(
    "n_chunks, capacity",
    [(5, 100), (40, 700), (40, 5000), (5, 5000)],
    ids=["smaller", "wrapped-smaller", "wrapped-larger", "larger"],
)
def test_a_part_of_another_capacity_loads_its_newest_transitions(
    tmp_path, dedup, n_chunks, capacity
):
    """--resume with another algo.replay_capacity keeps the replay (before: refused, empty)."""
    before = filled(1000, n_chunks, dedup)
    path = saved(tmp_path, before)
    shard = ReplayShard(capacity, 10, dedup=dedup, index=0)
    line = shard.load_part(path, ChunkSchema(env_info(), dedup, capacity))
    kept = min(len(before), capacity)
    after = shard.storage
    assert len(after) == kept and after.capacity == capacity
    said = f"algo.replay_capacity was 1,000, now {capacity:,}: kept the newest {kept:,} of "
    assert line.endswith(said + f"{len(before):,}") and "\n" not in line, line
    old, new = chronological(before), chronological(after)
    for key in old:
        np.testing.assert_array_equal(new[key], old[key][-kept:], err_msg=key)
    assert shard.handle({"op": "stats"})["added"] == 0  # not counted again as env steps
    for chunk in chunks(40, dedup, seed=2):  # it keeps taking chunks, then samples only them
        shard.add(chunk)
    fresh = filled(capacity, 0, dedup)
    for chunk in chunks(40, dedup, seed=2):
        fresh.add(chunk)
    last = min(capacity, 40 * 32)
    for key, value in chronological(fresh).items():
        np.testing.assert_array_equal(chronological(after)[key][-last:], value[-last:])


@pytest.mark.parametrize("capacity", [1000, 300], ids=["same-capacity", "smaller"])
@pytest.mark.parametrize("n_chunks", [5, 40], ids=["part-filled", "wrapped"])
@pytest.mark.parametrize("dedup", [False, True], ids=["plain-to-dedup", "dedup-to-plain"])
def test_a_part_saved_with_the_other_dedup_obs_is_converted(tmp_path, dedup, n_chunks, capacity):
    """--resume with --set algo.dedup_obs flipped keeps the replay (before: refused, and the
    shard's next save replaced the part with an empty start)."""
    before = filled(1000, n_chunks, dedup)
    path = saved(tmp_path, before)
    shard = ReplayShard(capacity, 10, dedup=not dedup, index=0)
    line = shard.load_part(path, ChunkSchema(env_info(), not dedup, capacity))
    kept = min(len(before), capacity)
    assert (
        f"algo.dedup_obs was {str(dedup).lower()}, now {str(not dedup).lower()}: converted" in line
    )
    assert ("algo.replay_capacity was 1,000" in line) == (capacity != 1000), line
    after = shard.storage
    assert len(after) == kept and after.dedup is not dedup
    old, new = chronological(before), chronological(after)
    for key in old:  # the same transitions, observations included, oldest first
        np.testing.assert_array_equal(new[key], old[key][-kept:], err_msg=key)
    if not dedup:  # each observation once: ~1 per transition, not 2
        assert after.obs_added < 1.2 * kept
    for chunk in chunks(40, not dedup, seed=2):  # and it takes the new kind of chunks
        shard.add(chunk)
    assert shard.handle({"op": "sample", "batch_size": 8})["ready"]


def test_only_the_filled_rows_are_written(tmp_path):
    small, path = filled(1_000_000, 2), None
    path = saved(tmp_path, small)
    assert path.stat().st_size < 20_000  # 64 transitions, not a million rows


def corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one bit pattern in the middle of the arrays
    path.write_bytes(bytes(data))


def rewrite(path: Path, change) -> None:
    """Rewrite the part's arrays through `change(meta, arrays)`, the checksum kept as it was."""
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(bytes(arrays.pop("meta")).decode())
    change(meta, arrays)
    header = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, meta=header, **arrays)


def resign(meta, arrays):
    meta["sha256"] = replay_save.digest(meta, arrays)


BAD = {
    "one byte changed": (corrupt, "changed since it was written|truncated or corrupt"),
    "truncated": (lambda p: p.write_bytes(p.read_bytes()[:-500]), "truncated or corrupt"),
    "not a zip": (lambda p: p.write_text("hello"), "truncated or corrupt"),
    "compressed": (
        lambda p: rewrite(p, lambda m, a: None) or _compress(p),
        "compressed entries",
    ),
    "pickled": (lambda p: _pickled(p), "truncated or corrupt|not a surreal replay part"),
    "arrays of another kind": (
        lambda p: rewrite(p, lambda m, a: (m.update(dedup=True), resign(m, a))),
        r"not a surreal replay part \(arrays",
    ),
    "a capacity under its rows": (
        lambda p: rewrite(p, lambda m, a: (m.update(capacity=100), resign(m, a))),
        "inconsistent",
    ),
    "a step that is not a count": (
        lambda p: rewrite(p, lambda m, a: (m.update(step="7k"), resign(m, a))),
        "its step is '7k'",
    ),
    "rows unlike the header": (
        lambda p: rewrite(p, lambda m, a: (a.update(rew=a["rew"][:-1]), resign(m, a))),
        "inconsistent",
    ),
    "another env's observations": (
        lambda p: rewrite(
            p, lambda m, a: (a.update(obs=np.zeros((m["rows"], 5), np.float32)), resign(m, a))
        ),
        "not this run's replay",
    ),
    "a NaN reward": (
        lambda p: rewrite(
            p, lambda m, a: (a.update(rew=np.full(m["rows"], np.nan, np.float32)), resign(m, a))
        ),
        "not finite",
    ),
}


def _compress(path: Path) -> None:
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    np.savez_compressed(path, **arrays)


def _pickled(path: Path) -> None:
    with np.load(path) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["rew"] = np.array([{"a": 1}] * 4, dtype=object)
    np.savez(path, **arrays)


@pytest.mark.parametrize("damage", list(BAD), ids=list(BAD))
def test_a_bad_part_is_one_line_and_the_shard_starts_empty(tmp_path, damage):
    path = saved(tmp_path, filled(1000, 5))
    spoil, said = BAD[damage]
    spoil(path)
    shard = ReplayShard(1000, 10, index=0, chunk_schema=ChunkSchema(env_info(), False))
    line = shard.load_part(path, ChunkSchema(env_info(), False, 1000))
    assert str(path) in line and line.endswith("; starting empty") and "\n" not in line
    assert re.search(said, line), line
    assert len(shard.storage) == 0 and shard.handle({"op": "stats"})["size"] == 0
    for chunk in chunks(2, False):  # it serves on, empty
        shard.add(chunk)
    assert shard.handle({"op": "stats"})["added"] == 64


def test_a_loaded_part_is_not_counted_again_as_env_steps(tmp_path):
    path = saved(tmp_path, filled(1000, 5))
    shard = ReplayShard(1000, 10, index=0)
    line = shard.load_part(path)
    assert line.startswith(f"loaded the replay part {path}: 160 transitions of 160 added")
    reply = shard.handle({"op": "sample", "batch_size": 8})
    assert reply["ready"] and reply["size"] == 160 and reply["added"] == 0
    for chunk in chunks(1, False, seed=3):
        shard.add(chunk)
    assert shard.handle({"op": "stats"})["added"] == 32


def test_a_write_that_fails_names_the_file_and_keeps_the_last_part(tmp_path, monkeypatch):
    path = saved(tmp_path, filled(1000, 5))
    before = path.read_bytes()

    def full_disk(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(replay_save.os, "fsync", full_disk)
    with pytest.raises(replay_save.ReplayPartError, match="No space left") as err:
        replay_save.write(path, replay_save.snapshot(filled(1000, 9), threading.Lock()))
    monkeypatch.undo()
    assert str(path) in str(err.value) and "the last part is kept" in str(err.value)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


def test_stale_temporaries_of_a_killed_save_are_removed(tmp_path):
    path = saved(tmp_path, filled(1000, 5))
    stale = path.with_name(f".{path.name}.12345.tmp")
    stale.write_bytes(b"half a part")
    other = path.with_name(".replay-1.npz.12345.tmp")  # another shard's: not ours to remove
    other.write_bytes(b"x")
    assert replay_save.remove_stale_temporaries(path) == [stale]
    assert not stale.exists() and other.exists() and path.exists()


def test_a_snapshot_taken_while_chunks_arrive_is_consistent(tmp_path):
    shard = ReplayShard(5000, 10, index=0)
    stream = list(chunks(120, False, seed=5))
    for chunk in stream[:20]:
        shard.add(chunk)
    feeding = threading.Thread(target=lambda: [shard.add(c) for c in stream[20:]])
    feeding.start()
    snaps = [replay_save.snapshot(shard.storage, shard.lock) for _ in range(20)]
    feeding.join()
    for snap in snaps:
        rows = snap.meta["rows"]
        assert rows == snap.meta["added"] and rows % 32 == 0 and rows >= 640
        expect = np.concatenate([c["rew"] for c in stream])[:rows]
        np.testing.assert_array_equal(snap.arrays["rew"], expect)


def test_the_keeper_saves_only_what_changed(tmp_path):
    shard = ReplayShard(1000, 10, index=2)
    path = replay_save.part_path(tmp_path, 2)
    keeper = PartKeeper(shard, path, _Log())
    keeper.save()
    assert not path.exists()  # nothing stored: nothing written
    for chunk in chunks(3, False):
        shard.add(chunk)
    keeper.save()
    first = path.stat().st_mtime_ns
    keeper.save()
    assert keeper.saves == 1 and path.stat().st_mtime_ns == first
    with zipfile.ZipFile(path) as archive:
        assert all(i.compress_type == zipfile.ZIP_STORED for i in archive.infolist())


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, fmt, *args):
        self.lines.append(fmt % args)

    error = warning = info


def test_the_learners_checkpoint_note_makes_the_shard_save_and_junk_is_dropped(tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    publisher = caraml.Publisher(address)
    shard = ReplayShard(1000, 10, index=1)
    path = replay_save.part_path(tmp_path, 1)
    keeper = PartKeeper(shard, path, _Log())
    for chunk in chunks(3, False):
        shard.add(chunk)
    listener = threading.Thread(target=keeper.listen, args=(address,), daemon=True)
    listener.start()
    clock = FairClock(30)
    while not path.exists() and not clock.expired():  # polls: a subscriber joins late
        publisher.publish("checkpoint", ["not", "a", "note"])
        publisher.publish("checkpoint", {"step": 1234})
        time.sleep(0.05)
    shard.stop()
    keeper.close(listener)
    publisher.close()
    meta, _ = replay_save.read(path, UniformStorage(1000))
    assert meta["step"] == 1234 and meta["rows"] == 96 and meta["shard"] == 1
    assert keeper.guard.total_dropped >= 1  # the junk note: counted and dropped


def test_the_parts_of_a_run_with_more_shards_go_to_the_shard_their_index_maps_to(tmp_path):
    for name in ["replay-0", "replay-1", "replay-2", "replay-3", "replay-5", "replay-x"]:
        (tmp_path / f"{name}.npz").write_bytes(b"")
    names = lambda k, n: [p.stem for p in replay_save.orphans(tmp_path, k, n)]  # noqa: E731
    assert names(0, 1) == ["replay-1", "replay-2", "replay-3", "replay-5"]
    assert (names(0, 2), names(1, 2)) == (["replay-2"], ["replay-3", "replay-5"])
    assert names(0, 6) == [] and replay_save.orphans(tmp_path / "none", 0, 1) == []


def _part(tmp_path: Path, index: int, storage: UniformStorage) -> Path:
    path = replay_save.part_path(tmp_path, index)
    replay_save.write(path, replay_save.snapshot(storage, threading.Lock(), index, 5))
    return path


@pytest.mark.parametrize("dedup", [False, True])
def test_a_resume_with_fewer_shards_merges_their_parts_and_removes_them_once_saved(tmp_path, dedup):
    """2 shards -> 1 on --resume: shard 0 holds both parts' transitions (before: replay-1.npz
    was left out, and stayed on disk for a later resume with 2 shards to load as current)."""
    own, other = filled(1000, 20, dedup), UniformStorage(1000, dedup=dedup)
    for chunk in chunks(12, dedup, seed=3):
        other.add(chunk)
    mine, orphan = _part(tmp_path, 0, own), _part(tmp_path, 1, other)
    check = ChunkSchema(env_info(), dedup, 2000)
    shard = ReplayShard(2000, 10, dedup=dedup, index=0)
    assert shard.load_part(mine, check).startswith("loaded")
    assert replay_save.orphans(tmp_path, 0, 1) == [orphan]
    line, sha = shard.merge_part(orphan, check)
    assert line.startswith(f"merged the replay part {orphan}") and "384 transitions" in line
    assert len(shard.storage) == 640 + 384 and shard.handle({"op": "stats"})["added"] == 0
    for key, value in chronological(shard.storage).items():  # own part, then the other's
        both = np.concatenate([chronological(own)[key], chronological(other)[key]])
        np.testing.assert_array_equal(value, both, err_msg=key)
    keeper, log = PartKeeper(shard, mine, _Log(), {orphan: sha}), _Log()
    keeper.log = log
    keeper.save()
    assert not keeper.saves  # nothing new since the load: the orphan stays until a save
    for chunk in chunks(1, dedup, seed=4):
        shard.add(chunk)
    copy = orphan.read_bytes()
    keeper.save()
    assert not orphan.exists() and any("removed" in line for line in log.lines)
    meta, _ = replay_save.read(mine, UniformStorage(2000, dedup=dedup), check)
    assert meta["merged"] == [sha] and meta["rows"] == 640 + 384 + 32
    assert meta["step"] == 5  # the loaded part's, until the learner publishes a checkpoint
    # a kill between that save and the removal: the orphan is not merged twice
    orphan.write_bytes(copy)
    assert replay_save.shares(mine, [orphan], 1100) == {}  # merged already: takes no room
    again = ReplayShard(2000, 10, dedup=dedup, index=0)
    again.load_part(mine, check)
    line, same_sha = again.merge_part(orphan, check, again.merged_before)
    assert same_sha == sha and "already in" in line and len(again.storage) == 640 + 384 + 32


@pytest.mark.parametrize("dedup", [False, True])
def test_parts_that_do_not_fit_together_keep_their_newest_in_proportion(tmp_path, dedup):
    """Two full shards of 1,000 merged into one of 1,000: the newer half of each (before, the
    merged part evicted all of the shard's own)."""
    own, other = filled(1000, 40, dedup), UniformStorage(1000, dedup=dedup)
    for chunk in chunks(40, dedup, seed=3):
        other.add(chunk)
    mine, orphan = _part(tmp_path, 0, own), _part(tmp_path, 1, other)
    shares = replay_save.shares(mine, [orphan], 1000)
    assert shares == {mine: 500, orphan: 500}
    check = ChunkSchema(env_info(), dedup, 1000)
    shard = ReplayShard(1000, 10, dedup=dedup, index=0)
    line = shard.load_part(mine, check, shares[mine])
    assert "kept its newest 500 of 1,000 for the parts it merges" in line, line
    shard.merge_part(orphan, check, (), shares[orphan])
    assert len(shard.storage) == 1000
    for key, value in chronological(shard.storage).items():
        both = np.concatenate([chronological(own)[key][-500:], chronological(other)[key][-500:]])
        np.testing.assert_array_equal(value, both, err_msg=key)
    assert replay_save.shares(mine, [orphan], 2000) == {}  # they fit: nothing cut


def test_a_bad_part_of_another_shard_is_left_out_and_kept(tmp_path):
    orphan = _part(tmp_path, 1, filled(1000, 3))
    corrupt(orphan)
    shard = ReplayShard(1000, 10, index=0)
    line, sha = shard.merge_part(orphan, ChunkSchema(env_info(), False, 1000))
    assert sha is None and line.endswith("; left out") and str(orphan) in line
    assert len(shard.storage) == 0 and orphan.exists()
