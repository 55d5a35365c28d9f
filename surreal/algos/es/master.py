"""The ES master: hands out antithetic pairs (noise indices), collects returns, steps the parameters.

Protocol (caraml request-reply; the worker always asks, the master answers):

    worker -> {"op": "task", "worker": name, "generation": g_w, "checksum": c_w, "result": {...}?}
    master -> {"op": "task" | "wait" | "stop", "generation": g, "checksum": c,
               "updates": records of the generations the worker missed (up to KEEP_RECORDS)
               "sync": full state?                    (when it joins, is further behind or drifted)
               "task": id, "index": noise index, "seed": env seed,
               "retry": seconds before asking again (with "wait")}

A result carries the pair's two returns and the observation statistics; parameters travel only in
"sync" (a joining or restarted worker). A worker works on one task at a time, so a request that
does not answer the task it holds drops that task (it drifted and resyncs, or a retried request
lost the reply): the task is handed out again at once. A task a worker does not answer within
`task_timeout` (a lost worker) is handed to the next worker that asks, so no worker stops a
generation.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np

from surreal.algos.es.config import ESConfig
from surreal.algos.es.generation import Generation
from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.policy import ESPolicy
from surreal.algos.es.rollout import PairResult
from surreal.algos.es.state import ESState
from surreal.runtime.wire.ports import es_master_server

KEEP_RECORDS = 16  # a worker further behind than this gets the full state instead
POLLS_PER_S = 1000  # waiting workers together ask about this often (each: 2 ms to 50 ms apart)


class ESMaster:
    """The master's state machine; `handle` is the caraml Server handler (called from its thread)."""

    def __init__(
        self,
        policy: ESPolicy,
        state: ESState,
        noise: SharedNoiseTable,
        config: ESConfig,
        generations: int,
        seed: int = 0,
        max_env_steps: int = 0,
        env_steps: int = 0,
        min_workers: int = 0,
    ) -> None:
        """Args: generations: stop after this many (counting from state.generation's origin).
        max_env_steps: also stop once the population used this many env steps (0: no limit).
        min_workers: hand out no pair before this many workers have asked (a start barrier)."""
        self.min_workers = min_workers
        self.config, self.generations, self.seed = config, generations, seed
        self.policy, self.state, self.noise = policy, state, noise
        self.max_env_steps = max_env_steps
        self.rng = np.random.default_rng(seed + state.generation)
        self.lock = threading.Condition()
        self.records: dict[int, dict] = {}  # the last KEEP_RECORDS generation records
        self.done = False
        self.env_steps = env_steps
        self.reissued = 0
        self.released = 0
        self.holders: dict[int, str] = {}  # task -> worker that last got it
        self.held: dict[str, tuple[int, int]] = {}  # worker -> (generation, task) it holds
        self.last_seen: dict[str, float] = {}  # worker -> time of its last request
        self.told_stop: set[str] = set()
        self.aborted = False
        self.answered_by: dict[tuple[int, int], str] = {}  # (generation, task) -> worker
        self.finished: list[tuple[int, int, float, float]] = []  # gen, env steps, wall, pop return
        self.update_s: list[float] = []  # per finished generation: seconds its update took
        self.start = time.perf_counter()
        self.gen = self._new_generation(state.generation)

    def _new_generation(self, number: int) -> Generation:
        dim = self.policy.num_params
        idx = np.array(
            [self.noise.sample_index(self.rng, dim) for _ in range(self.config.population)]
        )
        self.holders = {}
        return Generation(number, idx, self.config.task_timeout)

    def handle(self, msg: dict) -> dict:
        """Answer one worker request (see the module docstring)."""
        with self.lock:
            worker = str(msg.get("worker", "?"))
            self.last_seen[worker] = time.monotonic()
            if msg.get("result") is not None:
                self._take_result(msg["result"], worker)
            held = self.held.pop(worker, None)
            if held is not None and held[0] == self.gen.number:
                self.gen.release(held[1])  # not answered by this request: dropped
            reply: dict = {
                "op": "stop" if self.done else "wait",
                "generation": self.state.generation,
                "checksum": self.state.checksum(),
            }
            g_w = int(msg.get("generation", -1))
            if g_w != self.state.generation:
                missed = range(g_w, self.state.generation)
                # a worker ahead of this master (restarted from an older checkpoint) needs the
                # whole state: there are no records to step it back with
                if 0 <= g_w < self.state.generation and all(g in self.records for g in missed):
                    reply["updates"] = [self.records[g] for g in missed]
                else:
                    reply["sync"] = self.state.to_wire()
            if self.done:
                self.told_stop.add(worker)
                self.lock.notify_all()
                return reply
            if len(self.last_seen) < self.min_workers:
                return {**reply, "retry": 0.05}  # the start barrier is not reached yet
            task = self.gen.next_task(time.monotonic())
            if task is None:
                reply["retry"] = self._poll_interval()
            else:
                self.holders[task] = worker
                self.held[worker] = (self.gen.number, task)
                reply.update(
                    op="task",
                    task=task,
                    index=int(self.gen.indices[task]),
                    seed=self.seed * 1_000_003 + self.gen.number * 1000 + task,
                )
            return reply

    def _poll_interval(self) -> float:
        """How long a worker with nothing to do waits before asking again: short while there are
        few workers (one idle at the generation barrier starts the next generation within ~2 ms
        of it opening, not after a backoff of up to 50 ms), longer with more, so their polls come
        to about POLLS_PER_S a second (50 ms apart from 50 workers on). Counts every worker seen
        (O(1) on this per-request path; a departed one only lengthens the wait a little)."""
        return min(0.05, max(0.002, len(self.last_seen) / POLLS_PER_S))

    def _take_result(self, res: dict, worker: str) -> None:
        if int(res["generation"]) != self.gen.number:
            return  # a late answer to an already finished generation
        pair = PairResult(
            float(res["r_pos"]),
            float(res["r_neg"]),
            int(res["steps"]),
            np.asarray(res["obs_sum"]),
            np.asarray(res["obs_sumsq"]),
            int(res["obs_count"]),
        )
        if not self.gen.submit(int(res["task"]), pair):
            return
        self.answered_by[(self.gen.number, int(res["task"]))] = worker
        if not self.gen.complete:
            return
        updating = time.perf_counter()
        record = self.gen.record()
        self.state.apply(record, self.noise)
        self.update_s.append(time.perf_counter() - updating)
        self.records[record["generation"]] = record
        self.records.pop(record["generation"] - KEEP_RECORDS, None)
        self.env_steps += self.gen.steps
        self.reissued += self.gen.reissued
        self.released += self.gen.released
        self.finished.append(
            (
                self.gen.number,
                self.env_steps,
                time.perf_counter() - self.start,
                self.gen.mean_return(),
            )
        )
        if self.state.generation >= self.generations or (
            self.max_env_steps and self.env_steps >= self.max_env_steps
        ):
            self.done = True
        else:
            self.gen = self._new_generation(self.state.generation)
        self.lock.notify_all()

    def wait_generation(self, after: int, timeout: float) -> bool:
        """Block until more than `after` generations finished (or training is done); False on timeout."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while len(self.finished) <= after and not self.done:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True

    def snapshot(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """(theta, obs mean, obs std, generation) under the lock, for evaluation and checkpoints."""
        with self.lock:
            s = self.state
            return s.theta.copy(), s.obs_mean.copy(), s.obs_std.copy(), s.generation

    def stop(self, abort: bool = False) -> None:
        """Tell every worker to stop at its next request (abort: do not wait for them to hear it)."""
        with self.lock:
            self.done = True
            self.aborted = self.aborted or abort
            self.lock.notify_all()


def serve(
    master: ESMaster,
    address: str,
    on_generation: Callable[[ESMaster, int], bool] | None = None,
    timeout: float = 3600.0,
) -> None:
    """Serve workers on `address` until the master is done; `on_generation(master, i)` runs in
    this thread after each finished generation i and may return True to stop early."""
    server = es_master_server(master, address)  # worker requests checked first (#25)
    server.start()
    try:
        seen = 0
        while not master.done or seen < len(master.finished):
            if not master.wait_generation(seen, timeout):
                raise TimeoutError(
                    f"no ES generation finished in {timeout:.0f} s; are workers running "
                    "and connected to the master's address?"
                )
            while seen < len(master.finished):
                if on_generation is not None and on_generation(master, seen):
                    master.stop()
                seen += 1
        _drain(master)
    finally:
        server.stop()


def _drain(master: ESMaster, grace: float = 2.0) -> None:
    """Keep answering "stop" until every recently active worker got it (or `grace` s passed)."""
    deadline = time.monotonic() + grace
    with master.lock:
        while time.monotonic() < deadline and not master.aborted:
            recent = {
                w
                for w, t in master.last_seen.items()
                if t > deadline - grace - master.config.task_timeout
            }
            if recent <= master.told_stop:
                return
            master.lock.wait(deadline - time.monotonic())
