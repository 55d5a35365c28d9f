"""The off-policy learner keeps `updates_per_step` from its side (`UpdatePace`): it waits for env
steps, long-polling the replay's count, and never stands still for good."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

import caraml
from caraml.testing import free_port
from surreal.algos.ddpg import learner_loop
from surreal.algos.ddpg.config import TD3Config
from surreal.algos.ddpg.learner_loop import StepCounter, UpdatePace, slack
from surreal.runtime.processes.replay_shard import ReplayShard
from surreal.runtime.processes.sharding import start_replay_proxies
from surreal.runtime.wire.guard import Invalid
from surreal.runtime.wire.schemas import sample_request

pytestmark = pytest.mark.timeout(60)


def _chunk(n: int = 8) -> dict[str, np.ndarray]:
    return {
        "obs": np.zeros((n, 3), np.float32),
        "next_obs": np.zeros((n, 3), np.float32),
        "act": np.zeros((n, 1), np.float32),
        "rew": np.ones(n, np.float32),
        "discount": np.ones(n, np.float32),
    }


def test_a_stats_request_with_wait_s_is_answered_when_the_next_chunk_is_stored():
    shard = ReplayShard(capacity=100, start=10, index=1)
    stored = []
    shard.on_stored = lambda: stored.append(shard.storage.added)
    shard.add(_chunk(4))
    later = shard.handle({"op": "stats", "wait_s": 1.5})
    assert isinstance(later, caraml.Later) and later.wait_s == 1.5
    assert not later.ready()  # nothing new since the request came
    shard.add(_chunk(8))
    assert later.ready() and stored == [4, 12]  # the server is woken on every stored chunk
    assert later.answer() == {"size": 12, "added": 12, "shard": 1, "boot": shard.boot, "chunks": 2}
    # without wait_s: at once, as before
    assert shard.handle({"op": "stats"})["added"] == 12
    # a chunk that does not fit is dropped and wakes nobody
    shard.add({"rew": "junk"})
    assert stored == [4, 12]


@pytest.mark.parametrize("wait_s", [-1, 2.5, "1", True, float("nan")])
def test_a_stats_wait_outside_its_range_is_refused(wait_s):
    with pytest.raises(Invalid):
        sample_request({"op": "stats", "wait_s": wait_s})
    assert sample_request({"op": "stats", "wait_s": 0}) == {"op": "stats"}


def _pace(address: str, counters: dict, **algo) -> UpdatePace:
    config = SimpleNamespace(algo=TD3Config(**algo), run=SimpleNamespace(actors=2))
    comp = SimpleNamespace(config=config, address=lambda name: SimpleNamespace(tcp=address))
    return UpdatePace(comp, counters, StepCounter(counters["global_step"]))


def test_the_allowance_counts_from_the_sampling_start_of_a_new_run_and_from_a_resumed_checkpoint():
    algo = TD3Config(replay_start=1000, chunk_size=32, n_step=1, publish_every=20)
    assert slack(algo, actors=2) == 20 + 2 * 33 + 1
    new = _pace("tcp://127.0.0.1:1", {"global_step": 0, "iterations": 0}, replay_start=1000)
    assert new.allowed() == new.slack  # nothing before the warm-up
    new.counters["global_step"] = 1500
    assert new.allowed() == 500 + new.slack
    # resumed (or restarted) at 50,000 steps with 49,100 updates: paced from there, so a run
    # that once took more updates goes on rather than waiting for steps nobody will take
    old = _pace("tcp://127.0.0.1:1", {"global_step": 50_000, "iterations": 49_100})
    assert old.allowed() == 49_100 + old.slack
    half = _pace("tcp://127.0.0.1:1", {"global_step": 0, "iterations": 0}, updates_per_step=0.5)
    half.counters["global_step"] = 1000 + 400  # TD3Config's replay_start is 1,000
    assert half.allowed() == 200 + half.slack
    free = _pace("tcp://127.0.0.1:1", {"global_step": 0, "iterations": 10**6}, updates_per_step=0)
    assert free.room(stop=lambda: False, tick=lambda: None)  # 0: the learner never waits


@pytest.fixture
def replay():
    """One replay shard behind the proxies: (the learner's sample address, a pusher of chunks)."""
    a = {k: f"tcp://127.0.0.1:{free_port()}" for k in ("push", "pb", "sample", "sb")}
    shard = ReplayShard(capacity=10_000, start=8)
    with start_replay_proxies(a["push"], a["pb"], a["sample"], a["sb"]):
        thread = threading.Thread(target=shard.serve, args=(a["pb"], a["sb"], 0.05))
        thread.start()
        pusher = caraml.Pusher(a["push"])
        try:
            yield a["sample"], pusher, shard
        finally:
            pusher.close()
            shard.stop()
            thread.join(timeout=5)


def test_a_learner_ahead_waits_for_the_env_steps_it_needs(replay):
    address, pusher, shard = replay
    counters = {"global_step": 0, "iterations": 0}
    pace = _pace(address, counters, replay_start=16, publish_every=4, chunk_size=8, n_step=1)
    counters["iterations"] = int(pace.allowed())  # at its limit: the next update must wait
    need = counters["iterations"]
    polls = []

    def tick():  # runs after each poll: push one chunk of 8 steps while the learner waits
        polls.append(counters["global_step"])
        pusher.push(_chunk(8))

    assert pace.room(stop=lambda: False, tick=tick)
    # 16 warm-up steps + 1 more: a chunk of 8 is the first count past that
    assert counters["global_step"] >= 16 + 1 and counters["iterations"] < pace.allowed()
    assert pace.stalls == 0 and pace.waited_s > 0 and polls[0] == 0
    assert counters["global_step"] <= shard.storage.added and counters["iterations"] == need
    pace.close()


def test_a_learner_whose_steps_were_lost_paces_from_where_it_stands(replay, monkeypatch):
    """Steps the learner counted on were lost (a killed shard, a killed actor): nothing comes,
    as the actors wait for the learner in turn. After STALL_S it paces from there: the slack's
    updates at once, then it waits for new steps again."""
    monkeypatch.setattr(learner_loop, "STALL_S", 0.3)
    address, pusher, _ = replay
    counters = {"global_step": 5_000, "iterations": 0}
    pace = _pace(address, counters, replay_start=16, chunk_size=8, n_step=1, publish_every=5)
    counters["iterations"] = int(pace.allowed())
    ticks = []
    assert pace.room(stop=lambda: False, tick=lambda: ticks.append(1))
    assert pace.stalls == 1 and len(ticks) >= 1
    for _ in range(int(pace.slack)):  # the slack's updates without waiting
        assert pace.room(stop=lambda: False, tick=lambda: pytest.fail("waited within the slack"))
        counters["iterations"] += 1
    assert pace.room(stop=lambda: True, tick=lambda: None) is False  # waits again; stop ends it
    # and new steps (one chunk of 8: 8 more updates) let it on without another stall
    assert pace.room(stop=lambda: False, tick=lambda: pusher.push(_chunk(8)))
    assert pace.stalls == 1 and counters["global_step"] == 5_008
    pace.close()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_shard_whose_serving_fails_is_stopped_so_its_process_ends(replay):
    """A failure in the serving loop once left the shard process alive and deaf: `main` joined
    the part keeper's listener, which waits for `stopped`. Now the process ends (and restarts)."""
    _, pusher, shard = replay
    failed = []

    def fail(chunk) -> None:
        failed.append(len(chunk["rew"]))
        raise RuntimeError("a bug in the serving loop")

    shard.add = fail  # what the loop calls for each chunk it pulls
    pusher.push(_chunk(8))
    assert shard.stopped.wait(30) and failed == [8]
