"""CleanRL's `td3_continuous_action.py`, its algorithm and defaults, printing progress as JSON lines.

Written to CleanRL's published file (vwxyzjn/cleanrl, td3_continuous_action.py): 1 env, 25,000
uniformly random steps before learning, then one critic update per env step (twin critics,
target policy smoothing noise 0.2 clipped at 0.5), actor and targets every 2nd update, tau 0.005,
gamma 0.99, batch 256, lr 3e-4 for both Adams, exploration noise 0.1 x action scale, 256x256 ReLU
networks, a 1M-transition replay. The replay is a numpy ring sampled uniformly (CleanRL uses
stable-baselines3's ReplayBuffer, also uniform; sb3 is not installed here); time-limit ends are
not treated as terminal, as there. Progress goes to stdout as JSON lines: `{"t", "step"}` every
1,000 env steps or 1 s (each step after `learning_starts` is one update) and `{"t", "step", "return"}`
per finished episode.

    python bench/peers/cleanrl_td3.py --env HalfCheetah-v5 --seconds 60 --threads 1
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
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--seconds", type=float, default=60.0, help="stop after this much wall time")
    p.add_argument("--total-timesteps", type=int, default=1_000_000)
    p.add_argument("--learning-starts", type=int, default=25_000)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    import gymnasium as gym
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(a.threads)
    lr, gamma, tau, batch, policy_noise, noise_clip, expl_noise, policy_freq = (
        3e-4,
        0.99,
        0.005,
        256,
        0.2,
        0.5,
        0.1,
        2,
    )
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(a.env))
    env.action_space.seed(a.seed)
    obs_dim = int(np.prod(env.observation_space.shape))
    act_dim = int(np.prod(env.action_space.shape))
    high, low = env.action_space.high, env.action_space.low
    scale = torch.tensor((high - low) / 2.0, dtype=torch.float32)
    bias = torch.tensor((high + low) / 2.0, dtype=torch.float32)

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(obs_dim + act_dim, 256),
                nn.ReLU(),
                nn.Linear(256, 256),
                nn.ReLU(),
                nn.Linear(256, 1),
            )

        def forward(self, x, act):
            return self.net(torch.cat([x, act], 1))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(
                nn.Linear(obs_dim, 256),
                nn.ReLU(),
                nn.Linear(256, 256),
                nn.ReLU(),
                nn.Linear(256, act_dim),
                nn.Tanh(),
            )

        def forward(self, x):
            return self.net(x) * scale + bias

    actor, qf1, qf2 = Actor(), Q(), Q()
    actor_t, qf1_t, qf2_t = Actor(), Q(), Q()
    for target, src in ((actor_t, actor), (qf1_t, qf1), (qf2_t, qf2)):
        target.load_state_dict(src.state_dict())
    q_opt = torch.optim.Adam([*qf1.parameters(), *qf2.parameters()], lr=lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=lr)
    cap = min(1_000_000, a.total_timesteps)
    b_obs, b_next = np.zeros((cap, obs_dim), np.float32), np.zeros((cap, obs_dim), np.float32)
    b_act = np.zeros((cap, act_dim), np.float32)
    b_rew, b_term = np.zeros(cap, np.float32), np.zeros(cap, np.float32)
    obs, _ = env.reset(seed=a.seed)
    start = last_emit = time.time()
    emit(step=0, event="start")
    for step in range(1, a.total_timesteps + 1):
        if step < a.learning_starts:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                action = actor(torch.tensor(obs[None], dtype=torch.float32))[0]
                action += torch.normal(0.0, scale * expl_noise)
                action = action.numpy().clip(low, high)
        next_obs, reward, term, trunc, info = env.step(action)
        i = (step - 1) % cap
        b_obs[i], b_next[i], b_act[i], b_rew[i], b_term[i] = obs, next_obs, action, reward, term
        obs = next_obs
        if term or trunc:
            emit(step=step, **{"return": float(info["episode"]["r"])})
            obs, _ = env.reset()
        if step > a.learning_starts:
            idx = rng.integers(0, min(step, cap), batch)
            o, o2, act = (torch.from_numpy(x[idx]) for x in (b_obs, b_next, b_act))
            r, d = torch.from_numpy(b_rew[idx]), torch.from_numpy(b_term[idx])
            with torch.no_grad():
                clipped = (torch.randn_like(act) * policy_noise).clamp(
                    -noise_clip, noise_clip
                ) * scale
                next_act = (actor_t(o2) + clipped).clamp(torch.tensor(low), torch.tensor(high))
                q_next = torch.min(qf1_t(o2, next_act), qf2_t(o2, next_act)).view(-1)
                target = r + (1 - d) * gamma * q_next
            q_loss = F.mse_loss(qf1(o, act).view(-1), target) + F.mse_loss(
                qf2(o, act).view(-1), target
            )
            q_opt.zero_grad()
            q_loss.backward()
            q_opt.step()
            if step % policy_freq == 0:
                actor_loss = -qf1(o, actor(o)).mean()
                actor_opt.zero_grad()
                actor_loss.backward()
                actor_opt.step()
                for target_net, src in ((actor_t, actor), (qf1_t, qf1), (qf2_t, qf2)):
                    for tp, sp in zip(target_net.parameters(), src.parameters(), strict=True):
                        tp.data.copy_(tau * sp.data + (1 - tau) * tp.data)
        if step % 1000 == 0 or time.time() - last_emit > 1.0:
            emit(step=step)
            last_emit = time.time()
            if last_emit - start > a.seconds:
                break
    env.close()


if __name__ == "__main__":
    main()
