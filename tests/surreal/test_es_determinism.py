"""ES master and workers agree bit for bit whatever their BLAS thread counts, and a task a worker
drops is handed out again at once (not after task_timeout)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from symphony.testing import scaled

pytest.importorskip("gymnasium")

from caraml.testing import free_port  # noqa: E402
from surreal.algos.es.config import ESConfig  # noqa: E402
from surreal.algos.es.loop import build  # noqa: E402
from surreal.algos.es.master import ESMaster, serve  # noqa: E402
from surreal.algos.es.noise_table import SharedNoiseTable  # noqa: E402
from surreal.algos.es.state import ESState  # noqa: E402
from surreal.algos.es.worker import run_worker  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ENV = "gym:CartPole-v1"
# 4,610 parameters x 16 pairs: large enough for a multi-threaded BLAS to split a matrix-vector
# product over threads (which is what made the master drift from its workers)
FIELDS = {"hidden": [64, 64], "population": 16, "noise_size": 400_000, "max_episode_steps": 40}
MASTER = """
import json, sys
from surreal.algos.es.config import ESConfig
from surreal.algos.es.loop import build
from surreal.algos.es.master import ESMaster, serve
from symphony.testing import scaled
address, fields, noise_dir, generations = sys.argv[1:5]
cfg = ESConfig(**json.loads(fields))
_, policy, state, noise = build("gym:CartPole-v1", cfg, 0, noise_dir)
master = ESMaster(policy, state, noise, cfg, generations=int(generations), seed=0, min_workers=1)
serve(master, address, timeout=scaled(120))
print(json.dumps({"generation": master.state.generation, "checksum": master.state.checksum(),
                  "released": master.released, "reissued": master.reissued}), flush=True)
"""


def threads(n: int) -> dict[str, str]:
    return dict(
        os.environ, OMP_NUM_THREADS=str(n), OPENBLAS_NUM_THREADS=str(n), PYTHONPATH=str(ROOT)
    )


def gradient_bits(n_threads: int, noise_dir: str) -> str:
    code = (
        "import numpy as np, sys, hashlib\n"
        "from surreal.algos.es.noise_table import SharedNoiseTable\n"
        "from surreal.algos.es.state import es_gradient\n"
        f"noise = SharedNoiseTable(0, 400_000, {noise_dir!r})\n"
        "rng = np.random.default_rng(0)\n"
        "idx = rng.integers(0, 390_000, 32)\n"
        "g = es_gradient(noise, idx, rng.normal(size=32), rng.normal(size=32), 4610)\n"
        "print(hashlib.sha256(g.tobytes()).hexdigest())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=threads(n_threads), capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.timeout(120)
def test_the_gradient_has_the_same_bits_with_one_or_two_blas_threads(tmp_path):
    assert gradient_bits(1, str(tmp_path)) == gradient_bits(2, str(tmp_path))


@pytest.mark.timeout(240)
@pytest.mark.integration
def test_master_with_two_blas_threads_and_worker_with_one_agree_bit_for_bit(tmp_path):
    address, generations = f"tcp://127.0.0.1:{free_port()}", 4
    SharedNoiseTable(ESConfig(**FIELDS).noise_seed, FIELDS["noise_size"], tmp_path)  # made once
    master = subprocess.Popen(
        [
            sys.executable,
            "-c",
            MASTER,
            address,
            json.dumps(FIELDS),
            str(tmp_path),
            str(generations),
        ],
        env=threads(2),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    worker_cmd = [
        sys.executable,
        "-m",
        "surreal.algos.es.worker",
        "--env",
        ENV,
        "--master",
        address,
        "--noise-dir",
        str(tmp_path),
        "--config",
        json.dumps(FIELDS),
    ]
    try:
        worker = subprocess.run(
            [*worker_cmd, "--name", "w0"],
            env=threads(1),
            capture_output=True,
            text=True,
            timeout=scaled(200),
        )
        m_out, m_err = master.communicate(timeout=60)
    finally:
        if master.poll() is None:
            master.kill()
            master.wait()
    assert master.returncode == 0 and worker.returncode == 0, (m_err, worker.stderr)
    m, w = json.loads(m_out.strip().splitlines()[-1]), json.loads(worker.stdout.splitlines()[-1])
    assert m["generation"] == w["generation"] == generations
    assert w["checksum"] == m["checksum"]  # identical theta, Adam moments and obs statistics
    # parameters travelled once (the join); every step after it was recomputed bit for bit
    assert w["syncs"] == 1 and w["updates"] >= 1 and w["dropped"] == 0, w
    assert m["released"] == 0 and m["reissued"] == 0, m


def test_a_dropped_task_is_handed_out_again_at_the_next_request(tmp_path):
    cfg = ESConfig(hidden=(8,), population=3, noise_size=50_000, task_timeout=3600.0)
    _, policy, state, noise = build(ENV, cfg, 0, str(tmp_path))
    master = ESMaster(policy, state, noise, cfg, generations=2, seed=0)
    ask = {"op": "task", "generation": 0, "result": None}
    first = master.handle({**ask, "worker": "a"})
    assert master.handle({**ask, "worker": "b"})["task"] != first["task"]
    # "a" asks again without answering: it dropped its task, which goes out again first
    again = master.handle({**ask, "worker": "a"})
    assert again["task"] == first["task"]
    assert master.gen.released == 1 and master.gen.reissued == 0
    # a request that answers the held task releases nothing
    result = {
        "generation": 0,
        "task": again["task"],
        "r_pos": 1.0,
        "r_neg": 0.0,
        "steps": 2,
        "obs_sum": np.zeros(4),
        "obs_sumsq": np.zeros(4),
        "obs_count": 2,
    }
    master.handle({**ask, "worker": "a", "result": result})
    assert master.gen.released == 1 and again["task"] in master.gen.results


class DriftingState(ESState):
    """A worker's state that rounds differently from the master's in every step."""

    def apply(self, record, noise):
        super().apply(record, noise)
        self.theta = np.nextafter(self.theta, np.float32(np.inf))


@pytest.mark.timeout(120)
def test_a_drifting_worker_resyncs_and_its_tasks_are_not_waited_for(tmp_path):
    cfg = ESConfig(hidden=(8,), population=6, noise_size=50_000, max_episode_steps=30)
    cfg.task_timeout = 3600.0  # a re-issue that waited for the timeout would stall the run
    _, policy, state, noise = build(ENV, cfg, 0, str(tmp_path))
    # 8 generations: the drifting worker must get a task after an update, whichever thread the
    # scheduler favours (with 4, a loaded CI let the other worker take every later task)
    master = ESMaster(policy, state, noise, cfg, generations=8, seed=0, min_workers=2)
    address = f"tcp://127.0.0.1:{free_port()}"
    stats = {}

    def work(name, drift):
        env, wpolicy, wstate, wnoise = build(ENV, cfg, 1, str(tmp_path))
        if drift:
            wstate.__class__ = DriftingState
        stats[name] = run_worker(env, wpolicy, wstate, wnoise, cfg, address, name, give_up_s=60)

    threads_ = [threading.Thread(target=work, args=(n, n == "drift")) for n in ("drift", "ok")]
    for t in threads_:
        t.start()
    serve(master, address, timeout=scaled(100))
    for t in threads_:
        t.join(timeout=30)
    assert master.state.generation == 8
    assert stats["drift"]["syncs"] >= 2  # it drifted after an update and was resynced
    assert stats["ok"]["syncs"] == 1 and stats["ok"]["checksum"] == master.state.checksum()
    # every task the drifting worker dropped was handed out again at once, none by the timeout.
    # Whether it drifts on a reply that hands it a task (dropped) or on a "wait" reply at the
    # generation barrier (nothing to drop) is the scheduler's choice: a CI run saw only the
    # latter; test_a_dropped_task_is_handed_out_again_at_the_next_request pins the drop itself
    assert master.released >= stats["drift"]["dropped"]
    assert master.reissued == 0
