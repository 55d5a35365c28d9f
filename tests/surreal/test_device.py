"""`run.device` and `run.torch_threads`: selection, the launch-time error, the learner's device
helpers, the GPU resource of the learner process, and the batch path (CPU side)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from surreal.algos.ddpg.config import DDPGConfig
from surreal.algos.ddpg.learning import DDPG
from surreal.algos.ppo import PPOLearner
from surreal.api.config import Config, ConfigError
from surreal.api.core import Learner, Policy
from surreal.api.device import check_device, learner_threads, wants_gpu
from surreal.api.spaces import EnvInfo
from surreal.api.transfer import Prefetcher, to_device
from surreal.runtime.plan.topology import LaunchPlan, learner_process
from surreal.runtime.runfolder.rundir import RunDir
from surreal.testing import surreal_cli

pytestmark = pytest.mark.timeout(120)
CARTPOLE = EnvInfo(obs_shape=(4,), discrete=True, num_actions=2)


@pytest.mark.parametrize(
    ("spec", "gpus", "expected"),
    [
        ("auto", 0, "cpu"),
        ("auto", 2, "cuda:0"),
        ("cpu", 2, "cpu"),
        ("CUDA", 1, "cuda:0"),
        ("cuda:1", 2, "cuda:1"),
    ],
)
def test_device_selection(spec, gpus, expected):
    assert check_device(spec, cuda_count=gpus) == expected


@pytest.mark.parametrize(
    ("spec", "gpus", "says"),
    [
        ("cuda", 0, "run.device=cpu"),
        ("cuda:0", 0, "no CUDA GPU"),
        ("cuda:2", 2, "cuda:0..cuda:1"),
        ("tpu", 1, "auto, cpu, cuda or cuda:N"),
        ("cuda:x", 1, "auto, cpu, cuda or cuda:N"),
    ],
)
def test_a_device_that_is_not_there_is_a_one_line_error(spec, gpus, says):
    with pytest.raises(ConfigError) as err:
        check_device(spec, cuda_count=gpus)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_auto_is_the_cpu_on_this_machine():
    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert check_device("auto") == expected


@pytest.mark.integration
def test_launch_asking_for_a_gpu_that_is_not_there_is_a_usage_error(tmp_path):
    missing = f"cuda:{torch.cuda.device_count() if torch.cuda.is_available() else 0}"
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--set",
            f"run.device={missing}",
            "--dry-run",
        ],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert errors and f"run.device={missing}" in errors[0], result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


def test_learner_threads_rule():
    assert learner_threads(3, actors=10, cpus=2) == 3  # explicit wins
    assert learner_threads(0, actors=2, cpus=16) == 13  # CPUs - actors - 1
    assert learner_threads(0, actors=2, cpus=2) == 1  # at least 1
    assert learner_threads(0, actors=100, cpus=16) == 1
    assert learner_threads(0, actors=1) >= 1


def plan_with(tmp_path: Path, **run: object) -> LaunchPlan:
    config = Config(algo=PPOLearner.config_class())
    for key, value in run.items():
        setattr(config.run, key, value)
    return LaunchPlan(config, "ppo", PPOLearner, CARTPOLE, RunDir(tmp_path), "x")


def test_the_learner_process_declares_a_gpu_only_when_asked(tmp_path):
    assert wants_gpu("cuda:1") and not wants_gpu("auto") and not wants_gpu("cpu")
    assert learner_process(plan_with(tmp_path, device="cuda")).resources.gpu == 1
    cpu = learner_process(plan_with(tmp_path, device="cpu", torch_threads=3))
    assert cpu.resources.gpu == 0 and cpu.resources.cpu == 3
    assert cpu.env["OMP_NUM_THREADS"] == "3"


class Linear(Learner):
    """A user's learner: a torch model, its batches moved with `to_device`."""

    @classmethod
    def make_model(cls, config, env_info):
        return torch.nn.Linear(4, 1)

    @classmethod
    def make_policy(cls, config, env_info) -> Policy:
        raise NotImplementedError

    def learn(self, batch):
        t = self.to_device(batch)
        assert t["obs"].device == self.device
        return {"losses/value_loss": self.model(t["obs"]).pow(2).mean().item()}


def test_a_learner_subclass_computes_on_self_device():
    config = Config(algo=Linear.config_class())
    config.run.device = "cpu"
    learner = Linear.create(config, CARTPOLE)
    assert learner.device == torch.device("cpu")
    assert next(learner.model.parameters()).device == learner.device
    obs = np.ones((3, 4), np.float32)
    assert learner.learn({"obs": obs})["losses/value_loss"] >= 0.0
    bare = Linear(Linear.config_class(), CARTPOLE)  # unit tests without a run config: the CPU
    assert bare.device == torch.device("cpu")


def test_to_device_on_the_cpu_is_a_view_even_of_read_only_memory(recwarn):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    array.flags.writeable = False  # like a DataFetcher's shared-memory slot
    tensor = to_device({"x": array}, "cpu")["x"]
    assert np.shares_memory(tensor.numpy(), array)
    assert not [w for w in recwarn if "writable" in str(w.message)]


def test_prefetcher_keeps_order_and_values_and_pulls_lazily_on_the_cpu():
    pulled = []

    def source():
        for i in range(4):
            pulled.append(i)
            yield {"x": np.full((2, 3), i, np.float32), "i": np.asarray([i])}

    prefetch = Prefetcher(source(), "cpu")
    assert pulled == []  # nothing held before it is asked for
    seen = []
    for batch in prefetch:
        assert len(pulled) == len(seen) + 1  # batch k is converted when it is asked for
        assert torch.equal(batch["x"], torch.full((2, 3), float(batch["i"][0])))
        seen.append(int(batch["i"][0]))
    assert seen == [0, 1, 2, 3]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_prefetcher_on_a_gpu_copies_ahead_and_keeps_values():
    batches = [{"x": np.random.rand(64, 8).astype(np.float32)} for _ in range(3)]
    out = [b["x"].cpu().numpy() for b in Prefetcher(iter(batches), "cuda")]
    assert all(np.array_equal(a, b["x"]) for a, b in zip(out, batches, strict=True))


def test_ddpg_networks_live_on_the_given_device():
    algo = DDPG(3, 2, DDPGConfig(), device="cpu")
    assert next(algo.actor.parameters()).device == torch.device("cpu")
    batch = {
        "obs": np.zeros((4, 3), np.float32),
        "act": np.zeros((4, 2), np.float32),
        "rew": np.ones(4, np.float32),
        "next_obs": np.zeros((4, 3), np.float32),
        "discount": np.full(4, 0.99, np.float32),
    }
    assert np.isfinite(algo.update(batch)["losses/qf_loss"])
    assert algo.act(np.zeros(3, np.float32)).shape == (2,)


def test_parameters_are_copied_to_numpy_once_per_version():
    from surreal.runtime.processes.learner import LearnerLoop

    class Counting:
        calls = 0

        def params(self):
            Counting.calls += 1
            return {"model/w": np.full(2, Counting.calls, np.float32)}

    sent = []
    loop = LearnerLoop.__new__(LearnerLoop)  # the loop without its sockets
    loop.learner, loop.counters, loop._published = (
        Counting(),
        {"version": 1, "global_step": 0},
        None,
    )
    loop.publisher = type("P", (), {"publish": lambda self, topic, msg: sent.append(msg)})()
    counted = []  # the Prometheus byte counters (surreal.monitoring) see every send
    prom = type("M", (), {"port_traffic": lambda self, *a: counted.append(a[:2])})()
    loop.comp = type("C", (), {"prom": prom})()
    for _ in range(3):  # re-sends while waiting for the first batch
        loop.publish()
    loop.counters["version"] = 2
    loop.publish()
    assert Counting.calls == 2
    assert [m["version"] for m in sent] == [1, 1, 1, 2]
    assert sent[-1]["params"]["model/w"][0] == 2.0
    assert counted == [("params-pub", "out")] * 4


@pytest.mark.parametrize(("minibatch_size", "steps"), [(0, 2 * 4), (10, 2 * 5), (1000, 2 * 1)])
def test_ppo_minibatch_size_sets_the_gradient_steps_per_pass(minibatch_size, steps):
    """48 samples (2 segments x 8 steps x 3 envs), 2 epochs: num_minibatches=4 by default;
    minibatch_size=10 -> 5 minibatches a pass; larger than the batch -> one."""
    from surreal.testing import fake_segment_batch

    config = Config(algo=PPOLearner.config_class())
    config.algo.update_epochs, config.algo.minibatch_size = 2, minibatch_size
    learner = PPOLearner.create(config, CARTPOLE)
    calls = []
    step = learner.optimizer.step
    learner.optimizer.step = lambda *a, **k: (calls.append(1), step(*a, **k))[1]
    learner.learn(fake_segment_batch(CARTPOLE, segments=2, steps=8, envs=3))
    assert len(calls) == steps


def test_ppo_rejects_a_negative_minibatch_size():
    config = PPOLearner.config_class(minibatch_size=-1)
    with pytest.raises(ValueError, match="algo.minibatch_size"):
        config.check(CARTPOLE)
