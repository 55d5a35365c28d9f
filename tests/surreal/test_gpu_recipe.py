"""The GPU side of the learner, checked on the CPU (issue 47): PPO's minibatch loop reads nothing
back to the host, `run.compile=graphs` falls back on a CPU with one line and runs each call as a
new CUDA-graph step elsewhere, `run.device=auto` picks the device by the step's size, and the
`gpu` preset is PPO's large-batch MuJoCo recipe (docs/gpu.md)."""

from __future__ import annotations

import collections
import logging

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from surreal.algos import families
from surreal.algos.ddpg.td3 import TD3Config
from surreal.algos.ppo import PPOConfig, PPOLearner, VisionPPOConfig
from surreal.algos.sac.config import SACConfig
from surreal.algos.sac.learner import SACLearner
from surreal.api import compiling
from surreal.api.config import Config, RunConfig
from surreal.api.core import LearnerConfig
from surreal.api.device import GPU_MIN_MINIBATCH, auto_device, preference
from surreal.api.spaces import EnvInfo
from surreal.launch import experiment as launching
from surreal.testing import fake_segment_batch, fake_transitions, surreal_cli

pytestmark = pytest.mark.timeout(120)

HALFCHEETAH = EnvInfo(
    (17,), False, action_shape=(6,), action_low=(-1.0,) * 6, action_high=(1.0,) * 6
)
HOST_READS = {"item", "__float__", "__bool__", "__int__", "__index__", "tolist", "numpy", "cpu"}
"""Tensor methods that hand a value to Python: on a GPU each waits for the device to finish."""


class _HostReads(TorchFunctionMode):
    """Counts the calls of `HOST_READS` on tensors while active."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[str] = collections.Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in HOST_READS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def _ppo(**algo) -> PPOLearner:
    """An eager PPO learner on the CPU with the optimizer it gets on a GPU: fused Adam, whose
    step counts live on the device (the CPU's default Adam reads each one per step)."""
    torch.manual_seed(0)
    config = Config(algo=PPOConfig(**algo), run=RunConfig(compile="off", device="cpu"))
    learner = PPOLearner.create(config, HALFCHEETAH)
    assert not learner.optimizer.defaults["fused"]  # eager on the CPU: as before
    learner.optimizer = torch.optim.Adam(learner.model.parameters(), eps=1e-5, fused=True)
    return learner


def _reads_in_one_batch(**algo) -> collections.Counter[str]:
    learner = _ppo(**algo)
    batch = fake_segment_batch(HALFCHEETAH, segments=2, steps=16, envs=4)
    learner.learn(batch)  # the first batch: optimizer state made
    with _HostReads() as reads:
        metrics = learner.learn(batch)
    assert np.isfinite(metrics["losses/policy_loss"]) and metrics["losses/epochs"] > 0
    return reads.counts


def test_the_minibatch_loop_reads_nothing_back_to_the_host():
    """2 minibatch steps or 64: the same reads per batch, so none inside the loop; the stats come
    back in one read at the batch's end."""
    few = _reads_in_one_batch(update_epochs=1, num_minibatches=2)
    many = _reads_in_one_batch(update_epochs=4, num_minibatches=16)
    assert few == many
    assert few == {"tolist": 1}


def test_an_early_stop_on_kl_reads_once_per_pass_not_per_minibatch():
    never = 1e9  # target_kl that never stops: every pass asks once
    reads = _reads_in_one_batch(update_epochs=3, num_minibatches=16, target_kl=never)
    assert sum(reads.values()) == 1 + 3


def test_graphs_on_a_cpu_is_auto_after_one_warning_line(caplog):
    caplog.set_level(logging.WARNING)
    config = Config(algo=PPOConfig(), run=RunConfig(compile="graphs", device="cpu"))
    learner = PPOLearner.create(config, HALFCHEETAH)
    batch = fake_segment_batch(HALFCHEETAH, segments=2, steps=16, envs=4)
    learner.learn(batch)
    learner.learn(batch)
    lines = [r.getMessage() for r in caplog.records if "run.compile=graphs" in r.getMessage()]
    assert len(lines) == 1 and "need a CUDA GPU" in lines[0] and "run.compile=auto" in lines[0]
    assert not learner._compiling  # auto: a short run on the CPU is not compiled
    assert not isinstance(learner._step, compiling.Compiled)


def test_a_graphs_step_starts_a_new_graph_step_per_call_and_copies_its_outputs(monkeypatch):
    """What CUDA graphs need between the critic's and the actor's steps (TD3's failure: an
    output overwritten by a later replay), exercised through inductor on the CPU."""
    steps = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: steps.append(1))

    def double(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x

    step = compiling.Compiled(double, "a test step", graphs=True)
    x = torch.arange(4.0)
    for i in range(2):
        doubled, same = step(x)
        assert step.active and len(steps) == i + 1
        assert torch.equal(doubled, x * 2) and torch.equal(same, x) and same is not x


def _config(algo, **run) -> Config:
    return Config(algo=algo, run=RunConfig(**run))


@pytest.mark.parametrize(
    ("config", "gpu", "reason"),
    [
        (_config(PPOConfig()), False, "minibatch 128 < 2,048"),  # 512-step batches / 4
        (_config(PPOConfig(batch_size=32_768, minibatch_size=4_096)), True, "4,096 >= 2,048"),
        (_config(PPOConfig(model="my.py:Net")), True, "a network of your own"),
        (_config(VisionPPOConfig()), True, "conv+LSTM"),
        (_config(TD3Config()), False, "batch_size 256 < 2,048"),
        (_config(SACConfig(batch_size=4_096)), True, "4,096 >= 2,048"),
        (_config(TD3Config(), compile="graphs"), True, "run.compile=graphs"),
        (_config(LearnerConfig()), True, "default"),
    ],
)
def test_auto_picks_a_gpu_only_for_a_step_that_is_faster_there(config, gpu, reason):
    prefers, why = preference(config)
    assert prefers is gpu and reason in why
    assert auto_device(prefers, why, cuda_count=1) == ("cuda:0" if gpu else "cpu", why)
    assert auto_device(prefers, why, cuda_count=0) == ("cpu", "no CUDA GPU here")
    assert GPU_MIN_MINIBATCH == 2048


def test_the_gpu_preset_is_chosen_by_name_or_by_a_gpu_device_and_the_users_set_wins(tmp_path):
    def plan(*overrides: str) -> Config:
        return launching.plan(
            "ppo",
            env="gym:HalfCheetah-v5",
            overrides=overrides,
            folder=str(tmp_path),
            dry_run=True,
        ).config

    cpu = plan()
    assert (cpu.algo.batch_size, cpu.algo.num_minibatches, cpu.algo.minibatch_size) == (2048, 32, 0)
    gpu = plan("run.preset=gpu", "algo.lr=5e-4")
    assert (gpu.algo.batch_size, gpu.algo.minibatch_size, gpu.algo.update_epochs) == (
        32_768,
        4_096,
        10,
    )
    assert gpu.algo.lr == 5e-4 and gpu.algo.log_std_init == -1.0  # the user's, the family's
    assert families.preset(_config(PPOConfig(), device="cuda:1")) == "gpu"
    assert families.preset(_config(PPOConfig(), device="cuda:1", preset="cpu")) == "cpu"
    assert families.preset(_config(PPOConfig())) == "cpu"
    assert PPOConfig.preset_defaults("gpu", "classic") == {}  # measured for MuJoCo only


def test_the_launch_summary_says_which_device_and_why(tmp_path):
    args = ["launch", "ppo", "--env", "gym:HalfCheetah-v5", "--set", "run.preset=gpu", "--dry-run"]
    out = surreal_cli(args, cwd=tmp_path, home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "# task family: mujoco, preset gpu (" in lines[1]
    assert "algo.minibatch_size=4096" in lines[1]
    assert "# learner device: cpu (run.device=auto: no CUDA GPU here)" in lines  # after the config


def _sac(mode: str) -> SACLearner:
    run = RunConfig(compile=mode, device="cpu", steps=100_000)
    return SACLearner.create(Config(algo=SACConfig(batch_size=64), run=run), HALFCHEETAH)


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_sac_compiled_and_eager_give_the_same_parameters_after_five_updates():
    """SAC's compiled step (the path `graphs` takes on a GPU) learns what the eager one does:
    the policy's noise comes from the same generator, in the same order."""
    batch = fake_transitions(HALFCHEETAH, 64)
    params, metrics = {}, {}
    for mode in ("off", "on"):
        torch.manual_seed(1)  # the same networks (the learner process seeds run.seed first)
        learner = _sac(mode)
        for _ in range(5):
            metrics[mode] = learner.learn(batch)
        algo = learner.algo
        params[mode] = [*algo.actor.parameters(), *algo.critics.parameters(), algo.log_alpha]
    assert all(step.active for step in learner.algo._compiled)  # the "on" one stayed compiled
    for a, b in zip(params["off"], params["on"], strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    for key, value in metrics["off"].items():
        assert float(metrics["on"][key]) == pytest.approx(value, rel=1e-3, abs=1e-5), key
