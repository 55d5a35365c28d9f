"""`run.compile`: PPO's compiled minibatch step (and TD3's, and ppo-vision's) learns what the
eager one learns, a step that will not compile runs eagerly after one warning, a bad value is
refused, and `auto` is on only where it was measured to pay (surreal/api/compiling.py,
bench/reports/learning.md "Compiled learner step")."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import torch

from surreal.algos.ddpg.td3 import TD3Config, TD3Learner
from surreal.algos.ppo import PPOConfig, PPOLearner, VisionPPOConfig
from surreal.algos.ppo.vision_learner import RecurrentPPOLearner
from surreal.api import compiling
from surreal.api.config import Config, ConfigError, RunConfig, apply_overrides, from_dict
from surreal.api.spaces import EnvInfo
from surreal.testing import fake_segment_batch, fake_transitions

pytestmark = pytest.mark.timeout(120)

HALFCHEETAH = EnvInfo(
    (17,), False, action_shape=(6,), action_low=(-1.0,) * 6, action_high=(1.0,) * 6
)
IMAGE, PROPRIO, LSTM = 36, 5, 16  # ppo-vision: a small camera image keeps the tests short
CAMERA = EnvInfo(
    (IMAGE * IMAGE * 3 + PROPRIO,),
    False,
    action_shape=(2,),
    action_low=(-1.0,) * 2,
    action_high=(1.0,) * 2,
)


def _learner(mode: str, **algo) -> PPOLearner:
    torch.manual_seed(7)
    config = Config(
        algo=PPOConfig(**({"update_epochs": 2, "num_minibatches": 4, "anneal_clip": True} | algo)),
        run=RunConfig(compile=mode, device="cpu"),
    )
    return PPOLearner.create(config, HALFCHEETAH)


def _vision(mode: str, **algo) -> RecurrentPPOLearner:
    """ppo-vision: sub-trajectories of 4 steps, 2 minibatches of 4 (the last batch: 8 of them)."""
    torch.manual_seed(7)
    settings = {"image_size": IMAGE, "lstm_size": LSTM, "bptt_length": 4, "update_epochs": 2}
    config = Config(
        algo=VisionPPOConfig(**(settings | {"num_minibatches": 2} | algo)),
        run=RunConfig(compile=mode, device="cpu"),
    )
    return RecurrentPPOLearner.create(config, CAMERA)


def _batch(learner: PPOLearner) -> dict[str, np.ndarray]:
    """A fixed batch for `learner`; ppo-vision's carries the actors' LSTM states."""
    if not isinstance(learner, RecurrentPPOLearner):
        return fake_segment_batch(HALFCHEETAH, segments=2, steps=16, envs=4)
    batch = fake_segment_batch(CAMERA, segments=2, steps=8, envs=2)
    batch["obs"][..., : IMAGE * IMAGE * 3] = np.random.default_rng(1).integers(0, 256, IMAGE**2 * 3)
    rng = np.random.default_rng(2)
    for key in ("lstm_h", "lstm_c"):
        batch[key] = rng.normal(0, 0.1, (2, 8, 2, LSTM)).astype(np.float32)
    return batch


def _five_updates(learner: PPOLearner) -> list[torch.Tensor]:
    batch = _batch(learner)
    torch.manual_seed(11)  # the same minibatch shuffles for every learner
    for i in range(5):
        learner.progress = i / 10  # the learning rate and clip range anneal between updates
        learner.learn(batch)
    return [p.detach().clone() for p in learner.model.parameters()]


LEARNERS = {"ppo": (_learner, "PPO's minibatch step"), "ppo-vision": (_vision, "ppo-vision's")}
"""algorithm -> (its learner with run.compile=MODE, the start of its step's name)."""


def _compile_warnings(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if "run.compile" in r.getMessage()]


@pytest.mark.integration
@pytest.mark.timeout(600)  # a cold compile takes a minute on the loaded 2-core machine
@pytest.mark.parametrize("algo", list(LEARNERS))
def test_compiled_and_eager_steps_give_the_same_parameters_after_five_updates(caplog, algo):
    make = LEARNERS[algo][0]
    eager, compiled = make("off"), make("on")
    assert isinstance(compiled._step, compiling.Compiled)
    assert not isinstance(eager._step, compiling.Compiled)
    before = [p.detach().clone() for p in compiled.model.parameters()]
    want, got = _five_updates(eager), _five_updates(compiled)
    assert compiled._step.active, "the step fell back to eager"
    assert not _compile_warnings(caplog)
    for a, b in zip(want, got, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(got, before, strict=True))


@pytest.mark.parametrize("algo", list(LEARNERS))
@pytest.mark.parametrize("where", ["at compile", "at the first call"])
def test_a_step_that_will_not_compile_runs_eagerly_after_one_warning(
    monkeypatch, caplog, where, algo
):
    make, name = LEARNERS[algo]

    def broken_compile(fn, **options):
        if where == "at compile":
            raise RuntimeError("no compiler here\nsecond line of the story")

        def first_call(*args, **kwargs):
            fn(*args, **kwargs)  # fails late: its gradients are in, to be reset before eager
            raise RuntimeError("inductor failed\nsecond line of the story")

        return first_call

    monkeypatch.setattr(torch, "compile", broken_compile)
    unclipped = {"max_grad_norm": 1e6}  # so a doubled gradient would show
    want = _five_updates(make("off", **unclipped))
    learner = make("on", **unclipped)
    got = _five_updates(learner)
    warnings = _compile_warnings(caplog)
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    message = warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING and "\n" not in message
    assert name in message and "runs eagerly" in message
    assert not learner._step.active and learner.iterations == 5
    for a, b in zip(want, got, strict=True):  # the eager fall back learned what eager learns
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_a_bad_value_is_refused_in_one_line():
    with pytest.raises(
        ConfigError, match=r"^run.compile must be auto, on, off or graphs, got 'banana'$"
    ):
        apply_overrides(Config(algo=PPOConfig()), ["run.compile=banana"])
    with pytest.raises(ConfigError, match="run.compile must be auto, on, off or graphs"):
        compiling.check("banana")
    with pytest.raises(ConfigError, match="must be auto, on, off or graphs, got 'ON'"):
        from_dict(Config, {"run": {"compile": "ON"}}, algo_class=PPOConfig)
    for mode in ("auto", "on", "off", "graphs"):
        assert (
            apply_overrides(Config(algo=PPOConfig()), [f"run.compile={mode}"]).run.compile == mode
        )
    assert RunConfig().compile == "auto"


def test_auto_compiles_only_long_ppo_mlp_runs_on_the_cpu():
    """auto: on for PPO's MLP on the CPU from `PAYS_AFTER_STEPS` minibatch steps (run.steps x
    update_epochs / minibatch size) on, off for shorter runs, a model of one's own or a GPU."""
    assert compiling.PAYS_AFTER_STEPS == 60_000  # the documented figure (bench/reports/learning.md)

    def auto(steps: int, **algo) -> PPOLearner:
        # HalfCheetah's recipe: 2,048-step batches (8 segments of 32 x 8), 32 minibatches of 64
        recipe = {"batch_size": 2048, "num_minibatches": 32, "update_epochs": 10} | algo
        config = Config(
            algo=PPOConfig(**recipe), run=RunConfig(compile="auto", device="cpu", steps=steps)
        )
        return PPOLearner.create(config, HALFCHEETAH)

    long = auto(1_000_000)  # 156k minibatch steps: compiled
    assert long._compiling and isinstance(long._step, compiling.Compiled)
    assert auto(384_000)._compiling  # 384k x 10 / 64 = 60k exactly
    short = auto(383_999)
    assert not short._compiling and not isinstance(short._step, compiling.Compiled)
    assert not auto(100_000)._compiling  # the test suite's runs
    assert not auto(1_000_000, num_minibatches=4)._compiling  # minibatch 512: 19.5k steps
    assert auto(1_000_000, minibatch_size=64, num_minibatches=1)._compiling
    assert not auto(1_000_000, update_epochs=0)._compiling  # no updates, nothing to win
    assert not compiling.pays(10**9, torch.device("cuda"))  # not measured on a GPU
    assert compiling.pays(60_000, torch.device("cpu"))
    assert not _learner("off")._compiling and _learner("on")._compiling
    assert not PPOLearner(PPOConfig(), HALFCHEETAH)._compiling  # bare: no run config


def test_off_leaves_the_optimizer_as_it_was():
    eager = _learner("off")
    assert not eager.optimizer.defaults.get("fused")
    assert _learner("on").optimizer.defaults["fused"] is True


def _td3(mode: str, steps: int = 100_000) -> TD3Learner:
    run = RunConfig(compile=mode, device="cpu", steps=steps)
    return TD3Learner.create(Config(algo=TD3Config(batch_size=64), run=run), HALFCHEETAH)


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_td3_compiled_and_eager_give_the_same_parameters_after_five_updates():
    batch = fake_transitions(HALFCHEETAH, 64)
    params = {}
    for mode in ("off", "on"):
        torch.manual_seed(1)  # the same networks (the learner process seeds run.seed first)
        learner = _td3(mode)
        torch.manual_seed(3)  # the same target policy smoothing noise
        for _ in range(5):
            learner.learn(batch)
        algo = learner.algo
        params[mode] = [*algo.actor.parameters(), *algo.critics.parameters()]
    assert all(step.active for step in learner.algo._compiled)  # the "on" one stayed compiled
    for a, b in zip(params["off"], params["on"], strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5)


def test_td3_compiles_only_when_asked():
    """TD3's compiled step measured 1.1x at 256x256, batch 256: `auto` leaves it eager."""
    assert _td3("off").algo._compiled is None
    assert _td3("auto", steps=10**8).algo._compiled is None
    assert len(_td3("on").algo._compiled) == 2


def test_ppo_vision_compiles_only_when_asked():
    """ppo-vision's compiled step was not measured to pay: `auto` leaves it eager even for a long
    run on the CPU (where it would compile PPO's MLP); `on` compiles it, with a fused Adam."""
    long_auto = Config(
        algo=VisionPPOConfig(image_size=IMAGE, lstm_size=LSTM),
        run=RunConfig(compile="auto", device="cpu", steps=10**9),
    )
    auto = RecurrentPPOLearner.create(long_auto, CAMERA)
    assert not auto._compiling and not isinstance(auto._step, compiling.Compiled)
    assert not isinstance(_vision("off")._step, compiling.Compiled)
    on = _vision("on")
    assert isinstance(on._step, compiling.Compiled) and on._step.active
    assert on.optimizer.defaults["fused"] is True
