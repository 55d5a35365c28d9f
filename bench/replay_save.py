"""Saving and loading a replay shard's part: 1M HalfCheetah-sized transitions, beside np.save.

A `UniformStorage` holding 1,000,000 transitions shaped like HalfCheetah-v5's (obs 17 float32,
action 6, n-step reward, discount, next obs: 168 MB of arrays) is saved the way a replay shard
saves its part when the learner checkpoints (`surreal.runtime.processes.replay_save`: the copy under the
shard's lock, then SHA-256, an uncompressed .npz, fsync and rename) and loaded the way a shard
loads it when it starts (`ReplayShard.load_part`: read, checksum, the chunk schema over every
row, restore). Baseline: a plain `np.save` of the same five arrays (fsynced) and `np.load` of
them. Rounds alternate which of the two goes first. Loads are from a cold page cache: each
file's pages are dropped (`posix_fadvise(DONTNEED)`) before it is read. Peak memory is measured
in a separate pass (tracemalloc: what the operation allocated on top of the live replay).

    .venv/bin/python bench/replay_save.py [--rounds 5] [--quick] [--out bench/out/replay_save.md]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import report

from surreal.api.spaces import EnvInfo
from surreal.runtime.processes import replay_save
from surreal.runtime.processes.replay_shard import ReplayShard
from surreal.runtime.processes.replay_uniform import UniformStorage
from surreal.runtime.wire.schemas import ChunkSchema

N, OBS, ACT = 1_000_000, 17, 6  # transitions; HalfCheetah-v5's observation and action sizes
INFO = EnvInfo((OBS,), False, 0, (ACT,), (-1.0,) * ACT, (1.0,) * ACT)


def filled() -> UniformStorage:
    """A full replay of N random HalfCheetah-sized transitions."""
    storage, rng, step = UniformStorage(N), np.random.default_rng(0), 1 << 16
    for start in range(0, N, step):
        n = min(step, N - start)
        storage.add(
            {
                "obs": rng.normal(size=(n, OBS)).astype(np.float32),
                "next_obs": rng.normal(size=(n, OBS)).astype(np.float32),
                "act": rng.uniform(-1, 1, (n, ACT)).astype(np.float32),
                "rew": rng.normal(size=n).astype(np.float32),
                "discount": np.full(n, 0.97, np.float32),
            }
        )
    return storage


def cold(*paths: Path) -> None:
    """Drop the files' pages from the page cache (they are fsynced: clean pages)."""
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


class Cases:
    """The four operations, on one live replay and one folder."""

    def __init__(self, storage: UniformStorage, folder: Path) -> None:
        self.storage, self.lock, self.folder = storage, threading.Lock(), folder
        self.part = replay_save.part_path(folder, 0)
        self.plain = folder / "plain"
        self.pauses: list[float] = []

    def surreal_save(self) -> None:
        snap = replay_save.snapshot(self.storage, self.lock, 0, 0)
        replay_save.write(self.part, snap)
        self.pauses.append(snap.pause_s)

    def plain_save(self) -> None:
        self.plain.mkdir(exist_ok=True)
        for key, array in self.storage.arrays.items():
            with open(self.plain / f"{key}.npy", "wb") as out:
                np.save(out, array)
                out.flush()
                os.fsync(out.fileno())

    def surreal_load(self) -> None:
        cold(self.part)
        shard = ReplayShard(N, 1000)
        said = shard.load_part(self.part, ChunkSchema(INFO, False, N))
        if not said.startswith("loaded") or len(shard.storage) != N:
            sys.exit(f"the part did not load: {said}")

    def plain_load(self) -> None:
        files = sorted(self.plain.glob("*.npy"))
        cold(*files)
        arrays = {f.stem: np.load(f, allow_pickle=False) for f in files}
        if len(arrays["rew"]) != N:
            sys.exit("the plain arrays did not load")

    def size_mb(self, which: str) -> float:
        files = [self.part] if which == "surreal" else list(self.plain.glob("*.npy"))
        return sum(f.stat().st_size for f in files) / 1e6


PAIRS = (("save", "surreal_save", "plain_save"), ("load", "surreal_load", "plain_load"))


def measure(cases: Cases, rounds: int) -> dict[str, list[float]]:
    """Seconds of each operation per round, the pair's order alternating."""
    samples: dict[str, list[float]] = {name: [] for _, *names in PAIRS for name in names}
    for r in range(rounds):
        for _, ours, plain in PAIRS:
            for name in (ours, plain) if r % 2 == 0 else (plain, ours):
                t0 = time.perf_counter()
                getattr(cases, name)()
                samples[name].append(time.perf_counter() - t0)
        print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    return samples


def peak_mb(operation: Callable[[], None]) -> float:
    """MB `operation` allocated at its peak, beyond what was allocated before it."""
    tracemalloc.start()
    try:
        operation()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def table(samples, peaks, cases: Cases, header: str) -> list[str]:
    def cell(values: list[float]) -> str:
        return f"{statistics.median(values):.2f} | [{min(values):.2f}-{max(values):.2f}]"

    live = cases.storage.nbytes() / 1e6
    lines = [
        header,
        "",
        f"1,000,000 transitions (obs {OBS} float32, act {ACT}, rew, discount, next obs): "
        f"{live:.0f} MB of arrays in the live replay; folder {cases.folder.parent}",
        "",
        "| operation | median s | [min-max] | MB on disk | peak MB allocated |",
        "|---|---:|---:|---:|---:|",
    ]
    names = {
        "surreal_save": "surreal: save a part (copy, SHA-256, .npz, fsync, rename)",
        "plain_save": "baseline: np.save of the 5 arrays (fsync)",
        "surreal_load": "surreal: load a part (read, SHA-256, schema, restore), cold cache",
        "plain_load": "baseline: np.load of the 5 arrays, cold cache",
    }
    for name, label in names.items():
        which = "surreal" if name.startswith("surreal") else "plain"
        lines.append(
            f"| {label} | {cell(samples[name])} | {cases.size_mb(which):.1f} | {peaks[name]:.0f} |"
        )
    lines.append(
        f"| surreal: of the save, sampling paused (the copy under the shard's lock) | "
        f"{cell(cases.pauses)} | - | - |"
    )
    return lines


def main() -> int:
    run = report.start("replay_save", __doc__)
    storage = filled()
    with tempfile.TemporaryDirectory(prefix="surreal-replay-save-", dir=run.md.parent) as tmp:
        cases = Cases(storage, Path(tmp))
        samples = measure(cases, run.rounds)
        run.measured()
        pauses = list(cases.pauses)
        peaks = {name: peak_mb(getattr(cases, name)) for _, *names in PAIRS for name in names}
        cases.pauses = pauses
        lines = table(samples, peaks, cases, run.header())
        sizes = {w: cases.size_mb(w) for w in ("surreal", "plain")}
    raw = {"samples": samples, "pauses": pauses, "peak_mb": peaks, "size_mb": sizes}
    run.publish(lines, raw, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
