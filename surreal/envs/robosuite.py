"""The `robosuite:<Task>` family: state mode, or camera mode (an 84x84 image + proprioception)."""

from __future__ import annotations

import difflib
import os
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from surreal.api.config import EnvConfig
from surreal.envs.base import UnknownEnvironment

IMAGE_SUFFIX = "_image"
"""A camera observation key is `<camera>_image` (e.g. `agentview_image`)."""
STATE_KEYS = ("proprio-state", "object-state")
"""State mode's default keys: each robot's `robot<i>_proprio-state`, then `object-state`."""


def _suite() -> Any:
    """Import robosuite, with headless rendering (EGL) unless MUJOCO_GL says otherwise.

    MUJOCO_GL is read when robosuite is first imported, so this runs before any import of it;
    each process that renders creates its own GL context (never shared across fork).
    """
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        import robosuite
        from robosuite import macros
    except ModuleNotFoundError as err:
        raise UnknownEnvironment(
            "robosuite:<Task> environments need robosuite: pip install -e '.[robosuite]'"
        ) from err
    macros.IMAGE_CONVENTION = "opencv"  # images upright (row 0 = top)
    return robosuite


def check(name: str) -> None:
    """Raise UnknownEnvironment (with the nearest tasks) if robosuite has no task `name`."""
    tasks = sorted(_suite().ALL_ENVIRONMENTS)
    if name in tasks:
        return
    close = difflib.get_close_matches(name, tasks, n=3)
    hint = f"did you mean {', '.join('robosuite:' + c for c in close)}? " if close else ""
    raise UnknownEnvironment(
        f"unknown environment 'robosuite:{name}'; {hint}tasks: {', '.join(tasks)}"
    )


def default_keys(num_robots: int) -> list[str]:
    """State mode's observation keys for a task with `num_robots` robots."""
    return [f"robot{i}_proprio-state" for i in range(num_robots)] + ["object-state"]


def cameras_of(keys: list[str]) -> list[str]:
    """Camera names requested through `<camera>_image` keys.

    Raises:
        ValueError: more than one image key, or an image key that is not the first key (the
            vision model reads the image from the front of the observation).
    """
    images = [k for k in keys if k.endswith(IMAGE_SUFFIX)]
    if len(images) > 1:
        raise ValueError(
            f"env.obs_keys asks for {len(images)} camera images {images}; "
            "use one, e.g. env.obs_keys=[agentview_image,robot0_proprio-state]"
        )
    if images and keys[0] != images[0]:
        raise ValueError(
            f"put the camera image first in env.obs_keys, e.g. "
            f"[{images[0]},{','.join(k for k in keys if k != images[0])}]"
        )
    return [k[: -len(IMAGE_SUFFIX)] for k in images]


def make(name: str, config: EnvConfig, seed: int | None, render: bool = False) -> RobosuiteEnv:
    """Build robosuite task `name` as a gymnasium env with Dict observations (the keys asked for)."""
    check(name)
    return RobosuiteEnv(name, config, seed, render)


class RobosuiteEnv(gymnasium.Env):
    """A robosuite task behind the gymnasium API.

    Observations are a Dict of exactly `config.obs_keys` (default: proprio-state + object-state);
    asking for `<camera>_image` turns on offscreen rendering from that camera at
    `config.robosuite.camera_size`. Episodes end by time limit only (`truncated`), after
    `config.max_episode_steps` steps or robosuite's horizon (1000).

    Raises:
        ValueError: an observation key the task does not have (the message lists them) or a
            camera the scene does not have.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self, task: str, config: EnvConfig, seed: int | None = None, render: bool = False
    ) -> None:
        rs = config.robosuite
        robots = list(rs.robots) or ["Panda"]
        self.keys = list(config.obs_keys or default_keys(len(robots)))
        cameras = cameras_of(self.keys)
        self.video_camera = cameras[0] if cameras else "agentview"
        self.video_size = rs.video_size
        kwargs = dict(
            robots=robots if len(robots) > 1 else robots[0],
            has_renderer=False,
            has_offscreen_renderer=bool(cameras) or render,
            use_camera_obs=bool(cameras),
            camera_names=cameras or "agentview",
            camera_heights=rs.camera_size,
            camera_widths=rs.camera_size,
            reward_shaping=rs.reward_shaping,
            control_freq=rs.control_freq,
            horizon=config.max_episode_steps or 1000,
            ignore_done=False,
            hard_reset=False,
            seed=seed,
        )
        try:
            self.env = _suite().make(task, **kwargs)
        except Exception as err:
            raise ValueError(
                f"robosuite:{task} with robots={robots}, cameras={cameras} failed: "
                f"{err}; check env.robosuite.robots and the camera in env.obs_keys "
                "(e.g. agentview_image, frontview_image, robot0_eye_in_hand_image)"
            ) from err
        if cameras and not render:
            fast_offscreen(self.env, rs.camera_size)
        obs = self.env.observation_spec()
        missing = [k for k in self.keys if k not in obs]
        if missing:
            cameras_here = ", ".join(self.env.sim.model.camera_names)
            self.env.close()
            raise ValueError(
                f"observation keys {missing} do not exist in robosuite:{task}; available: "
                f"{', '.join(sorted(obs))}; a camera image is `<camera>_image` with a camera of "
                f"{cameras_here}. Fix env.obs_keys"
            )
        self.observation_space = spaces.Dict({k: _box(obs[k]) for k in self.keys})
        low, high = self.env.action_spec
        self.action_space = spaces.Box(
            low.astype(np.float32), high.astype(np.float32), dtype=np.float32
        )

    def _obs(self, obs: dict) -> dict[str, np.ndarray]:
        return {k: obs[k] for k in self.keys}

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        return self._obs(self.env.reset()), {}

    def step(self, action: np.ndarray) -> tuple:
        obs, reward, done, info = self.env.step(np.asarray(action, np.float64))
        return self._obs(obs), float(reward), False, bool(done), dict(info)

    def render(self) -> np.ndarray:
        """An RGB frame [video_size, video_size, 3] from the observation camera (or agentview)."""
        size = self.video_size
        frame = self.env.sim.render(width=size, height=size, camera_name=self.video_camera)
        return np.ascontiguousarray(frame[::-1])  # OpenGL rows start at the bottom

    def close(self) -> None:
        self.env.close()


def _box(value: np.ndarray) -> spaces.Box:
    value = np.asarray(value)
    if value.dtype == np.uint8:
        return spaces.Box(0, 255, value.shape, np.uint8)
    return spaces.Box(-np.inf, np.inf, value.shape, np.float32)


def fast_offscreen(env: Any, size: int) -> None:
    """Offscreen settings for speed: no multisampling, no reflections, a size x size buffer.

    Measured here: these raise camera-mode steps/s from ~10 to ~30 (bench/robosuite_bench.py).
    """
    import mujoco

    model = env.sim.model
    model.vis.quality.offsamples = 0
    model.vis.global_.offwidth = size
    model.vis.global_.offheight = size
    context = env.sim._render_context_offscreen
    if context is None:
        return
    context.con.free()
    context._set_mujoco_context_and_buffers()  # re-create the framebuffer with the new settings
    context.scn.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
