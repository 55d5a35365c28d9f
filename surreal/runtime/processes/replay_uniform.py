"""Uniform replay for off-policy learning: ring storage + uniform sampler with a sampling-start size.

Storage takes the chunks that `surreal.algos.ddpg.nstep.pack_chunk` makes (plain, or de-duplicated
with an `obs_table`) and keeps the newest `capacity` transitions. With de-duplication every distinct
observation is stored once in an observation ring; a transition whose observation has already
been overwritten there is never sampled (the sampler redraws).
"""

from __future__ import annotations

import numpy as np

_FIELDS = ("act", "rew", "discount")


class UniformStorage:
    """A ring of the newest `capacity` transitions, allocated from the first chunk's shapes."""

    def __init__(self, capacity: int, dedup: bool = False, obs_capacity: int | None = None) -> None:
        """Args: capacity: transitions kept. dedup: store observations once (chunks must carry
        `obs_table`). obs_capacity: rows of the observation ring (default 1.25 x capacity)."""
        if capacity < 1:
            raise ValueError(f"capacity={capacity}; it must be >= 1")
        self.capacity, self.dedup = capacity, dedup
        self.obs_capacity = obs_capacity or capacity + capacity // 4 + 1
        self.arrays: dict[str, np.ndarray] = {}
        self.added = 0  # transitions ever added
        self.obs_added = 0  # observation rows ever added (dedup only)

    def __len__(self) -> int:
        return min(self.added, self.capacity)

    def _allocate(self, chunk: dict[str, np.ndarray]) -> None:
        for key in _FIELDS:
            self.arrays[key] = np.zeros((self.capacity, *chunk[key].shape[1:]), chunk[key].dtype)
        if self.dedup:
            table = chunk["obs_table"]
            self.arrays["obs_table"] = np.zeros((self.obs_capacity, *table.shape[1:]), table.dtype)
            self.arrays["obs_seq"] = np.zeros(self.capacity, np.int64)
            self.arrays["next_obs_seq"] = np.zeros(self.capacity, np.int64)
        else:
            for key in ("obs", "next_obs"):
                self.arrays[key] = np.zeros(
                    (self.capacity, *chunk[key].shape[1:]), chunk[key].dtype
                )

    def add(self, chunk: dict[str, np.ndarray]) -> int:
        """Append a chunk of transitions; returns how many were added."""
        if self.dedup and "obs_table" not in chunk:
            raise ValueError(
                "this replay de-duplicates observations: push chunks made with "
                "pack_chunk(..., dedup=True) or set dedup_obs=false"
            )
        if not self.arrays:
            self._allocate(chunk)
        n = len(chunk["rew"])
        slots = (self.added + np.arange(n)) % self.capacity
        for key in _FIELDS:
            self.arrays[key][slots] = chunk[key]
        if self.dedup:
            table = chunk["obs_table"]
            seqs = self.obs_added + np.arange(len(table))
            self.arrays["obs_table"][seqs % self.obs_capacity] = table
            self.arrays["obs_seq"][slots] = seqs[chunk["obs_idx"]]
            self.arrays["next_obs_seq"][slots] = seqs[chunk["next_obs_idx"]]
            self.obs_added += len(table)
        else:
            self.arrays["obs"][slots] = chunk["obs"]
            self.arrays["next_obs"][slots] = chunk["next_obs"]
        self.added += n
        return n

    def valid(self, idx: np.ndarray) -> np.ndarray:
        """Which slots can be sampled (with dedup: both observations still in the ring)."""
        if not self.dedup:
            return np.ones(len(idx), bool)
        oldest = self.obs_added - self.obs_capacity
        return (self.arrays["obs_seq"][idx] >= oldest) & (
            self.arrays["next_obs_seq"][idx] >= oldest
        )

    def gather(self, idx: np.ndarray) -> dict[str, np.ndarray]:
        """The batch at slots `idx`: obs, act, rew, next_obs, discount."""
        out = {key: self.arrays[key][idx] for key in _FIELDS}
        if self.dedup:
            table = self.arrays["obs_table"]
            out["obs"] = table[self.arrays["obs_seq"][idx] % self.obs_capacity]
            out["next_obs"] = table[self.arrays["next_obs_seq"][idx] % self.obs_capacity]
        else:
            out["obs"] = self.arrays["obs"][idx]
            out["next_obs"] = self.arrays["next_obs"][idx]
        return out

    def nbytes(self) -> int:
        """Memory held by the storage arrays."""
        return sum(a.nbytes for a in self.arrays.values())


class UniformSampler:
    """Uniform sampling with replacement, refused until `start` transitions are stored."""

    def __init__(self, start: int, seed: int | None = None) -> None:
        self.start = start
        self.rng = np.random.default_rng(seed)

    def ready(self, storage: UniformStorage) -> bool:
        """True once the storage holds the sampling-start size."""
        return len(storage) >= max(self.start, 1)

    def sample(self, storage: UniformStorage, batch_size: int) -> dict[str, np.ndarray]:
        """A uniform batch; raises RuntimeError before the sampling-start size is reached."""
        if not self.ready(storage):
            raise RuntimeError(
                f"replay holds {len(storage)} transitions, fewer than the "
                f"sampling-start size {self.start}; push more experience first"
            )
        idx = self.rng.integers(0, len(storage), batch_size)
        for _ in range(8):  # with dedup, redraw the few slots whose observations were evicted
            bad = ~storage.valid(idx)
            if not bad.any():
                break
            idx[bad] = self.rng.integers(0, len(storage), int(bad.sum()))
        idx[~storage.valid(idx)] = (storage.added - 1) % storage.capacity  # newest: always valid
        return storage.gather(idx)
