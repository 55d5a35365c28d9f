"""`surreal export`: one file that, in a fresh interpreter with only torch (TorchScript) or
onnxruntime (ONNX), gives the greedy actions of the run's policy; and its model card."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium
import numpy as np
import pytest
import torch

from surreal.algos.ppo import VisionPPOConfig
from surreal.algos.ppo.vision_learner import RecurrentPPOLearner
from surreal.api.spaces import EnvInfo
from surreal.launch import experiment as launching
from surreal.launch.export import check_file, export_run, trace, write_onnx, write_torchscript
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import resolve_run
from surreal.testing import surreal_cli
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(240)

FRESH = textwrap.dedent(
    """
    import sys
    for name in ("surreal", "gymnasium"):  # the file must need neither
        sys.modules[name] = None
    file, fmt, arrays, out = sys.argv[1:]
    import numpy as np
    inputs = list(np.load(arrays).values())
    if fmt == "onnx":
        sys.modules["torch"] = None
        import onnxruntime
        session = onnxruntime.InferenceSession(file)
        names = [i.name for i in session.get_inputs()]
        policy = lambda *xs: session.run(None, dict(zip(names, xs)))
    else:
        import torch
        module = torch.jit.load(file)
        def policy(*xs):
            result = module(*(torch.as_tensor(x) for x in xs))
            return [t.numpy() for t in (result if isinstance(result, tuple) else (result,))]
    if len(inputs) == 1:  # a batch of observations
        outputs = policy(inputs[0])
    else:  # recurrent: observations [T, B, ...], then the state at the first step
        obs, state, actions = inputs[0], inputs[1:], []
        for t in range(len(obs)):
            action, *state = policy(obs[t], *state)
            actions.append(action)
        outputs = [np.stack(actions)]
    np.savez(out, *outputs)
    """
)


def run_fresh(file: Path, fmt: str, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The exported file's outputs on `inputs`, computed in a new interpreter (-I: no
    PYTHONPATH) that cannot import surreal (and, for ONNX, not torch). More than one input:
    a recurrent file, run over a sequence of observations from the state given, each step's
    state out fed in at the next; its actions [T, ...] come back."""
    arrays, out = file.with_suffix(".in.npz"), file.with_suffix(".out.npz")
    np.savez(arrays, *inputs)
    done = subprocess.run(
        [sys.executable, "-I", "-c", FRESH, str(file), fmt, str(arrays), str(out)],
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )
    assert done.returncode == 0, done.stderr
    return list(np.load(out).values())


def observations(env_id: str, n: int = 200) -> np.ndarray:
    """Observations of random-action episodes (what a deployed policy sees)."""
    env = gymnasium.make(env_id)
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    seen = []
    for _ in range(n):
        seen.append(obs)
        obs, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            obs, _ = env.reset()
    return np.asarray(seen, np.float32)


def make_run(tmp_path: Path, algo: str, env: str, overrides: tuple[str, ...] = ()) -> Path:
    """A run folder whose checkpoint holds random (not initial) weights and, for PPO, an
    observation normalizer that is not the identity."""
    plan = launching.plan(algo, env=env, folder=str(tmp_path / "runs"), overrides=overrides)
    launching.create_run(plan)
    learner = plan.algo_class.create(plan.config, plan.env_info)
    torch.manual_seed(1)
    holders = [learner, getattr(learner, "algo", None)]  # DDPG/TD3/SAC keep theirs in `algo`
    with torch.no_grad():
        for holder in filter(None, holders):
            for module in vars(holder).values():
                if isinstance(module, torch.nn.Module):
                    for p in module.parameters():
                        p.normal_(0.0, 0.5)
    if getattr(learner, "normalizer", None) is not None:
        shape = (64, *plan.env_info.obs_shape)
        learner.normalizer.update(np.random.default_rng(0).normal(0.1, 0.5, shape))
    checkpoint.save(plan.run_dir.checkpoint, learner, {"global_step": 1234})
    return plan.run_dir.path


def greedy(run: Path, obs: np.ndarray) -> np.ndarray:
    """The run's policy's greedy actions, loaded as `surreal eval` loads it."""
    rd = resolve_run(run)
    policy = rd.algo_class().make_policy(rd.load_config().algo, rd.env_info())
    policy.load_params(checkpoint.load(rd.checkpoint)["params"])
    return policy.act(obs, deterministic=True)[0]


CASES = [
    ("ppo", "gym:CartPole-v1", ("algo.norm_obs=true",)),
    ("ppo", "gym:Pendulum-v1", ("algo.norm_obs=true",)),
    ("td3", "gym:Pendulum-v1", ()),
    ("sac", "gym:Pendulum-v1", ()),
    ("dqn", "gym:CartPole-v1", ("algo.hidden=64,64",)),
]


@pytest.mark.integration  # a fresh interpreter per case (torch alone: ~5 s)
@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
@pytest.mark.parametrize(("algo", "env", "overrides"), CASES, ids=lambda c: str(c))
def test_the_exported_file_gives_the_policys_greedy_actions_in_a_fresh_interpreter(
    tmp_path, algo, env, overrides, fmt
):
    run = make_run(tmp_path, algo, env, overrides)
    exported = export_run(run, fmt, tmp_path / f"policy.{fmt}")
    obs = observations(env.split(":")[1])
    want = greedy(run, obs)
    (got,) = run_fresh(exported.file, fmt, [obs])
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.int64:  # discrete: the same actions, and not all one action
        np.testing.assert_array_equal(got, want)
        assert len(set(want.tolist())) > 1
    else:  # continuous: within the env's bounds, as the policy scales them
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)  # float32's precision
        if algo != "ppo":
            assert np.all(np.abs(got) <= 2.0) and np.abs(got).max() > 1.0  # Pendulum: [-2, 2]


@pytest.mark.integration
@pytest.mark.parametrize("fmt", ["torchscript", "onnx"])
def test_ppo_vision_takes_and_returns_its_lstm_state(tmp_path, fmt):
    size, proprio = 36, 5
    info = EnvInfo(obs_shape=(size * size * 3 + proprio,), discrete=False, action_shape=(2,))
    config = VisionPPOConfig(image_size=size, lstm_size=16)
    learner = RecurrentPPOLearner(config, info)
    learner.normalizer.update(np.random.default_rng(0).normal(2.0, 3.0, (50, proprio)))
    with torch.no_grad():
        for p in learner.model.parameters():
            p.normal_(0.0, 0.3)
    policy = learner.make_policy(config, info)
    policy.load_params(learner.params())
    module = policy.export_module()
    file = tmp_path / f"vision.{fmt}"
    traced = trace(module)
    (write_onnx if fmt == "onnx" else write_torchscript)(traced, module, file)
    check_file(file, fmt, module)

    rng = np.random.default_rng(1)
    steps, batch = 4, 3
    obs = [
        np.concatenate(
            [rng.integers(0, 256, (batch, size * size * 3)), rng.normal(size=(batch, proprio))],
            axis=1,
        ).astype(np.float32)
        for _ in range(steps)
    ]
    policy.reset(np.ones(batch, bool))
    want = [policy.act(o, deterministic=True)[0] for o in obs]  # the policy keeps its memory
    zeros = np.zeros((batch, 16), np.float32)  # an episode starts from zeros
    (got,) = run_fresh(file, fmt, [np.stack(obs), zeros, zeros])
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-4, atol=1e-5)
    assert not np.allclose(want[0], want[-1])  # the memory changes the action


def test_the_file_loads_with_torch_alone_and_acts_greedily_in_this_process(tmp_path):
    run = make_run(tmp_path, "ppo", "gym:CartPole-v1", ("algo.norm_obs=true",))
    exported = export_run(run, "torchscript", tmp_path / "p.pt")
    obs = observations("CartPole-v1", 50)
    got = torch.jit.load(str(exported.file))(torch.as_tensor(obs)).numpy()
    np.testing.assert_array_equal(got, greedy(run, obs))
    assert exported.inputs == {"obs": ("float32", ["batch", 4])}
    assert exported.outputs == {"action": ("int64", ["batch"])}
    card = exported.card.read_text()
    assert "step 1,234" in card and "`gym:CartPole-v1`" in card and '"norm_obs": true' in card


def test_best_needs_a_best_checkpoint_and_says_so(tmp_path):
    run = make_run(tmp_path, "td3", "gym:Pendulum-v1")
    with pytest.raises(FileNotFoundError, match="--checkpoint latest"):
        export_run(run, "torchscript", tmp_path / "p.pt", which="best")


@pytest.mark.integration
def test_surreal_export_of_a_run_writes_both_formats_and_a_model_card(tmp_path):
    home = tmp_path / "home"
    launch = ["launch", "ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--steps", "100000"]
    launch += ["--set", "run.stop_at_return=0"]  # ends at its first evaluation: best.pt is there
    done = surreal_cli([*launch, "--quiet"], tmp_path, home)
    assert done.returncode == 0, done.stderr
    assert "surreal plot runs/ppo-cartpole-v1/t1" in done.stdout  # the last line names it
    run = tmp_path / "runs" / "ppo-cartpole-v1" / "t1"
    obs = observations("CartPole-v1")
    for fmt, args in (("torchscript", []), ("onnx", ["--format", "onnx", "--checkpoint", "best"])):
        out = surreal_cli(["export", "runs/ppo-cartpole-v1/t1", *args], tmp_path, home, 120)
        assert out.returncode == 0, out.stderr
        file = tmp_path / f"ppo-cartpole-v1-t1.{'onnx' if fmt == 'onnx' else 'pt'}"
        assert f"wrote {file.name} ({fmt}" in out.stdout
        (got,) = run_fresh(file, fmt, [obs])
        if fmt == "torchscript":  # latest.pt: what `surreal eval` plays
            np.testing.assert_array_equal(got, greedy(run, obs))
        card = file.with_suffix(".md").read_text()
        for fact in ("gym:CartPole-v1", "`ppo`", " ".join(["surreal", *launch, "--quiet"])):
            assert fact in card
        if fmt == "onnx":  # best.pt keeps the evaluation it was written for: the card shows it
            best = torch.load(run / "checkpoints" / "best.pt", weights_only=False)
            assert f"{best['eval_return']:.1f} at this checkpoint's step" in card
        status = json.loads((run / "status.json").read_text())
        assert f"best {status['best_eval_return']:.1f}" in card


def test_export_of_a_missing_run_is_a_usage_error(tmp_path):
    out = surreal_cli(["export", "nowhere"], tmp_path, tmp_path / "home", 60)
    assert out.returncode == 2 and "not a surreal run folder" in out.stderr
