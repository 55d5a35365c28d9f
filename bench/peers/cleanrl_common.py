"""What the CleanRL off-policy peer files share: JSON progress lines, a numpy replay ring, a
checkpoint that lets a long run stop (SIGINT/SIGTERM) and resume in a later sitting, and a greedy
evaluation at the end.

None of this is in CleanRL's files (they run to the end in one go and evaluate with exploration
noise): it is what a 300k-1M step run on two shared cores needs, and it does not touch the
algorithm. A resumed run starts a fresh episode (the env's state is not saved) and keeps its
replay, networks, optimizers and random generators.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

import numpy as np


def emit(**fields: object) -> None:
    print(json.dumps({"t": round(time.time(), 3), **fields}), flush=True)


def parser(doc: str, learning_starts: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--seconds", type=float, default=60.0, help="stop after this much wall time")
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--learning-starts", type=int, default=learning_starts)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--checkpoint",
        type=Path,
        help="resume from this file if it exists; save to it every --checkpoint-every steps, "
        "on SIGINT/SIGTERM and at the end",
    )
    p.add_argument("--checkpoint-every", type=int, default=50_000)
    p.add_argument(
        "--eval-episodes",
        type=int,
        default=0,
        help="greedy episodes (no exploration) at the end, printed as {'eval': mean}",
    )
    return p


class Replay:
    """A uniform ring of (obs, next obs, action, reward, terminal), CleanRL's buffer's fields."""

    FIELDS = ("obs", "next", "act", "rew", "term")

    def __init__(self, capacity: int, obs_dim: int, act_dim: int) -> None:
        self.capacity, self.size = capacity, 0
        shapes = {"obs": obs_dim, "next": obs_dim, "act": act_dim}
        self.arrays = {
            k: np.zeros((capacity, shapes[k]) if k in shapes else capacity, np.float32)
            for k in self.FIELDS
        }

    def add(self, step: int, **row: np.ndarray | float) -> None:
        i = (step - 1) % self.capacity
        for k in self.FIELDS:
            self.arrays[k][i] = row[k]
        self.size = min(self.size + 1, self.capacity)

    def sample(self, rng: np.random.Generator, batch: int) -> dict[str, np.ndarray]:
        idx = rng.integers(0, self.size, batch)
        return {k: v[idx] for k, v in self.arrays.items()}


class Stop:
    """SIGINT/SIGTERM ask the loop to save and stop at its next step."""

    def __init__(self) -> None:
        self.asked = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._ask)

    def _ask(self, signum: int, frame: object) -> None:
        self.asked = True


class Loop:
    """What both files do after each env step: a checkpoint every `--checkpoint-every` steps,
    save and stop on SIGINT/SIGTERM, a progress line every 1,000 steps or 1 s, and the end of
    `--seconds`. `after(step)` returns "stopped", "time" or None (go on)."""

    def __init__(self, a: argparse.Namespace, checkpoint) -> None:
        self.a, self.checkpoint, self.stop = a, checkpoint, Stop()
        self.start = self.last = time.time()

    def after(self, step: int) -> str | None:
        if step % self.a.checkpoint_every == 0:
            self.checkpoint(step)
        if self.stop.asked:
            self.checkpoint(step)
            emit(step=step, event="stopped")
            return "stopped"
        if step % 1000 == 0 or time.time() - self.last > 1.0:
            emit(step=step)
            self.last = time.time()
            if self.last - self.start > self.a.seconds:
                return "time"
        return None

    def finish(self, step: int, env, act) -> None:
        """The end of a run that was not stopped: close its env, write the last checkpoint (if
        the last step did not) and evaluate `act(obs) -> action` greedily (`greedy_eval`)."""
        env.close()
        if step % self.a.checkpoint_every:
            self.checkpoint(step)
        greedy_eval(self.a.env, act, self.a.eval_episodes, self.a.seed, step)


def soft_update(pairs, tau: float) -> None:
    """Polyak averaging of each (target, source) pair of torch modules, as CleanRL writes it."""
    for target, source in pairs:
        for tp, sp in zip(target.parameters(), source.parameters(), strict=True):
            tp.data.copy_(tau * sp.data + (1 - tau) * tp.data)


def save(path: Path | None, state: dict, replay: Replay, rng: np.random.Generator) -> None:
    """torch state (networks, optimizers, counters) to PATH and the replay to PATH.npz, each
    written to a temporary file and renamed, so a stop mid-save leaves the previous pair."""
    if path is None:
        return
    import torch

    state = state | {
        "np_rng": json.dumps(rng.bit_generator.state),
        "torch_rng": torch.get_rng_state(),
        "replay_size": replay.size,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, **replay.arrays)
    os.replace(tmp, path.with_name(path.name + ".npz"))
    tmp = path.with_name(path.name + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    emit(step=state["step"], event="saved")


def load(path: Path | None, replay: Replay, rng: np.random.Generator) -> dict | None:
    """The state saved at PATH (and the replay and generators restored), or None."""
    if path is None or not path.is_file():
        return None
    import torch

    state = torch.load(path, weights_only=True)
    with np.load(path.with_name(path.name + ".npz")) as saved:
        for k in Replay.FIELDS:  # a larger --total-timesteps than the saved run's: a longer ring
            replay.arrays[k][: len(saved[k])] = saved[k]
    replay.size = int(state["replay_size"])
    rng.bit_generator.state = json.loads(state["np_rng"])
    torch.set_rng_state(state["torch_rng"])
    emit(step=state["step"], event="resumed")
    return state


def greedy_eval(env_id: str, act, episodes: int, seed: int, step: int) -> None:
    """`episodes` episodes of `act(obs) -> action` (no exploration) on a fresh env after `step`
    env steps; prints {'eval': mean, 'std', 'episodes', 'step'}."""
    if episodes <= 0:
        return
    import gymnasium as gym

    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + 10_000 + i)
        total, done = 0.0, False
        while not done:
            obs, reward, term, trunc, _ = env.step(act(obs))
            total, done = total + float(reward), term or trunc
        returns.append(total)
    env.close()
    emit(eval=float(np.mean(returns)), std=float(np.std(returns)), episodes=episodes, step=step)
