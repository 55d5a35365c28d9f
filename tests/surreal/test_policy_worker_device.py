"""Policy workers on a device (`actor.inference_device`): checked at launch, the built-in
policies move there and keep their results, a policy that cannot move is refused in one line;
on a GPU machine, remote inference on `cuda` gives the local CPU policy's actions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from surreal.api.config import Config, ConfigError
from surreal.api.core import Policy
from surreal.api.registry import resolve
from surreal.api.spaces import EnvInfo
from surreal.runtime.processes.policy_worker import place
from tests.surreal.test_policy_workers import CARTPOLE, PENDULUM, VISION, Service, _remote

pytestmark = pytest.mark.timeout(120)


@pytest.mark.integration
def test_inference_device_is_checked_before_anything_starts(tmp_path: Path):
    from surreal.launch.experiment import plan
    from surreal.testing import surreal_cli

    remote = ("actor.inference=remote",)
    with pytest.raises(ConfigError, match="actor.inference_device must be auto, cpu, cuda"):
        plan("ppo", env="gym:CartPole-v1", overrides=(*remote, "actor.inference_device=gpu"))
    with pytest.raises(ConfigError, match=r"actor.inference_device=cuda:4096: (torch|this)"):
        plan("ppo", env="gym:CartPole-v1", overrides=(*remote, "actor.inference_device=cuda:4096"))
    result = surreal_cli(
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--set", "actor.inference=remote"]
        + ["--set", "actor.inference_device=cuda:4096"],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 2
    assert "actor.inference_device=cuda:4096" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()  # a refused launch writes nothing


def test_policy_workers_on_cuda_ask_their_cluster_for_a_gpu(tmp_path: Path):
    """On kube/compose/slurm the device is not this machine's: only its spelling is checked, and
    each policy worker declares one GPU (as the learner does for run.device=cuda)."""
    from surreal.launch.experiment import build_experiment, plan

    def gpus(*overrides: str) -> dict[str, int]:
        p = plan(
            "ppo", env="gym:CartPole-v1", overrides=overrides, backend="kube", folder=str(tmp_path)
        )
        return {proc.name: proc.resources.gpu for proc in build_experiment(p).processes()}

    on_gpu = gpus("actor.inference=remote", "run.policy_workers=2", "actor.inference_device=cuda")
    assert on_gpu["policy-worker-0"] == on_gpu["policy-worker-1"] == 1
    assert on_gpu["actor-0"] == 0
    assert gpus("actor.inference=remote")["policy-worker-0"] == 0


@pytest.mark.parametrize(("algo", "info"), [("ppo", CARTPOLE), ("ddpg", PENDULUM)])
def test_built_in_policies_move_and_act_the_same_on_the_cpu(algo: str, info: EnvInfo):
    cls = resolve(algo)
    config = cls.config_class()
    torch.manual_seed(0)
    params = cls.create(Config(algo=config), info).params()
    policy = cls.make_policy(config, info)
    policy.load_params(params)
    obs = np.random.default_rng(0).normal(size=(5, *info.obs_shape)).astype(np.float32)
    before = policy.act(obs, deterministic=True)
    assert place(policy, "cpu") == "cpu"
    assert policy.to("cpu") is policy and policy.device == torch.device("cpu")
    after = policy.act(obs, deterministic=True)
    np.testing.assert_array_equal(before[0], after[0])
    for key in before[1]:
        np.testing.assert_array_equal(before[1][key], after[1][key])


def test_a_policy_that_cannot_move_is_refused_in_one_line():
    class Fixed(Policy):
        def act(self, obs, deterministic=False):
            return np.zeros(len(obs), np.int64), {}

    with pytest.raises(
        ConfigError, match=r"Fixed has no to\(device\) method.*inference_device=cpu"
    ):
        place(Fixed(), "cuda", cuda_count=1)
    assert place(Fixed(), "auto", cuda_count=0) == "cpu"  # nothing to move: served on the CPU


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize(("algo", "info"), [("ppo", CARTPOLE), ("ppo-vision", VISION)])
def test_remote_inference_on_cuda_gives_the_local_cpu_actions(algo: str, info: EnvInfo):
    """The Fig. 5 setup's correctness half: a worker on the GPU, actors' local policies on the
    CPU, the same parameters and observations (recurrent memory included, with resets)."""
    service = Service(algo, info)
    service.config.actor.inference_device = "cuda"
    try:
        address = service.start_worker()
        remote, local = _remote(service, address), service.local_policy()
        rng = np.random.default_rng(4)
        for t in range(3):
            obs = rng.uniform(0, 255, size=(3, *info.obs_shape)).astype(np.float32)
            got_a, got = remote.act(obs, deterministic=True)
            want_a, want = local.act(obs, deterministic=True)
            np.testing.assert_allclose(got_a, want_a, rtol=1e-4, atol=1e-4)
            for key in want:  # cuDNN's convolutions use TF32 by default: the vision encoder's
                # value came out 2.3e-4 off (0.1255 vs 0.1258) on an H200 on 2026-12-04
                np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-3)
            done = np.zeros(3, bool)
            done[t % 3] = True
            remote.reset(done)
            local.reset(done)
        remote.close()
    finally:
        service.close()
