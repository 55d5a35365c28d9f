"""Data-parallel learner replicas with torch.distributed (gloo, 2 local processes on 127.0.0.1):
2 replicas on half-batches take the same PPO steps as 1 learner on the whole batch."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from surreal.algos.ppo import PPOLearner
from surreal.api.config import Config
from surreal.api.spaces import EnvInfo
from surreal.testing import fake_segment_batch
from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(240)
CARTPOLE = EnvInfo(obs_shape=(4,), discrete=True, num_actions=2)
UPDATES, SEGMENTS = 3, 4

REPLICA = """
import json, sys
import numpy as np, torch
from surreal.runtime.processes.distributed import Replicas
sys.path.insert(0, {here!r})
from test_distributed import SEGMENTS, batches, learner

rank, port, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
replicas = Replicas.start(rank, 2, "127.0.0.1", port, timeout_s=120)
model = learner(replicas)
for batch in batches():
    half = SEGMENTS // 2
    model.learn({{k: v[rank * half : (rank + 1) * half] for k, v in batch.items()}})
if rank == 0:
    params = {{k: v.tolist() for k, v in model.params().items()}}
    open(out, "w").write(json.dumps(params))
replicas.close()
"""


def batches():
    """UPDATES batches of SEGMENTS segments (the same on every process)."""
    return [
        fake_segment_batch(CARTPOLE, segments=SEGMENTS, steps=8, envs=3, seed=i)
        for i in range(UPDATES)
    ]


def learner(replicas=None) -> PPOLearner:
    """PPO with one minibatch per pass (the loss is the mean over the whole batch)."""
    config = Config(algo=PPOLearner.config_class())
    config.run.device = "cpu"
    config.algo.num_minibatches, config.algo.update_epochs, config.algo.norm_adv = 1, 3, False
    torch.manual_seed(0)
    model = PPOLearner.create(config, CARTPOLE)
    model.replicas = replicas
    return model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
def test_two_replicas_on_half_batches_match_one_learner_on_the_whole(tmp_path):
    single = learner()
    for batch in batches():
        single.learn(batch)
    expected = single.params()

    script = tmp_path / "replica.py"
    script.write_text(REPLICA.format(here=str(Path(__file__).parent)))
    port, out = free_port(), tmp_path / "params.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen([sys.executable, str(script), str(rank), str(port), str(out)], env=env)
        for rank in range(2)
    ]
    assert [p.wait(timeout=scaled(200)) for p in procs] == [0, 0]
    got = {k: np.asarray(v, np.float32) for k, v in json.loads(out.read_text()).items()}
    assert got.keys() == expected.keys()
    moved = max(float(np.abs(expected[k] - learner().params()[k]).max()) for k in expected)
    assert moved > 1e-3  # the updates changed the parameters, so equality below means something
    for key in expected:
        np.testing.assert_allclose(got[key], expected[key], rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.timeout(600)  # two launches; minutes on a loaded 2-core machine
@pytest.mark.slow  # 82-154 s in CI (two launches of 3 learner-side processes): the heavy group
def test_launch_with_two_learner_replicas_then_resume(tmp_path):
    """`surreal launch ppo --set run.learner_replicas=2`: two learner processes (gloo), each on
    one of the two actors' segments per batch; rank 0 checkpoints; `--resume` continues."""
    from surreal.testing import surreal_cli
    from tests.surreal.helpers import QUICK

    args = ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "2000"]
    args += ["--name", "dp", "--trial", "a", "--set", "run.learner_replicas=2", *QUICK]
    plan = surreal_cli([*args, "--dry-run"], tmp_path, tmp_path / "home")
    assert plan.returncode == 0, plan.stderr
    assert "name: learner-1" in plan.stdout and "learner-rdzv" in plan.stdout
    result = surreal_cli(args, tmp_path, tmp_path / "home")
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "runs" / "dp" / "a"
    before = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert before["counters"]["global_step"] >= 2000
    # every iteration consumed both replicas' shares: 2 segments x 16 steps x 4 envs
    assert before["counters"]["global_step"] == before["counters"]["iterations"] * 2 * 16 * 4
    result = surreal_cli(
        ["launch", "--resume", str(run), "--steps", "3000"], tmp_path, tmp_path / "home"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    after = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert after["counters"]["global_step"] >= 3000
    assert after["counters"]["iterations"] > before["counters"]["iterations"]


@pytest.mark.integration
def test_replicas_must_split_the_batch_and_need_the_runtime_learner(tmp_path):
    from surreal.testing import surreal_cli

    odd = ["launch", "ppo", "--env", "gym:CartPole-v1", "--set", "algo.batch_size=768"]
    odd += ["--set", "run.learner_replicas=2"]
    odd.append("--dry-run")  # 768 env steps: 3 segments of 32 steps x 8 envs
    result = surreal_cli(odd, tmp_path, tmp_path / "home")
    assert result.returncode == 2 and "must divide the 3 segments" in result.stderr
    ddpg = ["launch", "ddpg", "--env", "gym:Pendulum-v1", "--set", "run.learner_replicas=2"]
    result = surreal_cli([*ddpg, "--dry-run"], tmp_path, tmp_path / "home")
    assert result.returncode == 2 and "its own learner process" in result.stderr
