"""surreal's single-process TD3 loop against CleanRL's loop around the same update
(td3_continuous_action.py, as bench/peers/cleanrl_td3.py runs it), on HalfCheetah-v5, driven by
the same random draws: warm-up actions, exploration noise, replay samples and target smoothing.
Issue 49 measured surreal's TD3 below CleanRL's file; test_td3_reference pins the update and
the replay's batches, this pins the loop's glue: the actions taken and stored, the noise, the
episode ends (a time limit inside the run, bootstrapped, then a reset) and the update schedule.

One difference is left on purpose and written into the reference: CleanRL takes
`learning_starts - 1` random steps and updates from step `learning_starts + 1`; surreal takes
`replay_start` random steps and updates from the `replay_start`-th transition on.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
gym = pytest.importorskip("gymnasium")
pytest.importorskip("mujoco")

from surreal.algos.ddpg.config import TD3Config  # noqa: E402
from surreal.algos.ddpg.learning import DDPG  # noqa: E402
from surreal.algos.ddpg.loop import LoopDraws, train  # noqa: E402
from tests.surreal.test_td3_reference import Reference, cleanrl_replay_class, flat  # noqa: E402

pytestmark = pytest.mark.timeout(300)

ENV, OBS, ACT, SEED = "HalfCheetah-v5", 17, 6, 3
# the time limit (1,000 steps) falls after 50 updates, 60 more follow on the next episode. Longer
# runs part by floating point alone: the two updates round differently (mse_loss against a mean
# of squares), ~4e-9 in an action after 12 updates, ~4e-3 after 400 (HalfCheetah is chaotic)
START, STEPS = 951, 1_060


class TorchNoise:
    """CleanRL's exploration noise, N(0, 0.1) from torch's generator, as a surreal noise process."""

    def __call__(self) -> np.ndarray:
        return torch.normal(0.0, torch.full((ACT,), 0.1)).numpy()

    def reset(self) -> None:
        """No state between steps."""


def _space() -> gym.spaces.Box:
    """HalfCheetah's action space, seeded as CleanRL seeds its env's (its warm-up's draws)."""
    space = gym.spaces.Box(-1.0, 1.0, (ACT,), np.float32)
    space.seed(SEED)
    return space


def _cleanrl_loop(config: TD3Config) -> tuple[Reference, int]:
    """CleanRL's loop (surreal's warm-up boundary, see the module docstring) on surreal's
    starting networks; returns the reference learner and its update count."""
    ref, space = Reference(DDPG(OBS, ACT, config, SEED)), _space()  # the same torch draws
    replay = cleanrl_replay_class()(capacity=10_000, obs_dim=OBS, act_dim=ACT)
    rng, env = np.random.default_rng(SEED), gym.make(ENV)
    obs, _ = env.reset(seed=SEED)
    updates = 0
    for step in range(1, STEPS + 1):
        if step <= START:
            action = space.sample()
        else:
            with torch.no_grad():
                action = ref.actor(torch.tensor(obs[None], dtype=torch.float32))[0]
                action += torch.normal(0.0, torch.full((ACT,), 0.1))
                action = action.numpy().clip(-1.0, 1.0)
        next_obs, reward, term, trunc, _ = env.step(action)
        replay.add(step, obs=obs, next=next_obs, act=action, rew=reward, term=term)
        obs = next_obs
        if term or trunc:
            obs, _ = env.reset()
        if step >= START:
            updates += 1  # CleanRL's `global_step % policy_frequency` on this count
            data = {k: torch.from_numpy(v) for k, v in replay.sample(rng, 64).items()}
            ref.update(updates, data["obs"], data["act"], data["rew"], data["next"], data["term"])
    env.close()
    return ref, updates


def test_surreals_td3_loop_is_cleanrls_for_the_same_draws():
    config = TD3Config(lr=3e-4, n_step=1, hidden=(64, 64), batch_size=64, replay_start=START)
    warmup = _space()
    draws = LoopDraws(warmup=lambda step: warmup.sample(), noise=TorchNoise())
    start = flat(DDPG(OBS, ACT, config, SEED).actor).clone()
    algo, result = train(ENV, config, STEPS, seed=SEED, eval_every=10**9, draws=draws)
    ref, updates = _cleanrl_loop(config)
    assert result.updates == updates == STEPS - START + 1
    assert (flat(ref.actor) - start).abs().max() > 1e-2  # both learned: not two starts compared
    # they agree to ~1.5e-8; a reference that ends the episode at the time limit as if it
    # terminated (discount 0 on that one transition) is 4e-5 away, noise 0.11 is 9e-4 away
    ref.assert_matches(algo)
