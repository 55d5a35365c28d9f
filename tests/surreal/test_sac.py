"""SAC: the squashed-Gaussian math, the soft target, temperature tuning, exact resume, the
actors' exploration hook, and `surreal launch sac` on DDPG's topology (dry run, Pendulum, kill -9)."""

from __future__ import annotations

import io
import json
import math
import os
import signal
import time

import numpy as np
import pytest
import torch

from surreal.algos import resolve
from surreal.algos.ddpg.config import DDPGConfig
from surreal.algos.ddpg.learner import DDPGPolicy
from surreal.algos.ddpg.noise import GaussianNoise
from surreal.algos.sac import SACConfig, SACLearner
from surreal.algos.sac.learner import SACPolicy
from surreal.algos.sac.learning import SAC
from surreal.algos.sac.networks import squashed_sample, tanh_log_det
from surreal.api.config import Config
from surreal.api.spaces import EnvInfo
from surreal.launch.experiment import plan
from surreal.launch.preflight import check_algorithm
from surreal.runtime.wire.policy_protocol import inference_methods
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import describe, processes_of, start_launch, status, wait_until

torch.set_num_threads(1)
pytestmark = pytest.mark.timeout(120)
PENDULUM = EnvInfo((3,), False, 0, (1,), (-2.0,), (2.0,))
SMALL = ["--set", "env.num_envs=1", "--set", "algo.hidden=64,64", "--set", "algo.batch_size=128"]


def _batch(rng, n=64, obs_dim=3, act_dim=1):
    return {
        "obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "act": rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
        "rew": rng.normal(size=n).astype(np.float32),
        "next_obs": rng.normal(size=(n, obs_dim)).astype(np.float32),
        "discount": np.full(n, 0.99, np.float32),
    }


def _assert_same(a, b, where="state"):
    """Nested dicts/lists of tensors and numbers, equal exactly (torch.equal for tensors)."""
    if isinstance(a, (dict, list, tuple)):
        keys = a.keys() if isinstance(a, dict) else range(len(a))
        assert keys == (b.keys() if isinstance(b, dict) else range(len(b))), where
        for k in keys:
            _assert_same(a[k], b[k], f"{where}[{k!r}]")
    else:
        assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b, where


def test_the_squashed_log_density_matches_the_numeric_derivative_of_its_cdf():
    """a = tanh(u), u ~ N(m, s): P(A <= a) = Phi((atanh(a) - m) / s); its derivative in a is
    the density whose log `squashed_sample` returns (the Gaussian's minus log(1 - a^2))."""
    mean, log_std = torch.tensor(0.3, dtype=torch.float64), torch.tensor(-0.4, dtype=torch.float64)
    gaussian = torch.distributions.Normal(mean, log_std.exp())
    a = torch.linspace(-0.97, 0.97, 41, dtype=torch.float64)[:, None]
    eps = (torch.atanh(a) - mean) / log_std.exp()
    act, logp = squashed_sample(mean.expand_as(a), log_std.expand_as(a), eps)
    torch.testing.assert_close(act, a)
    h = 1e-6
    numeric = (gaussian.cdf(torch.atanh(a + h)) - gaussian.cdf(torch.atanh(a - h))) / (2 * h)
    torch.testing.assert_close(logp.exp(), numeric[:, 0], rtol=1e-6, atol=0)
    # independent components: the log-density of a 2-d action is the sum of the two 1-d ones
    _, pair_logp = squashed_sample(
        torch.stack([mean, mean + 1]).expand(41, 2), log_std.expand(41, 2), eps.expand(41, 2)
    )
    one = squashed_sample((mean + 1).expand_as(a), log_std.expand_as(a), eps)[1]
    torch.testing.assert_close(pair_logp, logp + one)
    # large |u|: the stable form stays finite where log(1 - tanh(u)^2) is log(0)
    u = torch.tensor([-30.0, 30.0], dtype=torch.float64)
    assert torch.isinf(torch.log(1 - torch.tanh(u) ** 2)).all()
    torch.testing.assert_close(tanh_log_det(u), math.log(4.0) - 2 * u.abs())


def test_the_target_is_the_minimum_of_the_twin_target_critics_minus_alpha_log_pi():
    algo = SAC(3, 1, SACConfig(hidden=(16,), init_alpha=0.5))
    obs = torch.randn(8, 3)
    rew, disc = torch.ones(8), torch.tensor([0.0] * 4 + [0.5] * 4)
    with torch.no_grad():
        for p in algo.critics_target[1].parameters():
            p.add_(10.0)  # the second target critic much larger: the minimum must ignore it
        drawn = algo.generator.get_state()
        act, logp = algo.sample(obs)  # the a' ~ pi(.|o') target_q will draw
        q1, q2 = (q(obs, act) for q in algo.critics_target)
    assert (q2 > q1).all()
    algo.generator.set_state(drawn)
    y = algo.target_q(rew, obs, disc)
    torch.testing.assert_close(y, rew + disc * (torch.minimum(q1, q2) - 0.5 * logp))
    torch.testing.assert_close(y[:4], rew[:4])  # terminated: no bootstrap, no entropy term


@pytest.mark.parametrize("target, moves", [(None, "down"), (5.0, "up")])
def test_autotune_moves_log_alpha_toward_the_target_entropy(target, moves):
    """Default target -act_dim (-2): the fresh policy's entropy is above it, alpha falls; a
    target of 5 nats, above what a 2-d squashed action can have (2 log 2), makes alpha rise."""
    cfg = SACConfig(hidden=(32,), target_entropy=target)
    algo, rng = SAC(3, 2, cfg), np.random.default_rng(0)
    assert algo.target_entropy == (-2.0 if target is None else 5.0) and algo.log_alpha.item() == 0
    metrics = algo.update(_batch(rng, act_dim=2))
    assert abs(algo.log_alpha.item()) == pytest.approx(cfg.lr, rel=1e-3)  # Adam's first step
    for _ in range(20):
        metrics = algo.update(_batch(rng, act_dim=2))
    above = metrics["losses/entropy"] > algo.target_entropy
    assert above == (moves == "down")
    assert (algo.log_alpha.item() < 0) == (moves == "down")
    assert metrics["losses/alpha"] == pytest.approx(math.exp(algo.log_alpha.item()))
    fixed = SAC(3, 2, SACConfig(hidden=(32,), autotune=False, init_alpha=0.2))
    fixed.update(_batch(rng, act_dim=2))
    assert fixed.log_alpha.item() == pytest.approx(math.log(0.2))  # no tuning: alpha stays


def test_config_errors_name_the_setting_that_fixes_them(tmp_path):
    with pytest.raises(ValueError, match=r"--set algo.policy_smoothing=0"):
        SACConfig(policy_smoothing=0.2)
    with pytest.raises(ValueError, match=r"must be > 0.*--set algo.init_alpha="):
        SACConfig(init_alpha=0.0)
    with pytest.raises(ValueError, match=r"algo.n_step=0; it must be >= 1"):
        SACConfig(n_step=0)
    # a --set value reaches the same check before anything starts
    with pytest.raises(ValueError, match=r"--set algo.init_alpha="):
        plan("sac", env="gym:Pendulum-v1", overrides=("algo.init_alpha=-1",), folder=str(tmp_path))
    assert not list(tmp_path.iterdir())  # a refused launch writes nothing
    assert SACConfig().n_step == 1 and SACConfig().twin_critics is True
    assert SACConfig.family_defaults("mujoco") == {
        "algo.lr": 3e-4,
        "algo.replay_start": 5000,
        "env.num_envs": 1,
    }
    assert SACConfig.family_defaults("classic") == {}


def test_a_learner_state_dict_round_trip_makes_the_next_update_identical():
    """The checkpoint path (torch.save/load of `state_dict`) restores the networks, all three
    optimizers, log alpha and the noise generator: one more update on the same batch gives
    the same parameters and optimizer states, bit for bit, as the learner that never stopped."""
    cfg, rng = SACConfig(hidden=(32, 32), batch_size=64), np.random.default_rng(0)
    run = Config(algo=cfg)
    first = SACLearner.create(run, PENDULUM)
    for _ in range(5):
        first.learn(_batch(rng))
    assert first.algo.log_alpha.item() != 0 and first.algo.alpha_opt.state_dict()["state"]
    saved = io.BytesIO()
    torch.save(first.state_dict(), saved)
    saved.seek(0)
    second = SACLearner.create(run, PENDULUM)
    for _ in range(3):  # a learner elsewhere (other weights, moments, alpha), then restored
        second.learn(_batch(np.random.default_rng(9)))
    assert second.algo.log_alpha.item() != first.algo.log_alpha.item()
    second.load_state_dict(torch.load(saved, weights_only=False))
    _assert_same(second.state_dict(), first.state_dict())
    assert second.algo.alpha_opt.param_groups[0]["params"][0] is second.algo.log_alpha
    batch = _batch(rng)  # no reseeding: the policy's noise generator is in the state
    assert first.learn(batch) == second.learn(batch)
    _assert_same(second.state_dict(), first.state_dict())
    assert torch.equal(second.algo.log_alpha, first.algo.log_alpha)


def test_ddpg_explores_with_mu_plus_noise_and_sac_samples_its_policy():
    obs = np.random.default_rng(1).normal(size=(4, 3)).astype(np.float32)
    ddpg = DDPGPolicy(DDPGConfig(hidden=(16,)), PENDULUM)
    noises = [GaussianNoise(1, 0.5, seed=i) for i in range(4)]
    same = [GaussianNoise(1, 0.5, seed=i) for i in range(4)]
    greedy = ddpg.unit_action(obs, deterministic=True)
    expected = np.clip(greedy + np.stack([nz() for nz in same]), -1.0, 1.0).astype(np.float32)
    np.testing.assert_array_equal(ddpg.explore(ddpg.unit_action, obs, noises), expected)
    sac, asked = SACPolicy(SACConfig(hidden=(16,)), PENDULUM), []

    def unit_action(obs, deterministic=False):  # as a policy worker would answer it
        asked.append(deterministic)
        return sac.unit_action(obs, deterministic=deterministic)

    def never():
        raise AssertionError("SAC drew from an actor's noise process")

    unit = sac.explore(unit_action, obs, [never] * 4)
    assert asked == [False] and unit.shape == (4, 1) and unit.dtype == np.float32
    assert (np.abs(unit) < 1).all()
    assert not np.array_equal(unit, sac.unit_action(obs, deterministic=True))
    # with actor.inference=remote the worker serves unit_action; explore stays on the actor
    for policy in (ddpg, sac):
        methods = inference_methods(policy)
        assert "unit_action" in methods and "explore" not in methods


def test_with_remote_inference_the_policy_worker_draws_the_exploratory_sample():
    """`actor.inference=remote`: `explore` runs on the actor's weightless local policy and
    asks the worker for `unit_action(obs, deterministic=False)`."""
    from surreal.runtime.wire.remote_policy import RemotePolicy
    from tests.surreal.test_policy_workers import Service

    service = Service("sac", PENDULUM)
    try:
        weightless = service.algo.make_policy(service.config.algo, PENDULUM)
        remote = RemotePolicy(service.start_worker(), "actor-0", weightless)
        obs = np.random.default_rng(3).normal(size=(4, 3)).astype(np.float32)
        assert remote.version == 0
        unit = remote.explore(remote.unit_action, obs, [])
        assert remote.version == 1  # answered by the worker, with the learner's parameters
        assert unit.shape == (4, 1) and (np.abs(unit) < 1).all()
        greedy = service.local_policy().unit_action(obs, deterministic=True)
        np.testing.assert_allclose(remote.unit_action(obs, deterministic=True), greedy, rtol=1e-6)
        assert not np.allclose(unit, greedy)
        remote.close()
    finally:
        service.close()


def test_the_launch_check_passes_and_the_policy_loads_the_learners_actor():
    config = Config(algo=SACConfig(hidden=(16,)))
    check_algorithm(resolve("sac"), config, PENDULUM)
    learner = SACLearner.create(config, PENDULUM)
    policy = SACLearner.make_policy(config.algo, PENDULUM)
    policy.load_params(learner.params())
    obs = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    mean, _ = learner.algo.actor(torch.as_tensor(obs))
    actions, extras = policy.act(obs, deterministic=True)
    np.testing.assert_allclose(extras["unit_action"], torch.tanh(mean).detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(actions, 2.0 * extras["unit_action"], rtol=1e-6)  # [-2, 2]


@pytest.mark.timeout(60)
@pytest.mark.integration
def test_dry_run_shows_ddpgs_topology_and_sacs_defaults(tmp_path):
    args = ["launch", "sac", "--env", "gym:Pendulum-v1", "--actors", "2", "--dry-run"]
    args += ["--set", "algo.replay_shards=2", "--set", "algo.param_shards=2"]
    result = surreal_cli(args, tmp_path, tmp_path / "home")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    names = "replay-proxy replay-0 replay-1 param-proxy param-server-0 param-server-1 learner"
    for name in [*names.split(), "actor-0", "actor-1", "evaluator", "metrics"]:
        assert f"name: {name}\n" in out, name
    assert "# task family: classic" in out
    algo = json.JSONDecoder().raw_decode(out.split("\n", 2)[2])[0]["algo"]
    assert (algo["n_step"], algo["twin_critics"], algo["autotune"]) == (1, True, True)
    assert not (tmp_path / "runs").exists()  # --dry-run writes nothing


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sac_reaches_minus_200_on_pendulum_within_5k_env_steps(tmp_path):
    started = time.monotonic()
    result = surreal_cli(
        ["launch", "sac", "--env", "gym:Pendulum-v1", "--steps", "5000", "--name", "sac"]
        + ["--trial", "a", "--quiet", "--set", "run.stop_at_return=-200"],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(560),
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    st = status(tmp_path / "runs" / "sac" / "a")
    print(
        f"SAC Pendulum-v1: best eval {st['best_eval_return']:.1f} at env step "
        f"{st.get('eval_step')} (stored {st['global_step']}), wall {wall:.0f} s"
    )
    assert st["best_eval_return"] >= -200


@pytest.mark.timeout(600)
@pytest.mark.integration
def test_a_killed_learner_resumes_its_temperature_and_optimizers_exactly(tmp_path):
    """kill -9 of the learner ends the run (`run.max_restarts=0`: no restart, as after its
    restarts are used up); `--resume` to the checkpoint's own step loads it
    and writes it back at exit: every tensor (log alpha, the alpha optimizer, both others, the
    noise generator) as the killed learner saved it. Resumed further, all of them move on."""
    home, run = tmp_path / "home", tmp_path / "runs" / "kill" / "a"
    quick = ["--set", "algo.replay_start=300", "--set", "algo.checkpoint_every_s=1"]
    quick += ["--set", "run.max_restarts=0"]  # the killed learner stays dead
    proc = start_launch(
        ["sac", "--env", "gym:Pendulum-v1", "--actors", "1", "--steps", "10000000"]
        + ["--name", "kill", "--trial", "a", "--set", "eval.every_s=0", *quick, *SMALL],
        tmp_path,
        home,
    )
    ckpt = run / "checkpoints" / "latest.pt"
    try:
        wait_until(
            lambda: (
                ckpt.is_file()
                and torch.load(ckpt, weights_only=False)["learner"]["iteration"] >= 20
            ),
            240,
            "a checkpoint after 20 updates",
            proc,
        )
        os.kill(describe(home, "kill-a").process("learner").pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=scaled(180))
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1 and "surreal launch --resume runs/kill/a" in out, out
    wait_until(lambda: not processes_of(run), 30, "every process to end")
    saved = torch.load(ckpt, weights_only=False)
    state, step = saved["learner"], saved["counters"]["global_step"]
    assert state["log_alpha"].item() < 0 and state["alpha_opt"]["state"][0]["step"] >= 20
    same = surreal_cli(["launch", "--resume", str(run), "--steps", str(step)], tmp_path, home)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "resumed from" in (run / "logs" / "learner.log").read_text()
    rewritten = torch.load(ckpt, weights_only=False)
    assert rewritten["time"] > saved["time"]  # written by the resumed learner, at its exit
    _assert_same(rewritten["learner"], state)
    on = surreal_cli(["launch", "--resume", str(run), "--steps", str(step + 600)], tmp_path, home)
    assert on.returncode == 0, on.stdout + on.stderr
    after = torch.load(ckpt, weights_only=False)["learner"]
    assert after["iteration"] > state["iteration"]
    for opt in ("alpha_opt", "actor_opt", "critic_opt"):
        assert after[opt]["state"][0]["step"] > state[opt]["state"][0]["step"], opt
    assert after["log_alpha"].item() != state["log_alpha"].item()
