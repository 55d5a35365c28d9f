"""CleanRL's `ppo_continuous_action.py`, its algorithm and defaults, printing progress as JSON lines.

Written to CleanRL's published file (vwxyzjn/cleanrl, ppo_continuous_action.py): 1 env, 2048 steps
per update, 10 epochs x 32 minibatches, lr 3e-4 annealed, GAE(0.99, 0.95), clip 0.2 with value
clipping, no entropy bonus, grad norm 0.5, 64x64 tanh actor and critic with orthogonal init and a
state-independent log std; the env wrappers ClipAction, NormalizeObservation (clipped to +-10),
NormalizeReward (clipped to +-10). Differences, both forced by gymnasium 1.x: same-step autoreset
is requested explicitly (CleanRL was written for gym 0.29's), and episode returns are read from
RecordEpisodeStatistics' vector info. Progress goes to stdout as JSON lines:
`{"t": unix time, "step": env steps consumed by updates}` after each update and
`{"t", "step", "return"}` per finished episode; `bench/peers/run.py` parses them.

    python bench/peers/cleanrl_ppo_continuous.py --env HalfCheetah-v5 --seconds 60 --threads 1
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
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    import gymnasium as gym
    import torch
    from torch import nn
    from torch.distributions.normal import Normal

    torch.set_num_threads(a.threads)
    lr, num_envs, num_steps, gamma, gae_lambda = 3e-4, 1, 2048, 0.99, 0.95
    num_minibatches, update_epochs, clip_coef, ent_coef, vf_coef, max_grad_norm = (
        32,
        10,
        0.2,
        0.0,
        0.5,
        0.5,
    )
    batch = num_envs * num_steps
    minibatch = batch // num_minibatches
    iterations = a.total_timesteps // batch
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)

    def make_env():
        env = gym.make(a.env)
        env = gym.wrappers.FlattenObservation(env)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = gym.wrappers.ClipAction(env)
        env = gym.wrappers.NormalizeObservation(env)
        env = gym.wrappers.TransformObservation(
            env, lambda o: np.clip(o, -10, 10), env.observation_space
        )
        env = gym.wrappers.NormalizeReward(env, gamma=gamma)
        return gym.wrappers.TransformReward(env, lambda r: float(np.clip(r, -10, 10)))

    envs = gym.vector.SyncVectorEnv(
        [make_env for _ in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    act_dim = int(np.prod(envs.single_action_space.shape))

    def layer(i, o, std=np.sqrt(2)):
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, std)
        nn.init.constant_(lin.bias, 0.0)
        return lin

    critic = nn.Sequential(
        layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0)
    )
    actor_mean = nn.Sequential(
        layer(obs_dim, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, act_dim, 0.01)
    )
    actor_logstd = nn.Parameter(torch.zeros(1, act_dim))
    params = [*critic.parameters(), *actor_mean.parameters(), actor_logstd]
    opt = torch.optim.Adam(params, lr=lr, eps=1e-5)

    def dist(x):
        mean = actor_mean(x)
        return Normal(mean, actor_logstd.expand_as(mean).exp())

    obs = torch.zeros((num_steps, num_envs, obs_dim))
    actions = torch.zeros((num_steps, num_envs, act_dim))
    logprobs, rewards, dones, values = (torch.zeros((num_steps, num_envs)) for _ in range(4))
    next_obs = torch.tensor(envs.reset(seed=a.seed)[0], dtype=torch.float32)
    next_done = torch.zeros(num_envs)
    global_step, start = 0, time.time()
    emit(step=0, event="start")
    for it in range(1, iterations + 1):
        if time.time() - start > a.seconds:
            break
        opt.param_groups[0]["lr"] = (1.0 - (it - 1.0) / iterations) * lr
        for t in range(num_steps):
            global_step += num_envs
            obs[t], dones[t] = next_obs, next_done
            with torch.no_grad():
                d = dist(next_obs)
                action = d.sample()
                values[t] = critic(next_obs).flatten()
            actions[t], logprobs[t] = action, d.log_prob(action).sum(1)
            o, r, term, trunc, info = envs.step(action.numpy())
            rewards[t] = torch.tensor(r, dtype=torch.float32)
            next_obs = torch.tensor(o, dtype=torch.float32)
            next_done = torch.tensor(np.logical_or(term, trunc), dtype=torch.float32)
            final = info.get("final_info", {})  # same-step autoreset: the last step's info
            if "episode" in final:
                for i in np.flatnonzero(final["_episode"]):
                    emit(step=global_step, **{"return": float(final["episode"]["r"][i])})
        with torch.no_grad():
            next_value = critic(next_obs).reshape(1, -1)
            adv = torch.zeros_like(rewards)
            last = 0
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    nonterm, nextvalues = 1.0 - next_done, next_value
                else:
                    nonterm, nextvalues = 1.0 - dones[t + 1], values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nonterm - values[t]
                adv[t] = last = delta + gamma * gae_lambda * nonterm * last
            returns = adv + values
        b_obs, b_act = obs.reshape(-1, obs_dim), actions.reshape(-1, act_dim)
        b_logp, b_adv, b_ret, b_val = (x.reshape(-1) for x in (logprobs, adv, returns, values))
        for _ in range(update_epochs):
            perm = np.random.permutation(batch)
            for s in range(0, batch, minibatch):
                i = perm[s : s + minibatch]
                d = dist(b_obs[i])
                ratio = (d.log_prob(b_act[i]).sum(1) - b_logp[i]).exp()
                mb_adv = (b_adv[i] - b_adv[i].mean()) / (b_adv[i].std() + 1e-8)
                pg = torch.max(
                    -mb_adv * ratio, -mb_adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)
                ).mean()
                v = critic(b_obs[i]).view(-1)
                v_clip = b_val[i] + (v - b_val[i]).clamp(-clip_coef, clip_coef)
                v_loss = 0.5 * torch.max((v - b_ret[i]) ** 2, (v_clip - b_ret[i]) ** 2).mean()
                loss = pg - ent_coef * d.entropy().sum(1).mean() + v_loss * vf_coef
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, max_grad_norm)
                opt.step()
        emit(step=global_step)
    envs.close()


if __name__ == "__main__":
    main()
