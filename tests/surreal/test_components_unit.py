"""Components on fakes: FIFO replay, parameter store, metrics sink, normalizer."""

import json
import threading

import numpy as np
import pytest

from surreal.api.normalizer import RunningNormalizer
from surreal.api.replay import FifoSampler, FifoStorage, Replay
from surreal.runtime.processes.metrics import MetricsSink
from surreal.runtime.processes.param_server import ParameterStore

pytestmark = pytest.mark.timeout(30)


def seg(i: int) -> dict:
    return {"reward": np.full((2, 3), i, np.float32)}


def test_fifo_replay_serves_oldest_first_each_segment_once():
    replay = Replay(FifoStorage(capacity=10), FifoSampler())
    for i in range(5):
        replay.add(seg(i))
    batch = replay.take(2, timeout=0.1)
    assert batch["reward"].shape == (2, 2, 3)
    assert batch["reward"][:, 0, 0].tolist() == [0, 1]
    assert replay.take(3, timeout=0.1)["reward"][:, 0, 0].tolist() == [2, 3, 4]
    assert len(replay) == 0


def test_fifo_storage_drops_the_oldest_when_full_and_counts_it():
    replay = Replay(FifoStorage(capacity=3), FifoSampler())
    for i in range(5):
        replay.add(seg(i))
    assert replay.storage.dropped == 2
    assert replay.take(3, timeout=0.1)["reward"][:, 0, 0].tolist() == [2, 3, 4]


def test_take_waits_for_enough_data_or_times_out():
    replay = Replay(FifoStorage(capacity=10), FifoSampler())
    replay.add(seg(0))
    assert replay.take(2, timeout=0.05) is None  # not enough yet
    writer = threading.Timer(0.05, replay.add, args=(seg(1),))
    writer.start()
    batch = replay.take(2, timeout=5.0)
    writer.join()
    assert batch is not None and batch["reward"][:, 0, 0].tolist() == [0, 1]


def test_parameter_store_sends_weights_only_to_older_versions():
    store = ParameterStore()
    assert "params" not in store.handle({"version": 0})  # nothing published yet
    store.update({"version": 3, "step": 300, "params": {"w": np.ones(2)}})
    reply = store.handle({"version": 1})
    assert reply["version"] == 3 and reply["step"] == 300 and "params" in reply
    assert "params" not in store.handle({"version": 3})
    store.update({"version": 2, "step": 200, "params": {"w": np.zeros(2)}})  # stale: ignored
    assert store.handle({"version": 0})["version"] == 3


def test_metrics_sink_writes_steps_and_status(tmp_path):
    sink = MetricsSink(tmp_path, total_steps=1000, tensorboard=False)
    sink.handle(
        {
            "source": "learner",
            "index": 0,
            "step": 512,
            "version": 2,
            "scalars": {"losses/policy_loss": 0.1, "charts/sps": 99.0, "actor/my_stat": 3.0},
        }
    )
    sink.handle(
        {
            "source": "actor",
            "index": 0,
            "step": 0,
            "env_steps": 300,
            "episode_returns": [10.0, 20.0],
            "episode_lengths": [10, 20],
            "scalars": {},
        }
    )
    sink.handle(
        {
            "source": "actor",
            "index": 0,
            "step": 0,
            "env_steps": 100,  # restarted
            "episode_returns": [],
            "episode_lengths": [],
            "scalars": {},
        }
    )
    sink.handle(
        {"source": "evaluator", "index": 0, "step": 512, "scalars": {"charts/eval_return": 42.0}}
    )
    sink.close()
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    by_name = {r["name"]: r for r in records}
    assert by_name["losses/policy_loss"]["step"] == 512
    assert by_name["actor/my_stat"]["value"] == 3.0  # a learner's metric is logged, any name
    assert by_name["charts/episodic_return"]["step"] == 512  # actors log at the learner's step
    assert by_name["charts/eval_return"]["value"] == 42.0
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["global_step"] == 512 and status["actor_steps"] == 400
    assert status["episodic_return"] == 15.0 and status["best_eval_return"] == 42.0


def test_running_normalizer_matches_numpy_and_round_trips():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 4))
    norm = RunningNormalizer((4,), clip=None)
    for chunk in np.split(data, 10):
        norm.update(chunk)
    np.testing.assert_allclose(norm.mean, data.mean(0), rtol=1e-3)
    np.testing.assert_allclose(norm.var, data.var(0), rtol=1e-3)
    other = RunningNormalizer((4,), clip=None)
    other.load_params(norm.to_params())
    np.testing.assert_array_equal(other(data[:5]), norm(data[:5]))
