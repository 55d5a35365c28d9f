"""ES pieces: centered ranks, Adam, the shared noise table, the policy, the generation state."""

from __future__ import annotations

import os

import numpy as np
import pytest

from surreal.algos.es.config import ESConfig
from surreal.algos.es.generation import Generation
from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.numerics import Adam, RunningStat, centered_ranks
from surreal.algos.es.policy import ESPolicy
from surreal.algos.es.rollout import PairResult
from surreal.algos.es.state import ESState, es_gradient

pytestmark = pytest.mark.timeout(60)


class Box:
    def __init__(self, dim):
        self.shape, self.low, self.high = (
            (dim,),
            -2 * np.ones(dim, np.float32),
            2 * np.ones(dim, np.float32),
        )


class Discrete:
    n = 3


def test_centered_ranks_are_evenly_spaced_in_half_unit_interval():
    r = centered_ranks(np.array([[10.0, -3.0], [7.0, 1e9]]))
    assert r.shape == (2, 2)
    assert sorted(r.ravel().tolist()) == pytest.approx([-0.5, -1 / 6, 1 / 6, 0.5])
    assert r[1, 1] == pytest.approx(0.5) and r[0, 1] == pytest.approx(-0.5)


def test_adam_matches_torch_adam():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    theta = rng.normal(size=10).astype(np.float32)
    p = torch.nn.Parameter(torch.tensor(theta.copy()))
    opt, adam = torch.optim.Adam([p], lr=0.01), Adam(10, 0.01)
    for _ in range(5):
        g = rng.normal(size=10).astype(np.float32)
        p.grad = torch.tensor(g)
        opt.step()
        theta = adam.step(theta, g)
    np.testing.assert_allclose(theta, p.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_running_stat_merges_to_the_true_mean_and_std():
    x = np.random.default_rng(1).normal(3.0, 2.0, size=(5000, 4))
    stat = RunningStat(4)
    for part in np.array_split(x, 7):
        stat.add(part.sum(0), np.square(part).sum(0), len(part))
    np.testing.assert_allclose(stat.mean, x.mean(0), rtol=1e-3)
    np.testing.assert_allclose(stat.std, x.std(0), rtol=1e-2)


def test_noise_table_is_generated_once_per_machine_and_identical_from_the_seed(tmp_path):
    a = SharedNoiseTable(7, 100_000, tmp_path)
    b = SharedNoiseTable(7, 100_000, tmp_path)
    assert a.created and not b.created  # the second opener maps the first one's file
    assert a.path == b.path and os.path.getsize(a.path) == 400_000
    np.testing.assert_array_equal(a.get(10, 50), b.get(10, 50))
    (tmp_path / "other-machine").mkdir()
    other = SharedNoiseTable(7, 100_000, tmp_path / "other-machine")
    np.testing.assert_array_equal(other.get(0, 1000), a.get(0, 1000))  # same seed, same numbers
    assert abs(float(a.noise.std()) - 1.0) < 0.02
    with pytest.raises(ValueError, match="raise noise_size"):
        a.sample_index(np.random.default_rng(0), 200_000)
    a.unlink()
    assert not a.path.exists()


def test_a_noise_folder_that_is_not_there_is_named_in_the_error(tmp_path, monkeypatch):
    monkeypatch.setenv("SURREAL_NOISE_DIR", str(tmp_path / "typo"))
    with pytest.raises(ValueError, match="typo does not exist.*SURREAL_NOISE_DIR"):
        SharedNoiseTable(7, 1000)
    assert not (tmp_path / "typo").exists()  # nothing created in its place
    monkeypatch.setenv("SURREAL_NOISE_DIR", str(tmp_path))
    assert SharedNoiseTable(7, 1000).path.parent == tmp_path


def test_policy_shapes_discretization_and_action_noise():
    cont = ESPolicy(4, Box(2), (8, 8), action_std=0.01)
    theta = cont.init_params(0)
    assert theta.size == cont.num_params == 4 * 8 + 8 + 8 * 8 + 8 + 8 * 2 + 2
    layers, obs = cont.unflatten(theta), np.ones(4, np.float32)
    a0, a1 = cont.act(layers, obs, None), cont.act(layers, obs, np.random.default_rng(0))
    assert a0.shape == (2,) and np.all(np.abs(a0) <= 2)
    assert 0 < np.abs(a1 - a0).max() < 0.2  # std 0.01 in [-1,1] units, x2 for bounds [-2, 2]
    disc = ESPolicy(4, Box(2), (8, 8), discretize=10)
    a = disc.act(disc.unflatten(disc.init_params(0)), obs, np.random.default_rng(0))
    bins = -2 + (np.linspace(-1, 1, 10) + 1) * 2
    assert all(np.isclose(bins, v).any() for v in a)  # every component lands on a bin
    cat = ESPolicy(4, Discrete(), (8, 8))
    assert cat.act(cat.unflatten(cat.init_params(0)), obs, None) in (0, 1, 2)


def test_es_gradient_points_uphill_on_a_linear_objective(tmp_path):
    noise, dim = SharedNoiseTable(0, 50_000, tmp_path), 20
    direction = np.random.default_rng(0).normal(size=dim)
    rng = np.random.default_rng(1)
    idx = np.array([noise.sample_index(rng, dim) for _ in range(200)])
    eps = np.stack([noise.get(int(i), dim) for i in idx])
    grad = es_gradient(noise, idx, eps @ direction, -(eps @ direction), dim)
    cos = grad @ direction / np.linalg.norm(grad) / np.linalg.norm(direction)
    assert cos > 0.8


def test_generation_reissues_overdue_tasks_and_ignores_duplicates():
    gen = Generation(0, np.arange(3), task_timeout=5.0)
    assert [gen.next_task(0.0) for _ in range(3)] == [0, 1, 2]
    assert gen.next_task(1.0) is None  # all out, none overdue
    res = PairResult(1.0, 0.0, 10, np.zeros(2), np.zeros(2), 10)
    assert gen.submit(0, res) and gen.submit(2, res) and not gen.submit(2, res)
    assert gen.next_task(6.0) == 1 and gen.reissued == 1  # task 1's worker was lost
    assert gen.submit(1, res) and gen.complete
    assert gen.record()["indices"].tolist() == [0, 1, 2]


def test_generation_hands_a_released_task_out_first_and_only_once():
    gen = Generation(0, np.arange(4), task_timeout=3600.0)
    assert [gen.next_task(0.0) for _ in range(2)] == [0, 1]
    assert gen.release(1) and not gen.release(1) and not gen.release(3)  # 3 never handed out
    assert gen.next_task(0.0) == 1 and gen.next_task(0.0) == 2  # the dropped one first
    res = PairResult(1.0, 0.0, 10, np.zeros(2), np.zeros(2), 10)
    assert gen.submit(0, res) and not gen.release(0)  # answered tasks stay answered
    assert gen.released == 1 and gen.reissued == 0


def test_states_that_apply_the_same_records_stay_identical(tmp_path):
    cfg = ESConfig(hidden=(8,), population=4)
    noise = SharedNoiseTable(0, 10_000, tmp_path)
    theta = ESPolicy(3, Box(1), (8,)).init_params(0)
    a, b = ESState(theta, 3, cfg), ESState(theta, 3, cfg)
    rng = np.random.default_rng(0)
    for g in range(3):
        rec = {
            "generation": g,
            "indices": rng.integers(0, 9000, 4),
            "r_pos": rng.normal(size=4),
            "r_neg": rng.normal(size=4),
            "obs_sum": rng.normal(size=3),
            "obs_sumsq": np.ones(3) * 5,
            "obs_count": 4.0,
        }
        a.apply(rec, noise)
        b.apply(rec, noise)
    assert a.checksum() == b.checksum() and a.generation == 3
    assert not np.array_equal(a.theta, theta)
    c = ESState(theta, 3, cfg)
    c.load_wire(a.to_wire())
    np.testing.assert_array_equal(c.theta, a.theta)
    np.testing.assert_array_equal(c.obs_mean, a.obs_mean)
    with pytest.raises(ValueError, match="full sync"):
        c.apply({**rec, "generation": 0}, noise)
