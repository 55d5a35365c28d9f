"""CleanRL's `dqn.py`, its algorithm and defaults, printing progress as JSON lines.

Written to CleanRL's published file (vwxyzjn/cleanrl, dqn.py): 1 env, a 120-84 ReLU Q-network,
Adam lr 2.5e-4, a 10,000-transition replay sampled uniformly (a numpy ring here; CleanRL uses
stable-baselines3's ReplayBuffer, not installed here), gamma 0.99, epsilon linear from 1.0 to
0.05 over half the budget, 10,000 steps before learning, then one update of batch 128 every 10
env steps (squared TD error, the target network's max), the target network copied every 500
steps (tau 1.0). Time-limit ends are not terminal, as there. Added for the comparison (not in
CleanRL's file): every `--eval-every` env steps, `--eval-episodes` greedy episodes on a second
env, reported as `{"t", "step", "eval"}` (their time is in the wall time). Progress goes to
stdout as JSON lines: `{"t", "step"}` every 1,000 env steps and `{"t", "step", "return"}` per
finished training episode.

    python bench/peers/cleanrl_dqn.py --total-timesteps 500000 --stop-at 475 --seed 1
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def emit(**fields: float) -> None:
    print(json.dumps({"t": round(time.time(), 3), **fields}), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--total-timesteps", type=int, default=500_000)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=10_000)
    p.add_argument("--eval-episodes", type=int, default=5)
    p.add_argument("--stop-at", type=float, default=None, help="stop once a greedy eval reaches it")
    a = p.parse_args()
    import gymnasium as gym
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(a.threads)
    lr, gamma, batch, buffer, start_e, end_e, fraction = 2.5e-4, 0.99, 128, 10_000, 1.0, 0.05, 0.5
    learning_starts, train_frequency, target_frequency = 10_000, 10, 500
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(a.env))
    env.action_space.seed(a.seed)
    eval_env = gym.make(a.env)
    obs_dim, n = int(np.prod(env.observation_space.shape)), int(env.action_space.n)

    def q_net() -> nn.Module:
        return nn.Sequential(
            nn.Linear(obs_dim, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, n)
        )

    q, q_target = q_net(), q_net()
    q_target.load_state_dict(q.state_dict())
    opt = torch.optim.Adam(q.parameters(), lr=lr)
    b_obs, b_next = np.zeros((buffer, obs_dim), np.float32), np.zeros((buffer, obs_dim), np.float32)
    b_act, b_rew = np.zeros(buffer, np.int64), np.zeros(buffer, np.float32)
    b_term = np.zeros(buffer, np.float32)

    def greedy(o: np.ndarray) -> int:
        with torch.no_grad():
            return int(q(torch.tensor(o[None], dtype=torch.float32)).argmax(1)[0])

    def evaluate() -> float:
        total = 0.0
        for episode in range(a.eval_episodes):
            o, _ = eval_env.reset(seed=10_000 + episode)
            done = False
            while not done:
                o, r, term, trunc, _ = eval_env.step(greedy(o))
                total, done = total + float(r), term or trunc
        return total / a.eval_episodes

    obs, _ = env.reset(seed=a.seed)
    emit(step=0, event="start")
    for step in range(1, a.total_timesteps + 1):
        epsilon = max(start_e + (end_e - start_e) * step / (fraction * a.total_timesteps), end_e)
        action = env.action_space.sample() if rng.random() < epsilon else greedy(obs)
        next_obs, reward, term, trunc, info = env.step(action)
        i = (step - 1) % buffer
        b_obs[i], b_next[i], b_act[i], b_rew[i], b_term[i] = obs, next_obs, action, reward, term
        obs = next_obs
        if term or trunc:
            emit(step=step, **{"return": float(info["episode"]["r"])})
            obs, _ = env.reset()
        if step > learning_starts and step % train_frequency == 0:
            idx = rng.integers(0, min(step, buffer), batch)
            o, o2 = torch.from_numpy(b_obs[idx]), torch.from_numpy(b_next[idx])
            act, r, d = (torch.from_numpy(x[idx]) for x in (b_act, b_rew, b_term))
            with torch.no_grad():
                target = r + gamma * q_target(o2).max(1).values * (1 - d)
            loss = F.mse_loss(q(o).gather(1, act[:, None]).squeeze(1), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if step > learning_starts and step % target_frequency == 0:
            q_target.load_state_dict(q.state_dict())
        if step % 1000 == 0:
            emit(step=step)
        if step % a.eval_every == 0:
            score = evaluate()
            emit(step=step, eval=score)
            if a.stop_at is not None and score >= a.stop_at:
                break
    env.close()


if __name__ == "__main__":
    main()
