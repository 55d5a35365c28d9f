"""Every port's schema: what a peer may send is checked, counted, logged once and dropped."""

import io
import random
import threading

import numpy as np
import pytest

import caraml
from caraml.testing import free_address
from surreal.api.replay import FifoSampler, FifoStorage, Replay
from surreal.api.spaces import EnvInfo
from surreal.runtime.processes.metrics import MetricsSink
from surreal.runtime.processes.param_server import ParameterStore
from surreal.runtime.processes.replay import BatchHandler, batch_arrays
from surreal.runtime.processes.replay_shard import ReplayShard
from surreal.runtime.wire.batch_protocol import BatchRequests, ReplyCache
from surreal.runtime.wire.guard import Invalid, PortGuard
from surreal.runtime.wire.schemas import (
    ChunkSchema,
    ParamsSchema,
    SegmentSchema,
    batch_request,
    params_reply,
    params_request,
    report,
    sample_request,
)
from tests.surreal.port_fuzz import junk_objects

pytestmark = pytest.mark.timeout(60)

CARTPOLE = EnvInfo(obs_shape=(4,), discrete=True, num_actions=2)
PENDULUM = EnvInfo(
    obs_shape=(3,), discrete=False, action_shape=(1,), action_low=(-2.0,), action_high=(2.0,)
)
T, N = 5, 3


def segment(**changes) -> dict:
    seg = {
        "obs": np.zeros((T, N, 4), np.float32),
        "action": np.ones((T, N), np.int64),
        "reward": np.ones((T, N), np.float32),
        "terminated": np.zeros((T, N), bool),
        "truncated": np.zeros((T, N), bool),
        "logprob": np.zeros((T, N), np.float32),
        "version": np.ones(N, np.int64),
    }
    seg.update(changes)
    return {k: v for k, v in seg.items() if v is not None}


@pytest.mark.parametrize(
    "bad, kind",
    [
        ({"not": "a segment"}, "missing-keys"),
        ([1, 2, 3], "not-a-dict"),
        (segment(obs=np.zeros((T, N, 5), np.float32)), "bad-shape"),
        (segment(action=np.full((T, N), 2, np.int64)), "out-of-range"),
        (segment(action=np.zeros((T, N), np.float32)), "bad-dtype"),
        (segment(reward=np.full((T, N), np.nan, np.float32)), "not-finite"),
        (segment(version=None), "missing-keys"),
        (segment(extra="text"), "not-an-array"),
        (segment(obs=np.zeros((T + 1, N, 4), np.float32)), "bad-shape"),
    ],
)
def test_segment_schema_refuses_what_does_not_fit_the_env_spec(bad, kind):
    schema = SegmentSchema(CARTPOLE, T, N)
    with pytest.raises(Invalid) as err:
        schema(bad)
    assert err.value.kind == kind
    assert schema(segment()) is not None  # a real one still passes afterwards


def test_the_first_valid_segment_pins_keys_dtypes_and_shapes():
    schema = SegmentSchema(CARTPOLE, T, N)
    schema(segment())
    with pytest.raises(Invalid) as err:
        schema(segment(value=np.zeros((T, N), np.float32)))  # an extra key: stacking would fail
    assert err.value.kind == "schema-mismatch"
    with pytest.raises(Invalid):
        schema(segment(logprob=np.zeros((T, N), np.float64)))
    schema(segment())


def test_the_buffer_stacks_only_valid_segments_and_a_resent_request_gets_the_same_batch():
    replay = Replay(FifoStorage(capacity=10), FifoSampler())
    schema, guard = SegmentSchema(CARTPOLE, T, N), PortGuard("experience", out=io.StringIO())
    for message in [segment(), {"not": "a segment"}, segment(reward=np.ones((T, N), np.float64))]:
        checked = guard.check(schema, message)
        if checked is not None:
            replay.add(checked)
    replay.add(segment())
    assert len(replay) == 2 and guard.total_dropped == 2
    handle = BatchHandler(replay)
    first = handle({"segments": 2, "timeout": 0.1, "id": "learner:0"})
    assert first["batch"]["obs"].shape == (2, T, N, 4) and len(replay) == 0
    again = handle({"segments": 2, "timeout": 0.1, "id": "learner:0"})  # the reply was lost
    assert again["batch"] is first["batch"] and handle.replies.replayed == 1
    assert handle({"segments": 2, "timeout": 0.05, "id": "learner:1"})["batch"] is None
    bad = handle({"segments": "all", "timeout": 0.05})
    assert bad["batch"] is None and "not a batch request" in bad["error"]
    assert "empty" in batch_arrays(bad) and "empty" in batch_arrays("junk")


def test_a_lost_batch_reply_is_recovered_over_the_wire_with_the_same_request_id():
    """The first reply never reaches the client (its socket is reset mid-request); the resend
    carries the same id and gets the same batch, so no segment is lost."""
    replay = Replay(FifoStorage(capacity=10), FifoSampler())
    for _ in range(4):
        replay.add(segment())
    handler = BatchHandler(replay)
    gate = threading.Event()

    def slow_first(message):
        reply = handler(message)
        gate.wait(5.0)  # hold the first reply until the client gave up on it
        return reply

    address = free_address()
    server = caraml.Server(address, slow_first).start()
    client = caraml.Client(address, timeout=0.3, retries=5)
    try:
        request = next(iter(BatchRequests(2, timeout=0.1)))
        threading.Timer(0.6, gate.set).start()
        reply = client.request(request)
        assert reply["batch"]["obs"].shape == (2, T, N, 4)
        assert handler.replies.replayed >= 1 and len(replay) == 2  # taken once, not twice
    finally:
        gate.set()
        client.close()
        server.stop()


def test_batch_requests_are_fresh_per_batch_and_picklable():
    import pickle

    requests = BatchRequests(3, requester="r")
    first, second = list(zip(range(2), pickle.loads(pickle.dumps(requests)), strict=False))
    assert first[1]["id"] == "r:0" and second[1]["id"] == "r:1" and first[1]["segments"] == 3
    assert batch_request(first[1], max_segments=10)["id"] == "r:0"
    for bad in ({"segments": 0}, {"segments": 11}, {"segments": 2, "timeout": float("nan")}, {}):
        with pytest.raises(Invalid):
            batch_request(bad, max_segments=10)


def test_reply_cache_forgets_the_least_recent_requesters():
    cache, calls = ReplyCache(requesters=2), []
    for rid in ("a:0", "b:0", "c:0", "a:0"):
        cache.answer(rid, lambda rid=rid: calls.append(rid) or rid)
    assert calls == ["a:0", "b:0", "c:0", "a:0"]  # a was forgotten when c came
    assert cache.answer("c:0", lambda: "again") == "c:0"


def test_the_guard_logs_each_kind_once_and_counts_every_message():
    out = io.StringIO()
    guard = PortGuard("metrics", out=out)
    for _ in range(1000):
        guard.check(report, {"no": "source"})
        guard.check(report, 42)
    assert guard.dropped == {"bad-field": 1000, "not-a-dict": 1000}
    assert len(out.getvalue().splitlines()) == 2


def test_parameter_store_answers_bad_requests_and_drops_bad_publications():
    store = ParameterStore()
    store.request_guard.out = store.publication_guard.out = io.StringIO()
    store.update({"version": 1, "step": 10, "params": {"w": np.ones(2, np.float32)}})
    for junk in ("hi", {"version": "x"}, {"version": 2.5}, None):
        reply = store.handle(junk)
        assert "error" in reply and "params" not in reply
    store.update({"version": 5, "params": {"w": np.ones(3, np.float32)}})  # other shape
    store.update({"version": 6, "params": {"w": "text"}})
    store.update({"version": -1, "params": {"w": np.ones(2, np.float32)}})
    assert store.handle({"version": 0})["version"] == 1
    assert store.publication_guard.total_dropped == 3 and store.request_guard.total_dropped == 4
    assert params_reply(store.handle({"version": 0}))["params"]["w"].shape == (2,)


def test_ddpg_chunks_and_sample_requests_are_checked_against_the_env_spec():
    schema = ChunkSchema(PENDULUM, dedup=False)
    good = {
        "obs": np.zeros((4, 3), np.float32),
        "next_obs": np.zeros((4, 3), np.float32),
        "act": np.zeros((4, 1), np.float32),
        "rew": np.zeros(4, np.float32),
        "discount": np.ones(4, np.float32),
    }
    schema(good)
    for bad in (
        {**good, "obs": np.zeros((4, 2), np.float32)},
        {**good, "discount": np.full(4, 2.0, np.float32)},
        {**good, "rew": np.zeros(5, np.float32)},
        {k: v for k, v in good.items() if k != "act"},
    ):
        with pytest.raises(Invalid):
            schema(bad)
    dedup = ChunkSchema(PENDULUM, dedup=True)
    chunk = {k: good[k] for k in ("act", "rew", "discount")}
    chunk.update(obs_table=np.zeros((2, 3), np.float32), obs_idx=np.zeros(4, np.int32))
    dedup({**chunk, "next_obs_idx": np.ones(4, np.int32)})
    with pytest.raises(Invalid):
        dedup({**chunk, "next_obs_idx": np.full(4, 2, np.int32)})  # past the table
    shard = ReplayShard(capacity=10, start=1, chunk_schema=schema)
    shard.chunk_guard.out = shard.request_guard.out = io.StringIO()
    shard.add({"not": "a chunk"})
    shard.add(good)
    assert shard.chunks == 1 and shard.handle({"op": "sample", "batch_size": 2})["ready"]
    assert "error" in shard.handle({"op": "sample", "batch_size": -1})
    assert sample_request({"op": "stats"}) == {"op": "stats"}


def test_a_report_is_cleaned_and_non_finite_scalars_are_left_out(tmp_path):
    msg = report(
        {
            "source": "evaluator",
            "step": 10,
            "scalars": {"charts/eval_return": float("inf"), "losses/x": 0.5, "bad": "text"},
            "unknown": object,
        }
    )
    assert msg["scalars"] == {"losses/x": 0.5} and "unknown" not in msg
    sink = MetricsSink(tmp_path, total_steps=100, tensorboard=False)
    sink.handle(msg)
    sink.close()
    assert "best_eval_return" not in (tmp_path / "status.json").read_text()


def test_no_validator_raises_anything_but_invalid_on_junk(tmp_path):
    """10,000 random objects through every port's schema (and the sink behind `metrics`)."""
    rng = random.Random(7)
    sink = MetricsSink(tmp_path, total_steps=100, tensorboard=False)
    store, handler = ParameterStore(), BatchHandler(Replay(FifoStorage(4), FifoSampler()))
    store.request_guard.out = store.publication_guard.out = handler.guard.out = io.StringIO()
    validators = [
        SegmentSchema(CARTPOLE, T, N),
        SegmentSchema(PENDULUM, T, N),
        ChunkSchema(PENDULUM, dedup=True),
        ParamsSchema(),
        params_reply,
        params_request,
        sample_request,
        lambda m: batch_request(m, 8),
        report,
    ]
    for obj in junk_objects(rng, 10_000):
        for validate in validators:
            try:
                checked = validate(obj)
            except Invalid:
                continue
            if validate is report:
                sink.handle(checked)  # a cleaned report never breaks the sink
        store.update(obj)
        store.handle(obj)
        if not (isinstance(obj, dict) and "segments" in obj):  # a valid one would wait
            assert handler(obj)["batch"] is None
    sink.close()


def _undecodable() -> list:
    """An error-kind caraml message holding code points past U+10FFFF: decoding it raises
    SystemError (not MalformedMessage) when caraml formats its text."""
    from caraml.wire import KIND_ERROR, serialize

    return serialize(np.array([0x110000, 0x41], np.uint32).view("U1"), kind=KIND_ERROR)


def test_a_message_caraml_fails_to_decode_is_a_drop_not_a_dead_server():
    from surreal.runtime.wire.ports import NOTHING, GuardedServer, receive

    guard = PortGuard("experience", out=io.StringIO())
    assert receive(lambda: caraml.deserialize(_undecodable()), guard) is NOTHING
    assert guard.dropped == {"undecodable": 1}
    address = free_address()
    server = GuardedServer(address, lambda m: {"ok": m}, PortGuard("batches", out=io.StringIO()))
    server.start()
    import zmq

    raw = zmq.Context.instance().socket(zmq.REQ)
    raw.linger = 0
    raw.connect(address)
    client = caraml.Client(address, timeout=5.0, retries=0)
    try:
        raw.send_multipart(_undecodable())
        assert raw.poll(5000) and raw.recv_multipart()  # answered with an error reply
        assert client.request(1) == {"ok": 1}  # and the server still serves
        assert server.guard.dropped == {"undecodable": 1}
    finally:
        raw.close()
        client.close()
        server.stop()
