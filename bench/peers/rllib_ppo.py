"""RLlib PPO (new API stack) on one machine, printing progress as JSON lines; runs in the rllib venv.

Settings follow CleanRL's PPO where RLlib has the knob: 2048 env steps per training iteration,
10 epochs of 64-step minibatches (32 per epoch), lr 3e-4, GAE(0.99, 0.95), clip 0.2, no entropy
bonus, grad clip 0.5, 64x64 tanh networks, observation normalization (MeanStdFilter). Env
runners: `--runners` processes with `--envs` envs each; 1 local learner; torch threads per
process `--threads`. After each `train()`: `{"t", "step": num_env_steps_sampled_lifetime}`, and
`{"t", "step", "return"}` with the iteration's mean episode return when one finished.

    bench/out/venvs/rllib/bin/python bench/peers/rllib_ppo.py --seconds 60 --threads 1
"""

from __future__ import annotations

import argparse
import json
import os
import time


def emit(**fields: object) -> None:
    print(json.dumps({"t": round(time.time(), 3), **fields}), flush=True)


def find(result: dict, key: str):
    """The first value under `key` anywhere in RLlib's nested result dict."""
    if key in result:
        return result[key]
    for value in result.values():
        if isinstance(value, dict):
            found = find(value, key)
            if found is not None:
                return found
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="HalfCheetah-v5")
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runners", type=int, default=1)
    p.add_argument("--envs", type=int, default=1)
    a = p.parse_args()
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    import ray
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.connectors.env_to_module import MeanStdFilter
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    torch.set_num_threads(a.threads)
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    config = (
        PPOConfig()
        .environment(a.env)
        .env_runners(
            num_env_runners=a.runners,
            num_envs_per_env_runner=a.envs,
            env_to_module_connector=lambda env, spaces=None, device=None: MeanStdFilter(),
        )
        .learners(num_learners=0)
        .training(
            train_batch_size_per_learner=2048,
            minibatch_size=64,
            num_epochs=10,
            lr=3e-4,
            gamma=0.99,
            lambda_=0.95,
            clip_param=0.2,
            entropy_coeff=0.0,
            grad_clip=0.5,
            vf_clip_param=10.0,
        )
        .rl_module(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64], fcnet_activation="tanh"))
    )
    algo = config.build_algo()
    start = time.time()
    emit(step=0, event="start")
    while time.time() - start < a.seconds:
        result = algo.train()
        # Env steps sampled = env steps this synchronous PPO trained on (each train() learns from
        # exactly the batch it sampled). Not `num_env_steps_trained_lifetime`: RLlib 2.60 adds
        # every minibatch pass to it (666,672 after the first 2,048-step iteration here).
        step = find(result, "num_env_steps_sampled_lifetime")
        emit(step=int(step or 0))
        ret = find(result, "episode_return_mean")
        if ret is not None and ret == ret:
            emit(step=int(step or 0), **{"return": float(ret)})
    algo.stop()
    ray.shutdown()


if __name__ == "__main__":
    main()
