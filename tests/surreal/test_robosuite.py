"""robosuite:<Task> environments (state and camera mode) and PPO smoke runs through `surreal launch`."""

import numpy as np
import pytest
import torch

from surreal.api.config import EnvConfig
from surreal.envs import UnknownEnvironment, check_env, make_env
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import metric_records

pytest.importorskip("robosuite")
pytestmark = pytest.mark.timeout(900)

CAMERA_KEYS = "env.obs_keys=agentview_image,robot0_proprio-state"
SHORT = [
    "--actors",
    "1",
    "--set",
    "env.num_envs=1",
    "--set",
    "eval.every_s=0",
    "--set",
    "run.checkpoint_every=1",
    "--set",
    "algo.update_epochs=1",
    "--set",
    "algo.num_minibatches=1",
    "--set",
    "algo.batch_size=0",  # one segment per update (ppo-vision's default; ppo's is 512 steps)
    "--set",
    "env.max_episode_steps=40",
]


@pytest.mark.integration
def test_state_mode_observations_actions_and_time_limit():
    config = EnvConfig(id="robosuite:Lift", max_episode_steps=3)
    env = make_env(config.id, config, seed=0)
    assert env.observation_space.shape == (60,)  # robot0_proprio-state (50) + object-state (10)
    assert env.action_space.shape == (7,)  # Panda: 6-dof OSC pose + gripper
    env.reset(seed=0)
    rewards, truncated = [], False
    while not truncated:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        assert not terminated and obs.dtype == np.float32
        rewards.append(reward)
    assert len(rewards) == 3 and info["episode"]["l"] == 3
    assert all(0.0 < r < 1.0 for r in rewards)  # shaped: a reaching reward, not the sparse 0
    env.close()


@pytest.mark.integration
def test_camera_mode_renders_an_84px_image_with_fast_offscreen_settings():
    config = EnvConfig(id="robosuite:Lift", obs_keys=["agentview_image", "robot0_proprio-state"])
    env = make_env(config.id, config, seed=0)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (84 * 84 * 3 + 50,)
    image = obs[: 84 * 84 * 3].reshape(84, 84, 3)
    assert 0 <= image.min() and image.max() <= 255 and image.std() > 5  # a real picture
    model = env.unwrapped.env.sim.model
    assert model.vis.quality.offsamples == 0 and model.vis.global_.offwidth == 84
    env.close()


@pytest.mark.integration
def test_a_key_that_does_not_exist_is_a_clear_error():
    with pytest.raises(ValueError, match=r"\['cube_poz'\] do not exist.*cube_pos"):
        make_env(
            "robosuite:Lift",
            EnvConfig(id="robosuite:Lift", obs_keys=["robot0_proprio-state", "cube_poz"]),
        )
    with pytest.raises(ValueError, match="put the camera image first"):
        make_env(
            "robosuite:Lift",
            EnvConfig(id="robosuite:Lift", obs_keys=["robot0_proprio-state", "agentview_image"]),
        )
    with pytest.raises(UnknownEnvironment, match="did you mean robosuite:Lift"):
        check_env("robosuite:Lfit")


@pytest.mark.integration
def test_launching_the_vision_model_on_state_observations_fails_before_anything_starts(tmp_path):
    result = surreal_cli(
        ["launch", "ppo-vision", "--env", "robosuite:Lift"],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(120),
    )
    assert result.returncode == 2
    assert "put a camera key first in env.obs_keys" in result.stderr
    assert not (tmp_path / "runs").exists()


def launch(tmp_path, name: str, steps: int, *args: str, algo: str = "ppo"):
    result = surreal_cli(
        [
            "launch",
            algo,
            "--env",
            "robosuite:Lift",
            "--steps",
            str(steps),
            "--name",
            name,
            "--trial",
            "a",
            *SHORT,
            *args,
        ],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(600),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    run = tmp_path / "runs" / name / "a"
    return run, torch.load(run / "checkpoints" / "latest.pt", weights_only=False)


def assert_learned_from_actors(run, state, steps: int, iterations: int) -> None:
    """Experience reached the learner, which updated the model and wrote a checkpoint."""
    assert state["counters"]["global_step"] >= steps  # counted from the batches it learned on
    assert state["counters"]["iterations"] >= iterations
    assert state["learner"]["optimizer"]["state"][0]["step"] >= iterations
    losses = [r for r in metric_records(run) if r["name"] == "losses/policy_loss"]
    assert len(losses) >= iterations and all(np.isfinite(r["value"]) for r in losses)
    assert any(r["name"] == "charts/episodic_return" for r in metric_records(run))


@pytest.mark.integration
def test_ppo_on_lift_from_state_through_surreal_launch(tmp_path):
    run, state = launch(tmp_path, "lift-state", 256, "--set", "actor.rollout_length=64")
    assert_learned_from_actors(run, state, 256, 4)
    assert state["params"]["obs_norm/mean"].shape == (60,)


@pytest.mark.integration
def test_ppo_on_lift_from_camera_with_conv_lstm_and_a_video(tmp_path):
    run, state = launch(
        tmp_path,
        "lift-camera",
        160,
        "--set",
        CAMERA_KEYS,
        "--set",
        "actor.rollout_length=32",
        "--set",
        "algo.bptt_length=16",
        algo="ppo-vision",
    )
    assert_learned_from_actors(run, state, 160, 5)
    params = state["params"]
    assert params["model/lstm.weight_hh"].shape == (400, 100)  # LSTM of 100 units (4 gates)
    assert params["obs_norm/mean"].shape == (50,)  # proprio only; the image is scaled by 1/255
    # rendering happens in actors only: the learner never even imports robosuite (whose import
    # logs warnings to every process's log that does)
    assert "robosuite" in (run / "logs" / "actor-0.log").read_text()
    assert "robosuite" not in (run / "logs" / "learner.log").read_text()
    video = tmp_path / ("episode.mp4" if _has_ffmpeg() else "episode.gif")
    result = surreal_cli(
        ["eval", str(run), "--episodes", "1", "--video", str(video)],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(300),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    import imageio.v2 as imageio

    frames = imageio.mimread(str(video), memtest=False)
    assert len(frames) == 40 and frames[0].shape == (256, 256, 3)


def _has_ffmpeg() -> bool:
    try:
        import imageio_ffmpeg  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True
