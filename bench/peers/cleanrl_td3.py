"""CleanRL's `td3_continuous_action.py`, its algorithm and defaults, printing progress as JSON lines.

Written to CleanRL's published file (vwxyzjn/cleanrl, td3_continuous_action.py): 1 env, 25,000
uniformly random steps before learning, then one critic update per env step (twin critics,
target policy smoothing noise 0.2 clipped at 0.5), actor and targets every 2nd update, tau 0.005,
gamma 0.99, batch 256, lr 3e-4 for both Adams, exploration noise 0.1 x action scale, 256x256 ReLU
networks, a 1M-transition replay. The replay is a numpy ring sampled uniformly (CleanRL uses
stable-baselines3's ReplayBuffer, also uniform; sb3 is not installed here); time-limit ends are
not treated as terminal, as there. Progress goes to stdout as JSON lines: `{"t", "step"}` every
1,000 env steps or 1 s (each step after `learning_starts` is one update) and `{"t", "step", "return"}`
per finished episode. `--checkpoint F` lets a long run stop and resume, `--eval-episodes N` ends
it with a greedy evaluation (bench/peers/cleanrl_common.py; neither is in CleanRL's file).

    python bench/peers/cleanrl_td3.py --env HalfCheetah-v5 --seconds 60 --threads 1
"""

from __future__ import annotations

import numpy as np
from cleanrl_common import Loop, Replay, emit, load, parser, save, soft_update


def main() -> None:
    a = parser(__doc__, learning_starts=25_000).parse_args()
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
    replay = Replay(min(1_000_000, a.total_timesteps), obs_dim, act_dim)
    nets = {"actor": actor, "qf1": qf1, "qf2": qf2, "actor_t": actor_t, "qf1_t": qf1_t}
    nets |= {"qf2_t": qf2_t, "q_opt": q_opt, "actor_opt": actor_opt}
    state = load(a.checkpoint, replay, rng)
    first = 1
    if state:
        for k, m in nets.items():
            m.load_state_dict(state[k])
        first = state["step"] + 1

    def checkpoint(step: int) -> None:
        save(
            a.checkpoint, {"step": step} | {k: m.state_dict() for k, m in nets.items()}, replay, rng
        )

    obs, _ = env.reset(seed=a.seed + first - 1)
    loop = Loop(a, checkpoint)
    emit(step=first - 1, event="start")
    step = first - 1
    for step in range(first, a.total_timesteps + 1):
        if step < a.learning_starts:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                action = actor(torch.tensor(obs[None], dtype=torch.float32))[0]
                action += torch.normal(0.0, scale * expl_noise)
                action = action.numpy().clip(low, high)
        next_obs, reward, term, trunc, info = env.step(action)
        replay.add(step, obs=obs, next=next_obs, act=action, rew=reward, term=term)
        obs = next_obs
        if term or trunc:
            emit(step=step, **{"return": float(info["episode"]["r"])})
            obs, _ = env.reset()
        if step > a.learning_starts:
            data = {k: torch.from_numpy(v) for k, v in replay.sample(rng, batch).items()}
            o, o2, act, r, d = (data[k] for k in Replay.FIELDS)
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
                soft_update(((actor_t, actor), (qf1_t, qf1), (qf2_t, qf2)), tau)
        ended = loop.after(step)
        if ended == "stopped":
            return
        if ended:
            break

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return actor(torch.tensor(o[None], dtype=torch.float32))[0].numpy()

    loop.finish(step, env, greedy)


if __name__ == "__main__":
    main()
