"""surreal's TD3 update against the reference update of CleanRL's td3_continuous_action.py
(the file bench/peers/cleanrl_td3.py runs), step for step: the same start, batches and noise
give the same networks. Issue 49 measured surreal's TD3 below CleanRL's file on HalfCheetah;
this pins that neither the update nor the replay's batches are where they differ."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torch.set_num_threads(1)

import torch.nn.functional as F  # noqa: E402

from surreal.algos.ddpg.config import TD3Config  # noqa: E402
from surreal.algos.ddpg.learning import DDPG  # noqa: E402
from surreal.algos.ddpg.nstep import NStepWriter, pack_chunk  # noqa: E402
from surreal.runtime.processes.replay_uniform import UniformSampler, UniformStorage  # noqa: E402

pytestmark = pytest.mark.timeout(120)

OBS, ACT, GAMMA = 17, 6, 0.99


def flat(*modules) -> torch.Tensor:
    """Every parameter of `modules`, in order, as one vector."""
    return torch.cat([p.detach().flatten() for m in modules for p in m.parameters()])


class Reference:
    """CleanRL's TD3 update (action scale 1, bias 0), on copies of surreal's starting networks."""

    def __init__(self, algo: DDPG) -> None:
        self.actor, self.actor_t = copy.deepcopy(algo.actor), copy.deepcopy(algo.actor_target)
        self.qf1, self.qf2 = copy.deepcopy(algo.critics[0]), copy.deepcopy(algo.critics[1])
        self.qf1_t = copy.deepcopy(algo.critics_target[0])
        self.qf2_t = copy.deepcopy(algo.critics_target[1])
        self.q_opt = torch.optim.Adam([*self.qf1.parameters(), *self.qf2.parameters()], lr=3e-4)
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=3e-4)

    def assert_matches(self, algo: DDPG) -> None:
        """surreal's actor, critics and their targets are this reference's, to 1e-6."""
        for mine, theirs in (
            ((algo.actor,), (self.actor,)),
            ((algo.actor_target,), (self.actor_t,)),
            (tuple(algo.critics), (self.qf1, self.qf2)),
            (tuple(algo.critics_target), (self.qf1_t, self.qf2_t)),
        ):
            torch.testing.assert_close(flat(*mine), flat(*theirs), rtol=1e-5, atol=1e-6)

    def update(self, step: int, o, act, r, o2, term) -> None:
        with torch.no_grad():
            clipped = (torch.randn_like(act) * 0.2).clamp(-0.5, 0.5)
            next_act = (self.actor_t(o2) + clipped).clamp(-1.0, 1.0)
            q_next = torch.min(self.qf1_t(o2, next_act), self.qf2_t(o2, next_act)).view(-1)
            target = r + (1 - term) * GAMMA * q_next
        q_loss = F.mse_loss(self.qf1(o, act).view(-1), target) + F.mse_loss(
            self.qf2(o, act).view(-1), target
        )
        self.q_opt.zero_grad()
        q_loss.backward()
        self.q_opt.step()
        if step % 2 == 0:
            actor_loss = -self.qf1(o, self.actor(o)).mean()
            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()
            for target_net, net in (
                (self.actor_t, self.actor),
                (self.qf1_t, self.qf1),
                (self.qf2_t, self.qf2),
            ):
                for tp, sp in zip(target_net.parameters(), net.parameters(), strict=True):
                    tp.data.copy_(0.005 * sp.data + 0.995 * tp.data)


def test_surreals_td3_update_is_cleanrls_step_for_step():
    algo = DDPG(OBS, ACT, TD3Config(lr=3e-4, n_step=1), seed=5)
    ref, start = Reference(algo), flat(algo.actor).clone()
    rng = np.random.default_rng(0)
    for step in range(1, 61):
        term = (rng.random(256) < 0.1).astype(np.float32)
        batch = {
            "obs": rng.normal(size=(256, OBS)).astype(np.float32),
            "act": rng.uniform(-1, 1, (256, ACT)).astype(np.float32),
            "rew": rng.normal(size=256).astype(np.float32),
            "next_obs": rng.normal(size=(256, OBS)).astype(np.float32),
            "discount": (GAMMA * (1 - term)).astype(np.float32),
        }
        torch.manual_seed(step)  # the same target-smoothing noise for both
        algo.update(batch)
        torch.manual_seed(step)
        t = {k: torch.from_numpy(v) for k, v in batch.items()}
        ref.update(step, t["obs"], t["act"], t["rew"], t["next_obs"], torch.from_numpy(term))
    assert algo.iteration == 60
    # the networks learned: the comparison below is not of two starts
    assert (flat(ref.actor) - start).abs().max() > 1e-3
    ref.assert_matches(algo)


def cleanrl_replay_class():
    path = Path(__file__).resolve().parents[2] / "bench" / "peers" / "cleanrl_common.py"
    spec = importlib.util.spec_from_file_location("cleanrl_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Replay


def test_surreals_replay_batches_are_cleanrls_for_the_same_draws():
    """1-step writer + ring + uniform sampler (surreal's single-process loop and replay shard)
    against the peer file's buffer, on episodes that terminate and that are truncated: the
    same random draws give the same batches (and discount = gamma x (1 - terminated))."""
    replay = cleanrl_replay_class()(capacity=500, obs_dim=OBS, act_dim=ACT)
    storage, writer = UniformStorage(500), NStepWriter(1, GAMMA)
    env_rng = np.random.default_rng(3)
    obs, length, ends = env_rng.normal(size=OBS), 0, {"term": 0, "trunc": 0}
    for step in range(1, 1_201):  # 1,200 steps into a ring of 500: it wraps twice
        act = env_rng.uniform(-1, 1, ACT).astype(np.float32)
        next_obs, rew = env_rng.normal(size=OBS), float(env_rng.normal())
        length += 1
        term, trunc = bool(env_rng.random() < 0.01), length == 50
        storage.add(pack_chunk(writer.step(obs, act, rew, next_obs, term, trunc)))
        replay.add(step, obs=obs, next=next_obs, act=act, rew=rew, term=term)
        ends["term"] += term
        ends["trunc"] += trunc and not term
        obs = next_obs
        if term or trunc:
            obs, length = env_rng.normal(size=OBS), 0
    assert ends["term"] > 3 and ends["trunc"] > 3  # both kinds of episode end are in the ring
    sampler, rng = UniformSampler(start=100, seed=7), np.random.default_rng(7)
    for _ in range(5):
        mine, theirs = sampler.sample(storage, 256), replay.sample(rng, 256)
        np.testing.assert_array_equal(mine["obs"], theirs["obs"])
        np.testing.assert_array_equal(mine["next_obs"], theirs["next"])
        np.testing.assert_array_equal(mine["act"], theirs["act"])
        np.testing.assert_array_equal(mine["rew"], theirs["rew"])
        np.testing.assert_allclose(mine["discount"], GAMMA * (1 - theirs["term"]), rtol=1e-6)
