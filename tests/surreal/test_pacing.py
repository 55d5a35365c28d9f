"""Pacing over live actors (surreal.runtime.processes.pacing) and the parameter server's long poll.

An actor may run `actor.max_ahead` versions ahead of its share of the learner's batches. The
share is over the actors alive (they asked the parameter server lately), so stopped actors do
not hold the others back; and an actor that waits asks once and is answered when the version
arrives, not every 20 ms.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import caraml
from caraml.testing import free_address
from surreal.runtime.processes.pacing import WARMUP_S, LiveActors, Pacer
from surreal.runtime.processes.param_server import ParameterStore
from surreal.runtime.wire.parameter_client import ParameterClient

pytestmark = pytest.mark.timeout(60)


def _sends_before_waiting(pacer: Pacer) -> int:
    sent = 0
    while not pacer.ahead():
        pacer.sent()
        sent += 1
    return sent


@pytest.mark.parametrize(
    ("per_batch", "actors", "max_ahead", "sends", "wanted"),
    [
        (16, 1024, 1, 1, 63),  # one segment, then 63 versions of the others' segments
        (8, 2, 1, 8, 1),  # two versions' worth: this batch's share and one ahead
        (8, 2, 0, 4, 1),
        (4, 4, 0, 1, 1),
    ],
)
def test_with_every_actor_alive_the_credit_is_the_equal_share_rule(
    per_batch, actors, max_ahead, sends, wanted
):
    pacer = Pacer(per_batch, actors, max_ahead, version=5)
    assert _sends_before_waiting(pacer) == sends
    assert pacer.wanted_version() == 5 + wanted
    pacer.observe(5 + wanted, live=actors)
    assert not pacer.ahead()


def _simulate(live_counted: bool, actors=40, stopped=4, per_batch=8, rounds=400) -> float:
    """Versions per round the learner reaches when `stopped` actors send nothing: each round
    every live actor that is not ahead sends one segment; the learner makes one version of
    every `per_batch` segments."""
    clock = _Clock()
    pacers = [Pacer(per_batch, actors, 1, 0, clock=clock) for _ in range(actors)]
    clock.now += WARMUP_S  # past the first seconds, in which no live count is trusted
    version, queued, live = 0, 0, actors - stopped
    for _ in range(rounds):
        for pacer in pacers[:live]:
            if not pacer.ahead():
                pacer.sent()
                queued += 1
        made, queued = divmod(queued, per_batch)
        version += made
        for pacer in pacers[:live]:
            pacer.observe(version, live if live_counted else actors)
    return version / rounds


def test_stopped_actors_do_not_stall_the_others_when_the_share_is_over_live_actors():
    full = _simulate(True, stopped=0)
    assert _simulate(True) >= 0.85 * full  # 10% of the actors stopped: 10% fewer segments
    assert _simulate(False) < 0.1 * full  # an equal share of every actor: the others wait


def test_an_actor_back_from_a_long_stop_sends_no_more_than_its_cap():
    pacer = Pacer(8, 2, 1, 0)
    pacer.observe(1000, live=2)
    assert _sends_before_waiting(pacer) == 8


def test_a_new_actor_paces_on_the_run_s_actors_until_the_live_count_can_be_trusted():
    """In a run's first seconds the server has seen few actors: a count of 1 with a stall gave
    each of 8 actors 7 segments of credit instead of 1 (a backlog of 5 batches, kept all run)."""
    clock = _Clock()
    early = Pacer(4, 8, 1, 0, clock=clock)  # ppo CartPole, 8 actors: 0.5 segments per version
    early.observe(0, live=1, stalls=0)
    early.observe(0, live=1, stalls=1)  # the learner's first batch is late: a stall
    assert _sends_before_waiting(early) == 1
    clock.now += WARMUP_S  # later, 1 live actor is the truth (the others stopped): it takes over
    early.observe(1, live=1, stalls=1)
    assert early.share() == 4 and _sends_before_waiting(early) >= 4


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_live_actors_drop_an_actor_within_a_few_of_its_own_request_gaps():
    clock = _Clock()
    live = LiveActors(min_s=1.0, recount_s=0.0, clock=clock)
    for _ in range(20):  # three actors asking every 0.5 s
        clock.now += 0.5
        for actor in range(3):
            assert live.seen(actor)
    assert live.count() == 3
    for _ in range(6):  # actor 2 stops
        clock.now += 0.5
        live.seen(0), live.seen(1)
    assert live.count() == 2


def test_live_actors_refuse_ids_past_the_limit_until_old_ones_fall_silent():
    clock = _Clock()
    live = LiveActors(min_s=1.0, max_ids=4, recount_s=0.0, clock=clock)
    assert all(live.seen(actor) for actor in range(4))
    assert not live.seen(99)  # a peer inventing ids cannot grow the table
    clock.now += 100.0
    assert live.seen(99) and live.count() == 1


def test_a_waiting_actor_is_answered_when_the_version_arrives_with_one_request():
    address = free_address()
    store = ParameterStore()
    store.update({"version": 1, "step": 1, "params": {"w": np.ones(2, np.float32)}})
    server = caraml.Server(address, store.handle).start()
    store.on_new_version = server.wake
    client = ParameterClient(address, timeout=2.0, actor=3)
    try:
        assert client.fetch() is not None and client.version == 1 and client.live == 1
        asked = store.requests

        def publish_once_parked() -> None:  # the version comes while the request waits
            parked = threading.Event()
            while server.parked < 1:
                parked.wait(0.01)
            store.update({"version": 4, "step": 9, "params": {"w": np.zeros(2, np.float32)}})

        publisher = threading.Thread(target=publish_once_parked, daemon=True)
        publisher.start()
        fresh = client.wait_for(4, deadline_s=30.0)
        publisher.join(10)
        assert client.version == 4 and fresh["w"].sum() == 0
        assert store.requests - asked == 1  # parked, then answered on the publication
        assert server.answered_later == 1
        with pytest.raises(TimeoutError):  # nothing newer: answered at its deadline
            client.wait_for(5, deadline_s=0.3)
    finally:
        client.close()
        server.stop()


@pytest.mark.parametrize(
    "junk",
    [
        {"version": 0, "wait_for": "x"},
        {"version": 0, "wait_for": 3, "wait_s": 1e9},
        {"version": 0, "wait_s": -1.0, "wait_for": 2},
        {"version": 0, "actor": -5},
        {"version": 0, "actor": 2**40},
    ],
)
def test_bad_long_poll_fields_get_an_error_reply_at_once(junk):
    store = ParameterStore()
    reply = store.handle(junk)
    assert isinstance(reply, dict) and "error" in reply
    assert store.request_guard.total_dropped == 1
