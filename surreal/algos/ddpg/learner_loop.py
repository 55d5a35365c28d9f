"""The DDPG learner process: sampled batches (DataFetcher over the replay shards) -> update -> publish."""

from __future__ import annotations

import itertools
import time

import numpy as np


def sample_reply_to_arrays(reply: dict) -> dict[str, np.ndarray]:
    """DataFetcher `process` (runs in the fetch worker): a replay reply -> arrays for a slot."""
    meta = {"added": np.array([reply.get("added", 0)], np.int64),
            "shard": np.array([reply.get("shard", 0)], np.int64)}
    if not reply.get("ready"):
        return {"empty": np.zeros(1, np.int8), **meta}
    return {**{k: np.ascontiguousarray(v) for k, v in reply["batch"].items()}, **meta}


class StepCounter:
    """Env steps = transitions stored over all shards; a restarted shard's count starts again."""

    def __init__(self, start: int = 0) -> None:
        self.base = start
        self.latest: dict[int, int] = {}
        self.offset = 0

    def update(self, shard: int, added: int) -> int:
        prev = self.latest.get(shard, 0)
        if added < prev:  # the shard restarted (its experience is gone, its count too)
            self.offset += prev
        self.latest[shard] = added
        return self.total

    @property
    def total(self) -> int:
        return self.base + self.offset + sum(self.latest.values())


def main(run_dir: str, index: int = 0) -> None:
    """Learn until run.steps env steps were stored (or stopped); checkpoint periodically and at exit."""
    import torch

    import caraml
    from caraml.errors import WorkerDied
    from surreal import checkpoint
    from surreal.components.common import Component

    comp = Component(run_dir, "learner", index)
    cfg, algo_cfg = comp.config, comp.config.algo
    torch.set_num_threads(cfg.run.torch_threads)
    torch.manual_seed(cfg.run.seed)
    learner = comp.algo(algo_cfg, comp.env_info)
    counters = {"global_step": 0, "version": 0, "iterations": 0}
    if comp.run.checkpoint.is_file():
        state = checkpoint.load(comp.run.checkpoint)
        learner.load_state_dict(state["learner"])
        counters.update(state["counters"])
        print(f"resumed from {comp.run.checkpoint} at step {counters['global_step']}", flush=True)
    steps = StepCounter(counters["global_step"])
    publisher = caraml.Publisher(comp.address("params-pub").bind_tcp)

    def publish() -> None:
        publisher.publish("params", {"version": counters["version"], "step": counters["global_step"],
                                     "params": learner.params()})

    obs_dim, act_dim = int(np.prod(comp.env_info.obs_shape)), comp.env_info.action_dim
    slot = 4 * algo_cfg.batch_size * (2 * obs_dim + act_dim + 2) + 8192
    request = {"op": "sample", "batch_size": algo_cfg.batch_size}
    fetcher = caraml.DataFetcher(comp.address("replay-sample").tcp, itertools.repeat(request),
                                 sample_reply_to_arrays, slot_bytes=slot, n_slots=4, n_workers=1,
                                 timeout=5.0, retries=1000)
    last_report = last_ckpt = started = time.monotonic()
    start_step, metrics, its_at_report = counters["global_step"], {}, 0
    publish()
    try:
        while not comp.stopping.is_set() and counters["global_step"] < cfg.run.steps:
            try:
                handle = fetcher.get(timeout=1.0)
            except WorkerDied:
                raise
            except caraml.CaramlError:  # nothing yet (replay refilling): check for stop, wait again
                continue
            with handle:
                data = handle.data
                counters["global_step"] = steps.update(int(data["shard"][0]), int(data["added"][0]))
                if "empty" in data:
                    publish()  # parameter servers that joined late get the current version
                    continue
                metrics = learner.learn(data)
            counters["iterations"] += 1
            if counters["iterations"] % algo_cfg.publish_every == 0:
                counters["version"] += 1
                publish()
            now = time.monotonic()
            if now - last_report > 1.0:
                elapsed = max(now - started, 1e-6)
                metrics.update({"charts/sps": (counters["global_step"] - start_step) / elapsed,
                                "charts/learner_its": (counters["iterations"] - its_at_report) / (now - last_report)})
                comp.report(counters["global_step"], metrics, version=counters["version"], finished=False)
                last_report, its_at_report = now, counters["iterations"]
            if now - last_ckpt > algo_cfg.checkpoint_every_s:
                checkpoint.save(comp.run.checkpoint, learner, counters)
                last_ckpt = now
    finally:
        checkpoint.save(comp.run.checkpoint, learner, counters)
        fetcher.close()
        publisher.close()
        done = counters["global_step"] >= cfg.run.steps
        comp.report(counters["global_step"], {}, version=counters["version"], finished=done, exiting=True)
        comp.close()
