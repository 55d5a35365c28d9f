"""The DDPG actors' pacing while the learner is starved (issue 49): a refilling replay shard
gets a refill's worth of steps from each actor, not the step budget; one still starved at that
limit (its refill lost to another kill) gets another after a while, so the run never stands
still."""

from __future__ import annotations

import pytest

from surreal.algos.ddpg.actor import Pacer
from surreal.api.offpolicy import OffPolicyConfig

pytest.importorskip("torch")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def pacer() -> tuple[Pacer, Clock]:
    clock = Clock()
    algo = OffPolicyConfig(replay_start=1000, chunk_size=32, n_step=3, publish_every=20)
    return Pacer(algo, actors=2, clock=clock), clock


def test_an_actor_waits_once_it_is_ahead_of_the_learners_updates():
    pace, _ = pacer()
    pace.v0 = 0
    limit = 1000 / 2 + 35  # the warm-up share and what sits in the writer
    assert not pace.ahead(int(limit) - 1, version=0)
    assert pace.ahead(int(limit), version=0)
    assert not pace.ahead(int(limit), version=1)  # 20 more updates: 10 more steps each


def test_a_starved_learner_gets_a_refills_worth_of_steps_not_the_budget():
    pace, clock = pacer()
    pace.v0 = 0
    at = 535  # at its limit when the shard died and came back empty
    assert pace.ahead(at, version=0)
    refill = 1000 / 2 + 35
    assert not pace.ahead(at, version=0, starved=True)  # acts on for the refilling shard
    assert not pace.ahead(at + int(refill) - 1, version=0, starved=True)
    assert pace.ahead(at + int(refill), version=0, starved=True)  # and no further
    clock.now += Pacer.RENEW_S - 0.1
    assert pace.ahead(at + int(refill), version=0, starved=True)
    clock.now += 0.2  # still starved at its limit: the refill was lost, another one
    assert not pace.ahead(at + int(refill), version=0, starved=True)
    assert pace.ahead(at + 2 * int(refill), version=0, starved=True)
    # batches again: paced by versions, and a new starvation starts from where it is
    assert pace.ahead(at + 2 * int(refill), version=0)
    assert not pace.ahead(at + 2 * int(refill), version=0, starved=True)


def test_after_a_resume_an_actor_keeps_pace_from_its_first_step():
    pace, _ = pacer()
    pace.start(version=14_501, learner_step=300_032, env_steps=0)  # the resumed learner's first
    slack = 32 + 3  # only what sits in the writer: the replay was restored, no warm-up share
    assert not pace.ahead(slack - 1, version=14_501)
    assert pace.ahead(slack, version=14_501)
    assert not pace.ahead(slack, version=14_502)  # 20 more updates: 10 more steps each
    # a restarted actor of a running run: the same
    restarted, _ = pacer()
    restarted.start(version=800, learner_step=20_000, env_steps=16)
    assert restarted.ahead(16 + slack, version=800)


def test_a_new_runs_actors_keep_their_warm_up_share_at_the_learners_first_parameters():
    # the learner publishes once the replay holds its sampling start: it has counted the
    # warm-up's env steps, which these two actors took side by side (it once read that as a
    # resume: the actors stood while the learner took thousands of updates on the warm-up)
    for step in (0, 1000, 1064):
        fresh, _ = pacer()
        fresh.start(version=1, learner_step=step, env_steps=step // 2)
        assert not fresh.ahead(1000 // 2 + 35 - 1, version=1), step
        assert fresh.ahead(1000 // 2 + 35, version=1), step
    # an actor that started late (its fellow took 600 steps alone) gets what is left of it
    late, _ = pacer()
    late.start(version=1, learner_step=600, env_steps=0)
    assert not late.ahead((1000 - 600) // 2 + 35 - 1, version=1)
    assert late.ahead((1000 - 600) // 2 + 35, version=1)


def test_a_resumed_run_takes_no_random_warm_up_before_the_learners_parameters():
    clock = Clock()
    algo = OffPolicyConfig(replay_start=1000, chunk_size=32, n_step=3, publish_every=20)
    pace = Pacer(algo, actors=2, clock=clock, resumed=True)
    assert pace.ahead(35, version=0)  # waits for the learner after what fills its writer
    assert not Pacer(algo, actors=2, clock=clock).ahead(35, version=0)  # a new run acts on
