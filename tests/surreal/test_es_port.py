"""The ES master's port: a junk request or a poisoned result never reaches the master's state."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

pytest.importorskip("gymnasium")

import caraml  # noqa: E402
from caraml.testing import free_address  # noqa: E402
from surreal.algos.es.config import ESConfig  # noqa: E402
from surreal.algos.es.loop import build  # noqa: E402
from surreal.algos.es.master import ESMaster  # noqa: E402
from surreal.runtime.wire.ports import es_master_server  # noqa: E402
from tests.surreal.port_fuzz import junk_objects  # noqa: E402

pytestmark = pytest.mark.timeout(120)


def test_junk_and_nan_results_are_dropped_and_real_workers_still_get_tasks(tmp_path):
    cfg = ESConfig(hidden=(8,), population=4, noise_size=100_000)
    _, policy, state, noise = build("gym:CartPole-v1", cfg, 0, str(tmp_path))
    master = ESMaster(policy, state, noise, cfg, generations=2, seed=0)
    address = free_address()
    server = es_master_server(master, address)
    server.guard.out = io.StringIO()
    server.start()
    client = caraml.Client(address, timeout=10.0, retries=0)
    try:
        for junk in junk_objects(random.Random(3), 2000):
            reply = client.request(junk)
            assert reply["op"] in ("wait", "task")
        task = client.request({"op": "task", "worker": "w", "generation": -1})
        assert task["op"] == "task" and "sync" in task
        poisoned = {
            "generation": task["generation"],
            "task": task["task"],
            "r_pos": float("nan"),
            "r_neg": 1.0,
            "steps": 10,
            "obs_sum": np.zeros(4),
            "obs_sumsq": np.zeros(4),
            "obs_count": 10,
        }
        client.request({"op": "task", "worker": "w", "generation": 0, "result": poisoned})
        assert master.gen.results == {}  # the NaN never reached the generation
        assert server.guard.dropped["result-out-of-range"] == 1
        assert server.guard.total_dropped >= 1000
        assert np.isfinite(master.state.theta).all()
    finally:
        client.close()
        server.stop()
