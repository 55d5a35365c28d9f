"""CleanRL's ppo.py for discrete actions, condensed: the outside reference for surreal's PPO.

Same network, initialization, GAE, clipped losses and Adam settings as CleanRL's
`ppo.py` (gymnasium's SyncVectorEnv with same-step autoreset as in gym 0.29, time limits treated as ends, no observation normalization), with
the batch shape and hyperparameters as arguments so `bench/ppo_reference.py` can run both side
by side with equal settings.

    python bench/cleanrl_ppo.py --num-envs 4 --num-steps 128 --lr 2.5e-4 --steps 100000
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def run(
    env_id: str = "CartPole-v1",
    num_envs: int = 4,
    num_steps: int = 128,
    steps: int = 100_000,
    seed: int = 1,
    lr: float = 2.5e-4,
    anneal_lr: bool = True,
    update_epochs: int = 4,
    num_minibatches: int = 4,
    ent_coef: float = 0.01,
    gamma: float = 0.99,
    gae_lambda: float = 0.95,
    clip_coef: float = 0.2,
    eval_every: int = 10_000,
) -> dict:
    """One CleanRL PPO run; returns curves {train: [(step, mean return)], eval: [(step, mean)]}."""
    import gymnasium as gym
    import torch
    from torch import nn
    from torch.distributions import Categorical

    torch.set_num_threads(1)
    torch.manual_seed(seed)
    np.random.seed(seed)
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make(env_id) for _ in range(num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,  # gym 0.29's, which CleanRL was written for
    )
    obs_dim, n_act = envs.single_observation_space.shape[0], envs.single_action_space.n

    def layer(i: int, o: int, std: float = np.sqrt(2)) -> nn.Linear:
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, std)
        nn.init.constant_(lin.bias, 0.0)
        return lin

    critic = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1))
    actor = nn.Sequential(
        layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, n_act, 0.01)
    )
    params = list(critic.parameters()) + list(actor.parameters())
    opt = torch.optim.Adam(params, lr=lr, eps=1e-5)
    batch = num_envs * num_steps
    mb = batch // num_minibatches
    obs_buf = torch.zeros((num_steps, num_envs, obs_dim))
    act_buf = torch.zeros((num_steps, num_envs))
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((num_steps, num_envs)) for _ in range(4))
    next_obs = torch.tensor(envs.reset(seed=seed)[0], dtype=torch.float32)
    next_done = torch.zeros(num_envs)
    ep_ret = np.zeros(num_envs)
    eval_env = gym.make(env_id)
    train, evals, recent, step, next_eval = [], [], [], 0, 0
    for it in range(steps // batch):
        if anneal_lr:
            opt.param_groups[0]["lr"] = (1.0 - it / (steps // batch)) * lr
        for t in range(num_steps):
            step += num_envs
            obs_buf[t], done_buf[t] = next_obs, next_done
            with torch.no_grad():
                dist = Categorical(logits=actor(next_obs))
                action = dist.sample()
                val_buf[t] = critic(next_obs).flatten()
            act_buf[t], logp_buf[t] = action, dist.log_prob(action)
            o, r, term, trunc, info = envs.step(action.numpy())
            rew_buf[t] = torch.tensor(r, dtype=torch.float32)
            next_obs = torch.tensor(o, dtype=torch.float32)
            next_done = torch.tensor(np.logical_or(term, trunc), dtype=torch.float32)
            ep_ret += r
            recent.extend(ep_ret[np.logical_or(term, trunc)].tolist())
            ep_ret[np.logical_or(term, trunc)] = 0.0
        with torch.no_grad():
            next_value = critic(next_obs).flatten()
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(num_envs)
            for t in reversed(range(num_steps)):
                nonterm = 1.0 - (next_done if t == num_steps - 1 else done_buf[t + 1])
                nv = next_value if t == num_steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + gamma * nv * nonterm - val_buf[t]
                last = delta + gamma * gae_lambda * nonterm * last
                adv[t] = last
            ret = adv + val_buf
        b_obs, b_act = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1)
        b_logp, b_adv, b_ret, b_val = (x.reshape(-1) for x in (logp_buf, adv, ret, val_buf))
        for _ in range(update_epochs):
            perm = torch.randperm(batch)
            for start in range(0, batch, mb):
                i = perm[start : start + mb]
                dist = Categorical(logits=actor(b_obs[i]))
                logratio = dist.log_prob(b_act[i].long()) - b_logp[i]
                ratio = logratio.exp()
                a = b_adv[i]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
                v = critic(b_obs[i]).flatten()
                v_clip = b_val[i] + (v - b_val[i]).clamp(-clip_coef, clip_coef)
                v_loss = 0.5 * torch.max((v - b_ret[i]) ** 2, (v_clip - b_ret[i]) ** 2).mean()
                loss = pg - ent_coef * dist.entropy().mean() + 0.5 * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                opt.step()
        if len(recent) >= 10:
            train.append((step, float(np.mean(recent))))
            recent = []
        if step >= next_eval:
            evals.append((step, _greedy_return(eval_env, actor, seed + it)))
            next_eval = step + eval_every
    return {"train": train, "eval": evals}


def _greedy_return(env, actor, seed: int, episodes: int = 10) -> float:
    import torch

    total = 0.0
    for e in range(episodes):
        o, _ = env.reset(seed=seed * 100 + e)
        done = False
        while not done:
            with torch.no_grad():
                a = int(actor(torch.tensor(o, dtype=torch.float32)).argmax())
            o, r, term, trunc, _ = env.step(a)
            total += float(r)
            done = term or trunc
    return total / episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--lr", type=float, default=2.5e-4)
    parser.add_argument("--ent-coef", type=float, default=0.01)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    args = parser.parse_args()
    from ppo_reference import summarize  # bench/ is the script's folder

    for seed in args.seeds:
        t0 = time.monotonic()
        curves = run(
            args.env,
            args.num_envs,
            args.num_steps,
            args.steps,
            seed,
            args.lr,
            ent_coef=args.ent_coef,
        )
        print(f"cleanrl seed={seed} {summarize(curves, 475)} wall={time.monotonic() - t0:.0f}s")
        print("  eval:", [(s // 1000, round(v)) for s, v in curves["eval"]], flush=True)


if __name__ == "__main__":
    main()
