"""Replay = storage + sampler: FIFO for on-policy learners; other samplers plug in beside it."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

Segment = dict[str, np.ndarray]


class FifoStorage:
    """Keeps at most `capacity` segments, oldest first; adding to a full storage drops the oldest."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.items: deque[Segment] = deque()
        self.dropped = 0

    def add(self, segment: Segment) -> None:
        """Append a segment (dropping the oldest when full)."""
        if len(self.items) >= self.capacity:
            self.items.popleft()
            self.dropped += 1
        self.items.append(segment)

    def __len__(self) -> int:
        return len(self.items)


class FifoSampler:
    """Takes the `n` oldest segments out of the storage: each segment is learned from once."""

    def ready(self, storage: FifoStorage, n: int) -> bool:
        """Whether `sample(storage, n)` can answer now."""
        return len(storage) >= n

    def sample(self, storage: FifoStorage, n: int) -> list[Segment]:
        """Remove and return the `n` oldest segments."""
        return [storage.items.popleft() for _ in range(n)]


def stack(segments: list[Segment]) -> Segment:
    """Stack segments key by key: every array gets a leading [len(segments)] axis."""
    return {key: np.stack([s[key] for s in segments]) for key in segments[0]}


class Replay:
    """A thread-safe replay composed of a storage and a sampler.

    Writers call `add`; the learner-facing server calls `take(n, timeout)`, which waits until the
    sampler can answer (or the timeout passes) and returns the stacked batch (or None).
    """

    def __init__(
        self, storage: Any, sampler: Any, collate: Callable[[list[Segment]], Segment] = stack
    ) -> None:
        self.storage, self.sampler, self.collate = storage, sampler, collate
        self._cond = threading.Condition()
        self.added = 0
        self.served = 0

    def add(self, segment: Segment) -> None:
        """Store one segment and wake a waiting `take`."""
        with self._cond:
            self.storage.add(segment)
            self.added += 1
            self._cond.notify_all()

    def take(self, n: int, timeout: float) -> Segment | None:
        """A batch of `n` segments, or None if not enough arrived within `timeout` seconds."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.sampler.ready(self.storage, n), timeout):
                return None
            segments = self.sampler.sample(self.storage, n)
            self.served += n
        return self.collate(segments)

    def __len__(self) -> int:
        with self._cond:
            return len(self.storage)
