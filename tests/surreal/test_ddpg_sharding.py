"""Replay shards behind the proxies: experience spreads over shards, the learner samples from all."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import caraml
from caraml.testing import free_port
from surreal.algos.ddpg.learner_loop import StepCounter, sample_reply_to_arrays
from surreal.runtime.processes.replay_shard import ReplayShard, sampling_start
from surreal.runtime.processes.sharding import start_replay_proxies
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(60)


def _chunk(shard_tag: float, n: int = 8) -> dict[str, np.ndarray]:
    return {
        "obs": np.full((n, 3), shard_tag, np.float32),
        "next_obs": np.zeros((n, 3), np.float32),
        "act": np.zeros((n, 1), np.float32),
        "rew": np.full(n, shard_tag, np.float32),
        "discount": np.ones(n, np.float32),
    }


def _addresses() -> dict[str, str]:
    return {
        k: f"tcp://127.0.0.1:{free_port()}" for k in ("push", "push_back", "sample", "sample_back")
    }


def test_chunks_spread_over_shards_and_samples_come_from_every_shard():
    a = _addresses()
    shards = [ReplayShard(capacity=1000, start=8, seed=k, index=k) for k in range(3)]
    with start_replay_proxies(a["push"], a["push_back"], a["sample"], a["sample_back"]):
        threads = [
            threading.Thread(target=s.serve, args=(a["push_back"], a["sample_back"], 0.05))
            for s in shards
        ]
        for t in threads:
            t.start()
        try:
            pusher = caraml.Pusher(a["push"])
            for i in range(60):
                pusher.push(_chunk(float(i)))
            client = caraml.Client(a["sample"], timeout=2.0, retries=5)
            deadline = time.monotonic() + scaled(20)
            while sum(s.storage.added for s in shards) < 480 and time.monotonic() < deadline:
                client.request({"op": "stats"})  # polling with a deadline until all are stored
            added = [s.storage.added for s in shards]
            # round robin: every shard got a share (at least a quarter of the even 160; zmq's
            # PUSH skips a shard that is slow to take, and a loaded CI made one take 72)
            assert sum(added) == 480 and min(added) >= 8 * 5
            seen = {client.request({"op": "sample", "batch_size": 4})["shard"] for _ in range(12)}
            assert seen == {0, 1, 2}  # the learner's requests reach every shard
            reply = client.request({"op": "sample", "batch_size": 16})
            assert reply["ready"] and reply["batch"]["obs"].shape == (16, 3)
            client.close()
            pusher.close()
        finally:
            for s in shards:
                s.stop()
            for t in threads:
                t.join(timeout=5)


def test_a_shard_below_its_sampling_start_says_not_ready_and_rejects_unknown_requests():
    shard = ReplayShard(capacity=100, start=10, index=2)
    shard.add(_chunk(1.0, 4))
    reply = shard.handle({"op": "sample", "batch_size": 4})
    assert reply == {"size": 4, "added": 4, "shard": 2, "boot": shard.boot, "ready": False}
    assert "empty" in sample_reply_to_arrays(reply)
    shard.add(_chunk(1.0, 8))
    arrays = sample_reply_to_arrays(shard.handle({"op": "sample", "batch_size": 5}))
    assert arrays["obs"].shape == (5, 3) and int(arrays["shard"][0]) == 2
    reply = shard.handle({"op": "push"})  # answered and counted, never raised
    assert reply["ready"] is False and "op 'sample' or 'stats'" in reply["error"]
    assert shard.request_guard.dropped["bad-op"] == 1


def test_step_counter_keeps_counting_across_a_shard_restart_and_out_of_order_replies():
    steps = StepCounter(start=100)
    assert steps.update(0, 50, boot=7) == 150 and steps.update(1, 70, boot=8) == 220
    assert steps.update(0, 40, boot=7) == 220  # an older reply arriving late changes nothing
    assert steps.update(0, 5, boot=9) == 225  # shard 0 restarted: its 50 earlier ones still count
    assert steps.update(0, 30, boot=9) == 250


def test_a_single_shard_samples_from_replay_start_and_each_of_k_from_half_its_share():
    # one shard: the config's sampling-start size itself (it once started at half of it)
    assert sampling_start(10_000, 1) == 10_000
    # K shards fed round robin: half of each one's share, so one a few chunks short never
    # holds the learner back
    assert sampling_start(10_000, 2) == 2_500
    assert sampling_start(10_000, 4) == 1_250
    assert sampling_start(3, 4) == 1  # never 0: an empty shard does not answer samples
