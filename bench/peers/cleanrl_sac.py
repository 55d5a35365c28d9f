"""CleanRL's `sac_continuous_action.py`, its algorithm and defaults, printing progress as JSON lines.

Written to CleanRL's published file (vwxyzjn/cleanrl, sac_continuous_action.py) the way
cleanrl_td3.py is: 1 env, 5,000 uniformly random steps before learning, then one critic update
per env step (twin soft Q networks, lr 1e-3) and, every 2nd step, 2 actor updates (lr 3e-4) on the
same batch, each followed by an update of the automatically tuned entropy coefficient (target
entropy -|A|, lr 1e-3); target critics soft-updated every step (tau 0.005); gamma 0.99, batch 256,
256x256 ReLU networks, a tanh-squashed Gaussian policy whose log std is squashed into [-5, 2], a
1M-transition replay (a numpy ring sampled uniformly, as cleanrl_td3.py's). Progress lines,
`--checkpoint` and `--eval-episodes` (the greedy action is the squashed mean) are as in
cleanrl_td3.py (bench/peers/cleanrl_common.py).

    python bench/peers/cleanrl_sac.py --env HalfCheetah-v5 --seconds 60 --threads 1
"""

from __future__ import annotations

import numpy as np
from cleanrl_common import Loop, Replay, emit, load, parser, save, soft_update

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


def main() -> None:
    a = parser(__doc__, learning_starts=5_000).parse_args()
    import gymnasium as gym
    import torch
    import torch.nn.functional as F
    from torch import nn

    torch.set_num_threads(a.threads)
    gamma, tau, batch, policy_lr, q_lr, policy_freq = 0.99, 0.005, 256, 3e-4, 1e-3, 2
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    env = gym.wrappers.RecordEpisodeStatistics(gym.make(a.env))
    env.action_space.seed(a.seed)
    obs_dim = int(np.prod(env.observation_space.shape))
    act_dim = int(np.prod(env.action_space.shape))
    high, low = env.action_space.high, env.action_space.low
    scale = torch.tensor((high - low) / 2.0, dtype=torch.float32)
    bias = torch.tensor((high + low) / 2.0, dtype=torch.float32)

    def mlp(inputs: int, outputs: int) -> nn.Sequential:
        return nn.Sequential(
            nn.Linear(inputs, 256),
            nn.ReLU(),
            nn.Linear(256, 256),
            nn.ReLU(),
            nn.Linear(256, outputs),
        )

    class SoftQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(obs_dim + act_dim, 1)

        def forward(self, x, act):
            return self.net(torch.cat([x, act], 1))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.trunk = mlp(obs_dim, 256)[:-1]  # fc1, ReLU, fc2, ReLU
            self.mean, self.log_std = nn.Linear(256, act_dim), nn.Linear(256, act_dim)

        def forward(self, x):
            h = self.trunk(x)
            log_std = torch.tanh(self.log_std(h))
            log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
            return self.mean(h), log_std

        def get_action(self, x):
            mean, log_std = self(x)
            normal = torch.distributions.Normal(mean, log_std.exp())
            x_t = normal.rsample()
            y_t = torch.tanh(x_t)
            log_prob = normal.log_prob(x_t) - torch.log(scale * (1 - y_t.pow(2)) + 1e-6)
            return (
                y_t * scale + bias,
                log_prob.sum(1, keepdim=True),
                torch.tanh(mean) * scale + bias,
            )

    actor, qf1, qf2, qf1_t, qf2_t = Actor(), SoftQ(), SoftQ(), SoftQ(), SoftQ()
    qf1_t.load_state_dict(qf1.state_dict())
    qf2_t.load_state_dict(qf2.state_dict())
    q_opt = torch.optim.Adam([*qf1.parameters(), *qf2.parameters()], lr=q_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=policy_lr)
    target_entropy = -float(act_dim)
    log_alpha = torch.zeros(1, requires_grad=True)
    a_opt = torch.optim.Adam([log_alpha], lr=q_lr)
    replay = Replay(min(1_000_000, a.total_timesteps), obs_dim, act_dim)
    nets = {"actor": actor, "qf1": qf1, "qf2": qf2, "qf1_t": qf1_t, "qf2_t": qf2_t}
    nets |= {"q_opt": q_opt, "actor_opt": actor_opt, "a_opt": a_opt}
    state = load(a.checkpoint, replay, rng)
    first = 1
    if state:
        for k, m in nets.items():
            m.load_state_dict(state[k])
        with torch.no_grad():
            log_alpha.copy_(state["log_alpha"])
        first = state["step"] + 1
    alpha = log_alpha.exp().item()

    def checkpoint(step: int) -> None:
        saved = {"step": step, "log_alpha": log_alpha.detach().clone()}
        save(a.checkpoint, saved | {k: m.state_dict() for k, m in nets.items()}, replay, rng)

    obs, _ = env.reset(seed=a.seed + first - 1)
    loop = Loop(a, checkpoint)
    emit(step=first - 1, event="start")
    step = first - 1
    for step in range(first, a.total_timesteps + 1):
        if step < a.learning_starts:
            action = env.action_space.sample()
        else:
            with torch.no_grad():
                action = actor.get_action(torch.tensor(obs[None], dtype=torch.float32))[0]
            action = action[0].numpy()
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
                next_act, next_log_pi, _ = actor.get_action(o2)
                q_next = torch.min(qf1_t(o2, next_act), qf2_t(o2, next_act)) - alpha * next_log_pi
                target = r + (1 - d) * gamma * q_next.view(-1)
            q_loss = F.mse_loss(qf1(o, act).view(-1), target) + F.mse_loss(
                qf2(o, act).view(-1), target
            )
            q_opt.zero_grad()
            q_loss.backward()
            q_opt.step()
            if step % policy_freq == 0:
                for _ in range(policy_freq):  # CleanRL's delayed updates, made up for at once
                    pi, log_pi, _ = actor.get_action(o)
                    actor_loss = (alpha * log_pi - torch.min(qf1(o, pi), qf2(o, pi))).mean()
                    actor_opt.zero_grad()
                    actor_loss.backward()
                    actor_opt.step()
                    with torch.no_grad():
                        _, log_pi, _ = actor.get_action(o)
                    alpha_loss = (-log_alpha.exp() * (log_pi + target_entropy)).mean()
                    a_opt.zero_grad()
                    alpha_loss.backward()
                    a_opt.step()
                    alpha = log_alpha.exp().item()
            soft_update(((qf1_t, qf1), (qf2_t, qf2)), tau)
        ended = loop.after(step)
        if ended == "stopped":
            return
        if ended:
            break

    def greedy(o: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return actor.get_action(torch.tensor(o[None], dtype=torch.float32))[2][0].numpy()

    loop.finish(step, env, greedy)


if __name__ == "__main__":
    main()
