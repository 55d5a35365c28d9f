"""One ES generation's bookkeeping: which pairs were handed out, which came back, what to re-issue."""

from __future__ import annotations

import numpy as np

from surreal.algos.es.rollout import PairResult


class Generation:
    """The `population` antithetic pairs of one generation, handed out one task at a time.

    A task its worker dropped (see :meth:`release`) is handed out again first, at the next
    request. A task not answered within `task_timeout` seconds of being handed out is handed out
    again to the next worker that asks (a worker lost mid-generation costs the master that delay,
    no more); the first answer for a task wins and late duplicates are ignored.
    """

    def __init__(self, number: int, indices: np.ndarray, task_timeout: float) -> None:
        self.number = number
        self.indices = np.asarray(indices, np.int64)
        self.task_timeout = task_timeout
        self.results: dict[int, PairResult] = {}
        self.issued: dict[int, float] = {}  # task id -> time last handed out
        self.reissued = 0  # handed out again after task_timeout
        self.released = 0  # handed back by their worker, to be handed out again at once
        self._free: list[int] = []

    def release(self, task: int) -> bool:
        """The worker holding `task` will not answer it: hand it out again at the next request.
        False (nothing to do) when the task is answered, not handed out, or already free."""
        if task in self.results or task not in self.issued or task in self._free:
            return False
        self._free.append(task)
        self.released += 1
        return True

    def next_task(self, now: float) -> int | None:
        """A task id to hand out now, or None (all handed out and none overdue, or done)."""
        while self._free:
            task = self._free.pop(0)
            if task not in self.results:
                self.issued[task] = now
                return task
        for task in range(len(self.indices)):
            if task not in self.issued:
                self.issued[task] = now
                return task
        overdue = [
            t
            for t, at in self.issued.items()
            if t not in self.results and now - at >= self.task_timeout
        ]
        if overdue:
            task = min(overdue, key=self.issued.__getitem__)
            self.issued[task] = now
            self.reissued += 1
            return task
        return None

    def submit(self, task: int, result: PairResult) -> bool:
        """Record an answer; False for a duplicate or an unknown task."""
        if task in self.results or not 0 <= task < len(self.indices):
            return False
        self.results[task] = result
        return True

    @property
    def complete(self) -> bool:
        return len(self.results) == len(self.indices)

    def record(self) -> dict:
        """The generation record every process applies (tasks in id order, so identical everywhere)."""
        tasks = sorted(self.results)
        res = [self.results[t] for t in tasks]
        return {
            "generation": self.number,
            "indices": self.indices[tasks],
            "r_pos": np.array([r.r_pos for r in res], np.float64),
            "r_neg": np.array([r.r_neg for r in res], np.float64),
            "obs_sum": np.sum([r.obs_sum for r in res], axis=0),
            "obs_sumsq": np.sum([r.obs_sumsq for r in res], axis=0),
            "obs_count": float(sum(r.obs_count for r in res)),
        }

    @property
    def steps(self) -> int:
        """Env steps of the answered pairs."""
        return sum(r.steps for r in self.results.values())

    def mean_return(self) -> float:
        """Mean return of the population's 2P episodes."""
        return float(np.mean([(r.r_pos + r.r_neg) / 2 for r in self.results.values()]))
