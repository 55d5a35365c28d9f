"""Policy workers (`actor.inference=remote`): the same actions as local inference, per-client
recurrent memory reset on done, bad requests refused without harm, actors that wait out a worker
restart, and the launch wiring. The learning run with a kill -9 is test_policy_workers_learn."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import zmq

import caraml
from caraml.testing import free_port
from surreal.api.config import Config, ConfigError
from surreal.api.core import Policy
from surreal.api.registry import resolve
from surreal.api.spaces import EnvInfo
from surreal.runtime.processes import policy_worker
from surreal.runtime.processes.param_server import ParameterStore
from surreal.runtime.processes.policy_worker import PolicyServer
from surreal.runtime.wire.guard import PortGuard
from surreal.runtime.wire.policy_protocol import PolicyRequest, inference_methods
from surreal.runtime.wire.ports import GuardedServer
from surreal.runtime.wire.remote_policy import RemotePolicy, VersionClient

pytestmark = pytest.mark.timeout(120)
CARTPOLE = EnvInfo(obs_shape=(4,), discrete=True, num_actions=2)
PENDULUM = EnvInfo((3,), False, 0, (1,), (-2.0,), (2.0,))


class Service:
    """A parameter server holding one learner's params, and policy workers serving them."""

    def __init__(self, algo: str, info: EnvInfo) -> None:
        self.algo = resolve(algo)
        self.config = Config(algo=self.algo.config_class())
        self.info = info
        torch.manual_seed(0)
        self.params = self.algo.create(self.config, info).params()
        store = ParameterStore()
        store.update({"version": 1, "step": 0, "params": self.params})
        self.param_server = GuardedServer("tcp://127.0.0.1:0", store.handle, PortGuard("p")).start()
        self.workers: list[tuple[threading.Thread, SimpleNamespace]] = []

    def local_policy(self) -> Policy:
        policy = self.algo.make_policy(self.config.algo, self.info)
        policy.load_params(self.params)
        return policy

    def start_worker(self, address: str | None = None) -> str:
        """Run `policy_worker.serve` in a thread; returns the address it listens on."""
        address = address or f"tcp://127.0.0.1:{free_port()}"
        comp = SimpleNamespace(
            config=self.config,
            algo=self.algo,
            env_info=self.info,
            stopping=threading.Event(),
            report=lambda *a, **k: None,
            address=lambda name: SimpleNamespace(tcp=self.param_server.address),
        )
        thread = threading.Thread(target=policy_worker.serve, args=(comp, address), daemon=True)
        thread.start()
        self.workers.append((thread, comp))
        return address

    def stop_workers(self) -> None:
        for thread, comp in self.workers:
            comp.stopping.set()
            thread.join(timeout=10)
        self.workers.clear()

    def close(self) -> None:
        self.stop_workers()
        self.param_server.stop()


@pytest.fixture
def ppo():
    service = Service("ppo", CARTPOLE)
    yield service
    service.close()


def _remote(service: Service, address: str, client: str = "actor-0") -> RemotePolicy:
    return RemotePolicy(
        address, client, service.algo.make_policy(service.config.algo, service.info)
    )


def test_remote_inference_gives_the_local_actions_and_extras(ppo):
    address = ppo.start_worker()
    remote, local = _remote(ppo, address), ppo.local_policy()
    obs = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    try:
        action, extras = remote.act(obs, deterministic=True)
        want_action, want_extras = local.act(obs, deterministic=True)
        np.testing.assert_array_equal(action, want_action)
        assert set(extras) == set(want_extras) == {"logprob", "value"}
        for key in extras:
            np.testing.assert_allclose(extras[key], want_extras[key], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(remote.value(obs), local.value(obs), rtol=1e-6, atol=1e-6)
        assert remote.version == 1
    finally:
        remote.close()


def test_many_actors_are_batched_and_each_gets_its_own_rows(ppo):
    address = ppo.start_worker()
    local = ppo.local_policy()
    rng = np.random.default_rng(1)
    obs = [rng.normal(size=(n, 4)).astype(np.float32) for n in (3, 5, 8)]
    got: dict[int, np.ndarray] = {}

    def actor(i: int) -> None:
        remote = _remote(ppo, address, f"actor-{i}")
        for _ in range(20):
            got[i] = remote.act(obs[i], deterministic=True)[0]
        remote.close()

    threads = [threading.Thread(target=actor, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    for i in range(3):
        np.testing.assert_array_equal(got[i], local.act(obs[i], deterministic=True)[0])


def test_ddpg_unit_action_is_served_remotely_and_scale_stays_local():
    service = Service("ddpg", PENDULUM)
    try:
        remote = _remote(service, service.start_worker())
        local = service.local_policy()
        obs = np.random.default_rng(2).normal(size=(4, 3)).astype(np.float32)
        assert "unit_action" in remote.methods and "scale" not in remote.methods
        np.testing.assert_allclose(
            remote.unit_action(obs, deterministic=True),
            local.unit_action(obs, deterministic=True),
            rtol=1e-6,
        )
        unit = np.full((4, 1), 0.5, np.float32)
        np.testing.assert_array_equal(remote.scale(unit), local.scale(unit))
        remote.close()
    finally:
        service.close()


def test_bad_requests_are_refused_and_counted_and_the_worker_keeps_serving(ppo):
    address = ppo.start_worker()
    client = caraml.Client(address, timeout=5.0, retries=0)
    good = {"client": "a", "method": "act", "obs": np.zeros((2, 4), np.float32)}
    bad = [
        {**good, "obs": np.zeros((2, 4), np.float64)},  # dtype
        {**good, "obs": np.zeros((2, 5), np.float32)},  # shape
        {**good, "method": "load_params"},  # not an inference method
        {**good, "kwargs": {"deterministic": "yes"}},
        {**good, "reset": np.zeros(3, bool)},
        {**good, "client": ""},
        "not a dict",
    ]
    for message in bad:
        reply = client.request(message)
        assert "error" in reply, message
    raw = caraml.sockets.make_socket(zmq.DEALER)
    raw.connect(address)
    raw.send_multipart([b"", b"\x00garbage"])  # an envelope, then a frame that is no message
    assert raw.poll(5000)
    assert b"malformed" in b"".join(raw.recv_multipart())
    raw.close(linger=0)
    reply = client.request({**good, "kwargs": {"deterministic": True}})
    assert reply["version"] == 1 and reply["result"][0].shape == (2,)
    client.close()


def test_an_actor_waits_for_a_restarted_worker_and_resumes(ppo):
    address = ppo.start_worker()
    remote = _remote(ppo, address)
    remote.timeout = 0.5
    remote._client.timeout = 0.5
    obs = np.zeros((2, 4), np.float32)
    want = ppo.local_policy().act(obs, deterministic=True)[0]
    np.testing.assert_array_equal(remote.act(obs, deterministic=True)[0], want)
    ppo.stop_workers()  # the worker is gone; the actor's next request waits for a new one
    out = io.StringIO()
    answer: dict = {}

    def ask() -> None:
        import contextlib

        with contextlib.redirect_stdout(out):
            answer["action"] = remote.act(obs, deterministic=True)[0]

    asking = threading.Thread(target=ask)
    asking.start()
    asking.join(timeout=1.5)
    assert asking.is_alive()  # still waiting, not failed
    ppo.start_worker(address)  # the launcher's restart: same service address
    asking.join(timeout=30)
    assert not asking.is_alive()
    np.testing.assert_array_equal(answer["action"], want)
    assert remote.outages == 1 and "answers again" in out.getvalue()
    remote.close()


class Counter(Policy):
    """A toy recurrent policy: its state counts the steps since each env's episode began."""

    def __init__(self) -> None:
        self.state = None

    def act(self, obs, deterministic=False):
        if self.state is None or self.state[0].shape[0] != len(obs):
            self.state = (torch.zeros(len(obs)),)
        self.state = (self.state[0] + 1,)
        return self.state[0].numpy().copy(), {"seen": obs[:, 0].copy()}

    def reset(self, done):
        keep = torch.as_tensor(~np.asarray(done, bool), dtype=torch.float32)
        self.state = (self.state[0] * keep,)


def _request(client: str, n: int, reset=None, first=0.0) -> dict:
    obs = np.full((n, 2), first, np.float32)
    message = {"client": client, "method": "act", "obs": obs}
    if reset is not None:
        message["reset"] = np.asarray(reset, bool)
    return PolicyRequest((2,), inference_methods(Counter()))(message)


def test_recurrent_state_is_kept_per_client_and_reset_on_done():
    server = PolicyServer(Counter(), (2,))
    server.version = 1
    assert server.recurrent
    for _ in range(2):  # two clients, batched together from their second request on
        replies = server.answer([_request("a", 2, first=1.0), _request("b", 3, first=2.0)])
    np.testing.assert_array_equal(replies[0]["result"][0], [2, 2])
    np.testing.assert_array_equal(replies[1]["result"][0], [2, 2, 2])
    np.testing.assert_array_equal(replies[1]["result"][1]["seen"], [2.0, 2.0, 2.0])
    replies = server.answer(
        [_request("a", 2, reset=[True, False]), _request("b", 3, reset=[False, False, True])]
    )
    np.testing.assert_array_equal(replies[0]["result"][0], [1, 3])
    np.testing.assert_array_equal(replies[1]["result"][0], [3, 3, 1])
    assert server.batches == 4  # a and b alone at first, then one batch each time


def test_recurrent_policy_without_a_state_attribute_is_refused_clearly():
    class Hidden(Policy):
        def act(self, obs, deterministic=False):
            return obs, {}

        def reset(self, done):
            pass

    with pytest.raises(ValueError, match="use actor.inference=local"):
        PolicyServer(Hidden(), (2,))


def test_version_client_follows_versions_without_weights(ppo):
    client = VersionClient(ppo.param_server.address, timeout=2.0)
    assert client.fetch() == {"version": 1}
    assert client.fetch() is None and client.version == 1
    client.close()


def test_launch_declares_policy_workers_and_rejects_what_cannot_work(tmp_path: Path):
    from surreal.launch.experiment import build_experiment, plan, preflight

    p = plan(
        "ppo",
        env="gym:CartPole-v1",
        actors=3,
        overrides=("actor.inference=remote", "run.policy_workers=2"),
        folder=str(tmp_path),
    )
    exp = build_experiment(p)
    names = {proc.name: proc for proc in exp.processes()}
    assert {"policy-worker-0", "policy-worker-1"} <= set(names)
    assert "policy-1" in names["actor-1"].connected and "policy-0" in names["actor-2"].connected
    assert names["policy-worker-0"].restart.mode == "on-failure"
    local = build_experiment(plan("ppo", env="gym:CartPole-v1", folder=str(tmp_path)))
    assert not any(proc.name.startswith("policy-worker") for proc in local.processes())
    with pytest.raises(ConfigError, match="local or remote"):
        plan("ppo", env="gym:CartPole-v1", overrides=("actor.inference=gpu",))
    with pytest.raises(ConfigError, match="policy_workers must be >= 1"):
        plan("ppo", env="gym:CartPole-v1", overrides=("run.policy_workers=0",))
    es = plan("es", env="gym:Pendulum-v1", overrides=("actor.inference=remote",))
    with pytest.raises(ConfigError, match="run their own policy"):
        preflight(es)


VISION = EnvInfo((84 * 84 * 3 + 8,), False, 0, (2,), (-1.0, -1.0), (1.0, 1.0))


def test_conv_lstm_policy_remote_matches_local_per_actor_with_resets_on_done():
    """Two actors share a worker (batched); each one's LSTM memory there evolves exactly as in a
    local VisionPolicy stepping the same observations, including the reset of ended episodes."""
    service = Service("ppo-vision", VISION)
    try:
        address = service.start_worker()
        rng = np.random.default_rng(3)
        sizes = {"actor-0": 2, "actor-1": 3}
        remotes = {c: _remote(service, address, c) for c in sizes}
        locals_ = {c: service.local_policy() for c in sizes}
        for t in range(4):
            for client, n in sizes.items():
                obs = rng.uniform(0, 255, size=(n, *VISION.obs_shape)).astype(np.float32)
                got_a, got = remotes[client].act(obs, deterministic=True)
                want_a, want = locals_[client].act(obs, deterministic=True)
                np.testing.assert_allclose(got_a, want_a, rtol=1e-5, atol=1e-5)
                for key in ("lstm_h", "lstm_c", "value"):
                    np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-5)
                done = np.zeros(n, bool)
                done[t % n] = True  # one env per step ends its episode
                remotes[client].reset(done)
                locals_[client].reset(done)
            if t >= 1:  # the reset env's state is zero at the next step
                assert not np.any(got["lstm_h"][(t - 1) % n])
        for remote in remotes.values():
            remote.close()
    finally:
        service.close()


@pytest.mark.integration
def test_launch_help_names_the_options_and_dry_run_shows_the_workers(tmp_path: Path):
    from surreal.testing import surreal_cli

    help_text = surreal_cli(["launch", "--help"], tmp_path, tmp_path / "home").stdout
    assert "actor.inference=remote" in help_text and "run.policy_workers=N" in help_text
    dry = surreal_cli(
        ["launch", "ppo", "--env", "gym:CartPole-v1", "--dry-run"]
        + ["--set", "actor.inference=remote", "--set", "run.policy_workers=2"],
        tmp_path,
        tmp_path / "home",
    )
    assert dry.returncode == 0, dry.stderr
    assert "policy-worker-0" in dry.stdout and "policy-worker-1" in dry.stdout
    assert not (tmp_path / "runs").exists()  # a dry run writes nothing


def test_double_buffered_halves_give_one_segment_in_env_order(ppo):
    """`build_actor` with remote inference: two halves (clients actor-0/0 and actor-0/1), each
    stepped in its own thread; the segment has the shapes and keys of one `Actor`'s, envs in
    order, and its actions are the policy's answers for its observations."""
    from surreal.runtime.processes.split_actor import SplitActor, build_actor

    address = ppo.start_worker()
    ppo.config.env.id, ppo.config.env.num_envs = "gym:CartPole-v1", 5
    ppo.config.actor.inference, ppo.config.actor.rollout_length = "remote", 6
    comp = SimpleNamespace(config=ppo.config)
    env, actor = build_actor(comp, _remote(ppo, address), seed=7)
    assert isinstance(actor, SplitActor) and env.num_envs == 5
    assert [a.policy.client for a in actor.actors] == ["actor-0/0", "actor-0/1"]
    segment = actor.rollout()
    assert segment["obs"].shape == (6, 5, 4) and segment["action"].shape == (6, 5)
    assert segment["logprob"].shape == (6, 5) and segment["next_value"].shape == (5,)
    from surreal.envs import VectorEnv

    fresh = VectorEnv("gym:CartPole-v1", ppo.config.env, 7).reset()  # env i keeps seed 7 + i
    np.testing.assert_array_equal(segment["obs"][0], fresh)
    np.testing.assert_allclose(  # values are deterministic: the worker's, in env order
        segment["value"][0], ppo.local_policy().act(fresh)[1]["value"], rtol=1e-5
    )
    ppo.config.actor.double_buffer = False
    _, single = build_actor(comp, _remote(ppo, address), seed=7)
    assert not isinstance(single, SplitActor)
    actor.close()
    env.close()
