"""It learns: `surreal launch ppo --env gym:CartPole-v1 --actors 4` with its defaults solves CartPole.

The settings are the README's (default lr and step budget, the classic-control family defaults
that `surreal launch` picks; bench/reports/learning.md): seeds 1, 2 and 3 each reach a greedy evaluation
of 475 within the default budget (the family's 200k steps, over which lr and clip range anneal;
`run.stop_at_return=475` ends each run at the goal, the budget is the cap). Issue 22's second claim: over a 300k-step run of the line the
training return stays within 10% of its best in the last third (it did not while the classic
family clipped the value loss; bench/reports/learning.md). Those two are `long` (`make test-long`); the
2-vs-8-actor run of the same recipe is in `make test`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import metric_records

torch = pytest.importorskip("torch")
pytest.importorskip("gymnasium")

DEFAULT_STEPS = 200_000  # the classic family's run.steps: the README line sets no --steps

# Fast settings for tests that need a run that learns CartPole quickly under load (e.g.
# test_hostile_peers): the pre-issue-22 recipe, pinned so family defaults do not change it.
CARTPOLE = [
    "--set",
    "env.num_envs=8",
    "--set",
    "actor.rollout_length=32",
    "--set",
    "algo.update_epochs=4",
    "--set",
    "algo.num_minibatches=4",
    "--set",
    "algo.lr=1e-3",
    "--set",
    "algo.ent_coef=0.0",
    "--set",
    "algo.norm_obs=true",
    # the settings these runs were tuned with, before the classic-control family defaults
    # (surreal.algos.families): the other tests' CartPole runs keep learning as they did
    "--set",
    "algo.gamma=0.99",
    "--set",
    "algo.gae_lambda=0.95",
    "--set",
    "algo.anneal_clip=false",
    "--set",
    "algo.clip_vloss=true",
    "--set",
    "algo.batch_size=0",  # one segment per actor, the batch these runs were tuned with
    "--set",
    "eval.episodes=10",
    "--set",
    "eval.every_s=2",
    "--set",
    "run.stop_at_return=475",
]


def cartpole_until(goal: float) -> list[str]:
    """CARTPOLE, with its run ending at the first evaluation >= `goal` instead of 475."""
    return [*CARTPOLE[:-2], "--set", f"run.stop_at_return={goal:g}"]


def _launch(
    tmp_path: Path, trial: str, *args: str, timeout: float, actors: int = 4
) -> tuple[Path, float]:
    started = time.monotonic()
    result = surreal_cli(
        [
            "launch",
            "ppo",
            "--env",
            "gym:CartPole-v1",
            "--actors",
            str(actors),
            "--name",
            "cartpole",
            "--trial",
            trial,
            "--quiet",
            *args,
        ],
        tmp_path,
        tmp_path / "home",
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "task family: classic" in result.stdout  # the launch summary says what it chose
    return tmp_path / "runs" / "cartpole" / trial, time.monotonic() - started


def _series(run: Path, name: str) -> list[tuple[int, float]]:
    return [(r["step"], r["value"]) for r in metric_records(run) if r["name"] == name]


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(3000)
def test_cartpole_defaults_reach_475_within_the_default_budget_in_three_of_three_seeds(tmp_path):
    """Seeds 1, 2, 3 in turn (stopping at the first that misses). With a 100k budget, 2 of 12
    seeds were still climbing when the annealed lr and clip range reached 0 and missed 475; with
    the family's 200k all 12 reached it, by 75k at the latest (bench/reports/learning.md)."""
    solved = {}
    for seed in (1, 2, 3):
        run, wall = _launch(
            tmp_path,
            f"s{seed}",
            "--set",
            f"run.seed={seed}",
            "--set",
            "run.stop_at_return=475",
            timeout=scaled(1200),
        )
        budget = json.loads((run / "config.json").read_text())["run"]["steps"]
        assert budget == DEFAULT_STEPS, "the launch did not pick the classic family's budget"
        evals = _series(run, "charts/eval_return")
        reached = [step for step, value in evals if value >= 475 and step <= budget]
        print(f"\nPPO CartPole seed {seed}: wall {wall:.0f} s, first eval >= 475 at {reached[:1]}")
        assert reached, f"seed {seed}: no evaluation >= 475 within {budget} steps: {evals}"
        solved[seed] = reached[0]
    print(f"first eval >= 475 at, per seed: {solved}")


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.timeout(1500)
def test_a_300k_step_run_keeps_its_training_return_within_10_percent_of_its_best(tmp_path):
    """Issue 22: over the last third of a 300k-step run of the README line, the training return
    (mean of 20 consecutive episodes) stays within 10% of its best. It fell to 72% and 43% of it
    with the value loss clipped (bench/reports/learning.md); the classic family now does not clip it."""
    import numpy as np

    total = 300_000
    run, wall = _launch(
        tmp_path, "long", "--steps", str(total), "--set", "run.seed=1", timeout=scaled(1400)
    )
    episodes = sorted(
        (r["step"], r["value"])
        for r in metric_records(run)
        if r["name"] == "charts/episodic_return"
    )
    steps = np.array([s for s, _ in episodes])
    mean20 = np.convolve([v for _, v in episodes], np.ones(20) / 20, mode="valid")
    best, last_third = mean20.max(), mean20[steps[19:] >= 2 * total / 3]
    print(
        f"\n300k CartPole: wall {wall:.0f} s, best {best:.1f}, last third min {last_third.min():.1f}"
    )
    assert steps[-1] >= total - 10_000 and len(last_third) >= 20
    assert last_third.min() >= 0.9 * best, (best, last_third.min())


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_batch_is_the_same_with_2_and_8_actors_and_both_reach_475(tmp_path):
    """Issue 33: `algo.batch_size` is in env steps, so `--actors 8` keeps the recipe of
    `--actors 2` (the classic family's 1,024 steps: 4 segments of 8 envs x 32 steps) instead of
    a batch 4x larger; both runs reach a greedy evaluation of 475 within the default budget."""
    for actors in (2, 8):
        run, wall = _launch(
            tmp_path,
            f"a{actors}",
            "--set",
            "run.stop_at_return=475",
            timeout=scaled(1200),
            actors=actors,
        )
        config = json.loads((run / "config.json").read_text())
        assert config["algo"]["batch_size"] == 1024 and config["run"]["actors"] == actors
        counters = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)["counters"]
        per_update = counters["global_step"] / counters["iterations"]
        evals = _series(run, "charts/eval_return")
        reached = [step for step, value in evals if value >= 475]
        print(
            f"\nPPO CartPole, {actors} actors: wall {wall:.0f} s, {per_update:.0f} env steps per "
            f"update, first eval >= 475 at {reached[:1]}"
        )
        assert per_update == 1024, f"{actors} actors: {per_update} env steps per update"
        assert reached, f"{actors} actors: no evaluation >= 475 within the budget: {evals}"
