"""surreal.multiagent without launching: envs, the agent->policy mapping, routing each agent's
steps to its policy's segments (counted exactly), self-play seats and pool, the topology."""

from pathlib import Path

import numpy as np
import pytest

from surreal.api.config import Config
from surreal.envs.multiagent import agent_infos, make_multiagent_env
from surreal.multiagent.config import MultiAgentPPOConfig
from surreal.multiagent.learner import MultiAgentPPOLearner
from surreal.multiagent.mapping import policy_groups
from surreal.multiagent.policy_runs import policy_config, policy_specs
from surreal.multiagent.rollout import JointRollout
from surreal.multiagent.selfplay import OpponentPool
from surreal.runtime.wire.schemas import SegmentSchema
from surreal.testing import surreal_cli

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_MAPPING = f"{ROOT}/examples/06_multiagent/policies.py:by_agent"


def config(env: str, **algo) -> Config:
    cfg = Config(algo=MultiAgentPPOConfig(**algo))
    cfg.env.id, cfg.env.num_envs = env, 3
    return cfg


def rollout_for(cfg: Config, pool: OpponentPool | None = None) -> tuple[JointRollout, list]:
    specs = policy_specs(cfg)
    policies = {
        s.name: MultiAgentPPOLearner.make_policy(policy_config(cfg, s).algo, s.env_info)
        for s in specs
    }
    envs = [make_multiagent_env(cfg.env.id, seed=i) for i in range(cfg.env.num_envs)]
    joint = JointRollout(envs, specs, policies, 7, cfg.algo.central_value, pool, seed=3)
    return joint, specs


def test_mapping_modes_and_a_user_function():
    agents = ["agent_0", "agent_1", "left"]
    assert policy_groups("shared", agents) == {"shared": agents}
    assert policy_groups("per-agent", agents) == {
        "agent0": ["agent_0"],
        "agent1": ["agent_1"],
        "left": ["left"],
    }
    assert policy_groups(EXAMPLE_MAPPING, agents) == {"team": ["agent_0", "agent_1"], "l": ["left"]}
    with pytest.raises(ValueError, match="shared, per-agent, or path"):
        policy_groups("everyone", agents)
    with pytest.raises(ValueError, match="lower-case letters and digits"):
        policy_groups("tests/surreal/test_multiagent.py:bad_names", agents)


def bad_names(agent: str) -> str:
    return "Team_A"


def test_pettingzoo_mpe_ids_with_arguments_and_clear_errors():
    infos = agent_infos("pettingzoo:mpe.simple_spread_v3?N=2&max_cycles=5")
    assert list(infos) == ["agent_0", "agent_1"] and infos["agent_0"].num_actions == 5
    env = make_multiagent_env("pettingzoo:mpe.simple_spread_v3?N=2&max_cycles=5", seed=0)
    env.reset()
    for _ in range(5):
        _, _, terminated, truncated = env.step({a: 0 for a in env.agents})
    assert all(truncated.values()) and not any(terminated.values())
    from surreal.envs import UnknownEnvironment, env_info

    with pytest.raises(UnknownEnvironment, match="did you mean 'ma:nim'"):
        agent_infos("ma:nimm")
    with pytest.raises(UnknownEnvironment, match="pip install"):
        agent_infos("pettingzoo:mpe.no_such_env_v1")
    # the single-agent view: the first agent, the others random (what `ppo --env` trains)
    assert env_info("pettingzoo:mpe.simple_spread_v3").obs_shape == (18,)


def test_each_policy_gets_exactly_its_agents_steps():
    cfg = config("ma:pair", policy_mapping="per-agent")
    joint, specs = rollout_for(cfg)
    assert [(s.name, s.agents) for s in specs] == [("left", ["left"]), ("right", ["right"])]
    seen = {"left": [], "right": []}
    for _ in range(4):
        segments = joint.rollout()
        assert set(segments) == {"left", "right"}
        for spec in specs:
            sub = policy_config(cfg, spec)
            schema = SegmentSchema(spec.env_info, 7, sub.env.num_envs)  # what its buffer checks
            segment = dict(segments[spec.name], version=np.ones(sub.env.num_envs, np.int64))
            schema(segment)
            seen[spec.name].append(segment["obs"][..., 0])
    left, right = np.concatenate(seen["left"]), np.concatenate(seen["right"])
    assert left.size == right.size == 4 * 7 * 3  # rollouts x steps x envs, one agent each
    assert (left == 0).all() and (right == 1).all()  # obs[0] is the agent's index
    episodes = joint.pop_episodes()  # pair episodes last 10 steps: 28 steps x 3 envs -> 6
    assert len(episodes) == 6 and all(e["length"] == 10 for e in episodes)


def test_a_shared_policy_gets_every_agents_steps_in_agent_order():
    cfg = config(
        "pettingzoo:mpe.simple_spread_v3?N=3&max_cycles=4", central_value=True, norm_obs=False
    )
    joint, (spec,) = rollout_for(cfg)
    assert spec.agents == ["agent_0", "agent_1", "agent_2"] and spec.columns_per_env == 3
    assert spec.env_info.obs_shape == (18 + 54,) and spec.actor_obs_dim == 18
    segment = joint.rollout()["shared"]
    assert segment["obs"].shape == (7, 9, 72) and segment["next_value"].shape == (9,)
    # column 3*i + k is agent k of env i: its own observation first, the global state after
    env0 = segment["obs"][0, :3]
    assert np.allclose(env0[:, 18:], env0[0, 18:])  # the same state for the env's agents
    assert not np.allclose(env0[0, :18], env0[1, :18])
    # episodes of 4 steps end truncated: bootstrapped from final_value, not terminated
    assert segment["truncated"][3].all() and not segment["terminated"].any()


def test_centralized_value_network_acts_on_the_agents_own_observation():
    import torch

    from surreal.api.spaces import EnvInfo
    from surreal.multiagent.central import CentralValueActorCritic

    algo = MultiAgentPPOConfig(actor_obs_dim=4)
    model = CentralValueActorCritic(EnvInfo((10,), True, 3), algo)
    x = torch.randn(5, 10)
    y = x.clone()
    y[:, 4:] += 1.0  # another global state
    assert torch.allclose(model.distribution(x).logits, model.distribution(y).logits)
    assert not torch.allclose(model.value(x), model.value(y))


def test_self_play_sends_only_the_learning_seat_and_draws_pool_opponents():
    cfg = config("ma:nim", self_play=True)
    spec = policy_specs(cfg)[0]
    assert spec.columns_per_env == 1
    make = lambda: MultiAgentPPOLearner.make_policy(cfg.algo, spec.env_info)  # noqa: E731
    pool = OpponentPool(make, size=2, every=5, latest=0.0, seed=0)
    params = make().model.state_dict()
    params = {f"model/{k}": v.numpy() for k, v in params.items()}
    params.update(make().normalizer.to_params())
    assert pool.offer(1, params) and not pool.offer(3, params) and pool.offer(6, params)
    assert pool.offer(11, params) and pool.versions() == [6, 11]  # the oldest went
    joint, _ = rollout_for(cfg, pool)
    seats = []
    for _ in range(6):
        segment = joint.rollout()["shared"]
        assert segment["obs"].shape == (7, 3, 17)
        episodes = joint.pop_episodes()
        seats += [e["seat"] for e in episodes]
        for e in episodes:  # zero-sum: the learning seat's return is what its stream reports
            assert sorted(e["returns"].values()) == [-1.0, 1.0]
            assert e["opponent"] in (6, 11)  # latest=0: always a past version
            assert joint.policy_returns(spec, e) == [e["returns"][e["seat"]]]
    assert {"player_0", "player_1"} <= set(seats)


def test_a_policy_with_agents_of_different_spaces_is_refused():
    with pytest.raises(ValueError, match="map them to different policies"):
        policy_specs(config("ma:pair"))
    with pytest.raises(ValueError, match="self_play needs every agent on one policy"):
        policy_specs(config("ma:nim", self_play=True, policy_mapping="per-agent"))
    with pytest.raises(ValueError, match="single-agent"):
        policy_specs(config("gym:CartPole-v1"))


def test_alias_makes_a_policys_services_visible_under_runtime_names():
    from surreal.multiagent.services import alias_services

    env = {
        "SYMPH_SERVICES": "batches-l,params-pub-l,metrics-l",
        "SYMPH_BATCHES_L_HOST": "127.0.0.1",
        "SYMPH_BATCHES_L_PORT": "5001",
        "SYMPH_PARAMS_PUB_L_HOST": "127.0.0.1",
        "SYMPH_PARAMS_PUB_L_PORT": "5002",
        "SYMPH_METRICS_L_HOST": "127.0.0.1",
        "SYMPH_METRICS_L_PORT": "5003",
    }
    assert alias_services("l", env) == ["batches", "params-pub", "metrics"]
    import symphony

    assert symphony.address("params-pub", env).port == 5002
    assert symphony.address("batches", env).port == 5001


@pytest.mark.integration
def test_dry_run_declares_one_stream_per_policy(tmp_path):
    result = surreal_cli(
        ["launch", "mappo", "--env", "ma:pair", "--dry-run"]
        + ["--set", f"algo.policy_mapping={EXAMPLE_MAPPING}"],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    for name in ("learner-l", "buffer-r", "param-server-l", "metrics-r", "experience-l"):
        assert name in result.stdout
    assert not (tmp_path / "runs").exists()
    bad = surreal_cli(
        ["launch", "mappo", "--env", "ma:pair", "--dry-run"], tmp_path, tmp_path / "h"
    )
    assert bad.returncode != 0 and "map them to different policies" in bad.stderr


def test_the_league_ends_the_run_when_every_policy_reached_the_budget(tmp_path):
    from surreal.multiagent.league import progress
    from surreal.multiagent.policy_runs import policy_run, write_policy_runs
    from surreal.runtime.runfolder.rundir import RunDir, write_json

    cfg = config("ma:pair", policy_mapping=EXAMPLE_MAPPING)
    run = RunDir(tmp_path / "run")
    run.create(cfg, {"algo": "mappo", "env_info": {}})
    write_policy_runs(run, cfg, policy_specs(cfg))
    assert policy_run(run, "l").load_config().env.num_envs == 3  # 3 envs x 1 agent
    write_json(policy_run(run, "l").status_file, {"global_step": 500, "finished": True})
    write_json(policy_run(run, "r").status_file, {"global_step": 800})
    # a `finished` left from before --resume with a larger budget does not end the run
    assert progress(run, 1000) == (
        500,
        {"policies/l/global_step": 500.0, "policies/r/global_step": 800.0},
        False,
    )
    assert progress(run, 500)[2] is True
