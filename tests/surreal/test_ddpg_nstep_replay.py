"""n-step returns against a plain reference loop; uniform replay storage, sampler and de-duplication."""

from __future__ import annotations

import numpy as np
import pytest

from surreal.algos.ddpg.nstep import NStepWriter, pack_chunk
from surreal.runtime.processes.replay_uniform import UniformSampler, UniformStorage

pytestmark = pytest.mark.timeout(60)


def _trajectory(rng, length: int, ends: dict[int, str]):
    """Steps (obs, act, rew, next_obs, terminated, truncated); `ends` marks episode ends."""
    steps, obs = [], rng.normal(size=3)
    for t in range(length):
        nxt = rng.normal(size=3)
        kind = ends.get(t)
        steps.append(
            (obs, rng.normal(size=2), float(rng.normal()), nxt, kind == "term", kind == "trunc")
        )
        obs = rng.normal(size=3) if kind else nxt
    return steps


def _reference(steps, n: int, gamma: float):
    """For each t: sum_{k<m} gamma^k r_{t+k}, the obs m steps on, and gamma^m (0 if terminated)."""
    out = []
    for t in range(len(steps)):
        ret, k = 0.0, 0
        while True:
            ret += gamma**k * steps[t + k][2]
            k += 1
            _, _, _, nxt, term, trunc = steps[t + k - 1]
            if term or trunc or k == n:
                out.append((ret, nxt, 0.0 if term else gamma**k))
                break
    return out


@pytest.mark.parametrize("n", [1, 3, 5])
def test_nstep_writer_matches_reference_loop(n):
    rng = np.random.default_rng(n)
    steps = _trajectory(rng, 40, {6: "term", 17: "trunc", 19: "term", 39: "trunc"})
    writer, got = NStepWriter(n, 0.9), []
    for s in steps:
        got.extend(writer.step(*s))
    want = _reference(steps, n, 0.9)
    assert len(got) == len(want) == len(steps)
    for t, (tr, (ret, nxt, disc)) in enumerate(zip(got, want, strict=True)):
        assert tr.obs is steps[t][0] or np.array_equal(tr.obs, steps[t][0])
        assert tr.ret == pytest.approx(ret)
        assert np.array_equal(tr.next_obs, nxt)
        assert tr.discount == pytest.approx(disc)


def test_nstep_holds_back_until_n_steps_are_known():
    writer = NStepWriter(3, 0.99)
    rng = np.random.default_rng(0)
    steps = _trajectory(rng, 4, {})
    assert writer.step(*steps[0]) == [] and writer.step(*steps[1]) == []
    assert len(writer.step(*steps[2])) == 1


def test_dedup_chunk_stores_each_observation_once_and_round_trips():
    rng = np.random.default_rng(1)
    steps = _trajectory(rng, 30, {12: "term"})
    writer, trans = NStepWriter(3, 0.99), []
    for s in steps:
        trans.extend(writer.step(*s))
    plain, dedup = pack_chunk(trans), pack_chunk(trans, dedup=True)
    assert len(dedup["obs_table"]) < len(plain["obs"]) + len(plain["next_obs"])
    # 30 steps, 2 episodes: 31 distinct observations (each episode's last one too)
    assert len(dedup["obs_table"]) == 32
    a, b = UniformStorage(100), UniformStorage(100, dedup=True)
    a.add(plain)
    b.add(dedup)
    idx = np.arange(len(trans))
    for key in ("obs", "act", "rew", "next_obs", "discount"):
        np.testing.assert_array_equal(a.gather(idx)[key], b.gather(idx)[key])


def test_storage_keeps_the_newest_capacity_transitions():
    storage = UniformStorage(5)
    for i in range(3):
        storage.add(
            {
                "obs": np.full((3, 1), i, np.float32),
                "next_obs": np.zeros((3, 1), np.float32),
                "act": np.zeros((3, 1), np.float32),
                "rew": np.arange(3, dtype=np.float32) + 3 * i,
                "discount": np.ones(3, np.float32),
            }
        )
    assert len(storage) == 5 and storage.added == 9
    assert sorted(storage.gather(np.arange(5))["rew"].tolist()) == [4, 5, 6, 7, 8]


def test_sampler_waits_for_the_sampling_start_size():
    storage, sampler = UniformStorage(100), UniformSampler(start=10, seed=0)
    chunk = {
        "obs": np.zeros((6, 2), np.float32),
        "next_obs": np.zeros((6, 2), np.float32),
        "act": np.zeros((6, 1), np.float32),
        "rew": np.arange(6, dtype=np.float32),
        "discount": np.ones(6, np.float32),
    }
    storage.add(chunk)
    assert not sampler.ready(storage)
    with pytest.raises(RuntimeError, match="sampling-start"):
        sampler.sample(storage, 4)
    storage.add(chunk)
    batch = sampler.sample(storage, 4000)
    assert batch["obs"].shape == (4000, 2)
    counts = np.bincount(batch["rew"].astype(int), minlength=6)
    assert counts.min() > 4000 / 6 * 0.8  # uniform over what is stored


def test_dedup_never_samples_a_transition_whose_observation_was_overwritten():
    storage = UniformStorage(20, dedup=True, obs_capacity=25)
    sampler = UniformSampler(start=1, seed=0)
    rng = np.random.default_rng(2)
    for _ in range(20):  # chunks of one transition carry 2 observations: the obs ring evicts early
        writer = NStepWriter(1, 0.9)
        obs = rng.normal(size=3)
        tr = writer.step(obs, np.zeros(1), 1.0, obs + 100, True, False)
        storage.add(pack_chunk(tr, dedup=True))
    batch = sampler.sample(storage, 500)
    np.testing.assert_allclose(batch["next_obs"] - batch["obs"], 100.0, rtol=1e-5)
