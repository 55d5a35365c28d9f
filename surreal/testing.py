"""Shared test helpers: a fake batch, a tiny dict-observation env, and running the CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from surreal.api.spaces import EnvInfo
from symphony.testing import scaled


def fake_transitions(env_info: EnvInfo, n: int, seed: int = 0) -> dict[str, np.ndarray]:
    """`n` random transitions shaped like an off-policy replay sample (obs, act in [-1, 1],
    rew, next_obs, discount 0.99) for a continuous-action env."""
    rng = np.random.default_rng(seed)
    obs_dim = int(np.prod(env_info.obs_shape))
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "act": rng.uniform(-1, 1, (n, env_info.action_dim)).astype(np.float32),
        "rew": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "discount": np.full(n, 0.99, np.float32),
    }


def fake_segment_batch(
    env_info: EnvInfo, segments: int = 2, steps: int = 8, envs: int = 3, seed: int = 0
) -> dict[str, np.ndarray]:
    """A batch shaped like what actors send ([segments, steps, envs, ...]) with random content."""
    rng = np.random.default_rng(seed)
    shape = (segments, steps, envs)
    if env_info.discrete:
        action = rng.integers(0, env_info.num_actions, shape)
    else:
        action = rng.normal(size=(*shape, *env_info.action_shape)).astype(np.float32)
    terminated = rng.random(shape) < 0.05
    truncated = (rng.random(shape) < 0.02) & ~terminated
    return {
        "obs": rng.normal(size=(*shape, *env_info.obs_shape)).astype(np.float32),
        "action": action,
        "reward": rng.normal(size=shape).astype(np.float32),
        "terminated": terminated,
        "truncated": truncated,
        "final_value": np.where(truncated, rng.normal(size=shape), 0).astype(np.float32),
        "logprob": rng.normal(-1.0, 0.1, shape).astype(np.float32),
        "value": rng.normal(size=shape).astype(np.float32),
        "next_value": rng.normal(size=(segments, envs)).astype(np.float32),
        "version": np.zeros((segments, envs), np.int64),
    }


def dict_obs_env(max_steps: int = 5) -> Any:
    """A tiny gymnasium env with Dict observations (for the filter/concat wrapper)."""
    import gymnasium

    spaces = gymnasium.spaces

    class DictEnv(gymnasium.Env):
        observation_space = spaces.Dict(
            {
                "a": spaces.Box(-1, 1, (2,), np.float32),
                "b": spaces.Box(-1, 1, (3,), np.float32),
                "image": spaces.Box(0, 255, (4, 4, 3), np.uint8),
            }
        )
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self._obs(), {}

        def step(self, action):
            self.t += 1
            return self._obs(), 1.0, False, self.t >= max_steps, {}

        def _obs(self):
            return {
                "a": np.full(2, self.t, np.float32),
                "b": np.full(3, -self.t, np.float32),
                "image": np.zeros((4, 4, 3), np.uint8),
            }

    return DictEnv()


def surreal_cli(
    args: list[str], cwd: Path, home: Path, timeout: float | None = None, **kwargs: Any
) -> subprocess.CompletedProcess:
    """Run `python -m surreal ARGS` in `cwd` with symphony's state in `home`; `timeout` (default
    240 s of the reference machine: `symphony.testing.scaled`) guards against a hang."""
    timeout = scaled(240) if timeout is None else timeout
    env = dict(os.environ, SYMPHONY_HOME=str(home), PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-m", "surreal", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)  # like Ctrl-C: the launcher stops every process
        out, err = proc.communicate(timeout=60)
        raise AssertionError(
            f"surreal {' '.join(args)} ran past {timeout} s:\n{out}\n{err}"
        ) from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
