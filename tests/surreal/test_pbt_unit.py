"""Population-based training on fakes: the exploit/explore step, the search space, the directives
a manager leaves and the learner takes, and the population's symphony Experiment."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from surreal.api.config import ConfigError
from surreal.pbt import store
from surreal.pbt.config import PBTConfig, make_config
from surreal.pbt.exploit import MemberScore, cut, exploit_explore
from surreal.pbt.manager import Manager
from surreal.pbt.space import Hyperparameter, check_space, parse_space
from surreal.runtime.processes.member import Member

LR = Hyperparameter("algo.lr", 1e-5, 1e-2, log=True)
ENT = Hyperparameter("algo.ent_coef", 0.0, 0.05)
EPOCHS = Hyperparameter("algo.update_epochs", 1, 10, integer=True)


def scores(*values: float) -> list[MemberScore]:
    return [
        MemberScore(f"m{i}", v, {"algo.lr": 1e-3 * (i + 1), "algo.ent_coef": 0.01})
        for i, v in enumerate(values)
    ]


def test_bottom_fraction_copies_from_top_fraction():
    decisions = exploit_explore(scores(10, 500, 20, 300, 5, 400, 8, 450), [LR], 0.25, rng(0))
    assert cut(8, 0.25) == 2
    assert sorted(d.recipient for d in decisions) == ["m4", "m6"]  # the two worst
    assert {d.donor for d in decisions} <= {"m1", "m7"}  # the two best
    for d in decisions:
        donor = int(d.donor[1:])
        assert d.donor_hyperparameters == {"algo.lr": 1e-3 * (donor + 1), "algo.ent_coef": 0.01}
        assert d.donor_score > d.recipient_score


def test_a_member_as_good_as_its_donor_is_left_alone_and_fewer_than_two_do_nothing():
    assert exploit_explore(scores(100, 100, 100, 100), [LR], 0.5, rng(0)) == []
    assert exploit_explore(scores(100), [LR], 0.5, rng(0)) == []
    assert cut(2, 0.1) == 1 and cut(3, 0.5) == 1 and cut(10, 0.5) == 5


def test_same_seed_same_decisions_other_seed_other_values():
    runs = [exploit_explore(scores(1, 9, 2, 8, 3, 7), [LR, ENT], 0.5, rng(s)) for s in (3, 3, 4)]
    assert runs[0] == runs[1]
    assert [d.new for d in runs[0]] != [d.new for d in runs[2]]


def test_perturbation_stays_within_bounds_and_uses_the_factors():
    generator = rng(0)
    for value in (1e-5, 1e-3, 1e-2):
        for _ in range(200):
            new = LR.perturb(value, generator, (0.8, 1.2), resample_probability=0.0)
            assert 1e-5 <= new <= 1e-2
            assert new in (max(value * 0.8, 1e-5), min(value * 1.2, 1e-2))
    samples = [LR.perturb(1e-3, generator, resample_probability=1.0) for _ in range(500)]
    assert min(samples) >= 1e-5 and max(samples) <= 1e-2
    assert np.median(np.log10(samples)) == pytest.approx(-3.5, abs=0.3)  # log-uniform
    assert {EPOCHS.perturb(4, generator) for _ in range(50)} <= set(map(float, range(1, 11)))


def test_search_space_declaration_and_its_errors():
    from surreal.algos.ppo.config import PPOConfig

    space = parse_space(["algo.lr:1e-5:1e-2:log", "algo.update_epochs:1:10:int"])
    assert space == [LR, EPOCHS]
    check_space(space, PPOConfig())
    for bad, message in [
        (["lr:1e-5:1e-2"], "KEY:LOW:HIGH"),
        (["algo.lr:1e-2:1e-5"], "LOW < HIGH"),
        (["algo.lr:0:1:log"], "LOW > 0"),
        (["algo.lr:a:b"], "must be numbers"),
    ]:
        with pytest.raises(ConfigError, match=message):
            parse_space(bad)
    with pytest.raises(ConfigError, match="no setting 'algo.lrr'"):
        check_space(parse_space(["algo.lrr:0:1"]), PPOConfig())
    with pytest.raises(ConfigError, match="add :int"):
        check_space(parse_space(["algo.update_epochs:1:10"]), PPOConfig())
    with pytest.raises(ConfigError, match="not a number"):
        check_space(parse_space(["algo.loss:0:1"]), PPOConfig())


def test_pbt_settings_from_the_command_line():
    pbt = make_config(4, ("pbt.interval=5000", "pbt.init=2:algo.lr=1e-6,3:algo.lr=1e-6"))
    assert (pbt.members, pbt.interval, pbt.init) == (4, 5000, ["2:algo.lr=1e-6", "3:algo.lr=1e-6"])
    for bad, message in [
        ("pbt.fraction=0.7", "pbt.fraction"),
        ("pbt.init=9:algo.lr=1", "member 9 of 4"),
        ("pbt.init=algo.lr=1", "INDEX:KEY=VALUE"),
        ("pbt.intervall=3", "did you mean 'pbt.interval'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            make_config(4, (bad,))


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


# --- the files: directives issued by the manager, taken by a real PPO learner -----------------


def ppo_learner(lr: float, seed: int):
    from surreal.algos.ppo import PPOLearner
    from surreal.algos.ppo.config import PPOConfig
    from surreal.api.spaces import EnvInfo
    from surreal.testing import fake_segment_batch

    torch.manual_seed(seed)
    info = EnvInfo(obs_shape=(4,), discrete=True, num_actions=2)
    learner = PPOLearner(PPOConfig(lr=lr, anneal_lr=False, hidden_sizes=(8,)), info)
    learner.learn(fake_segment_batch(info, seed=seed))  # optimizer and normalizer state
    return learner


def population(tmp_path, lrs: list[float], interval: int = 100, learners: bool = True):
    """A population folder as `create_population` writes it (PPO members, no processes); with
    `learners`, real PPO learners and their checkpoints, else stand-in checkpoint files."""
    from surreal.algos.ppo.config import PPOConfig
    from surreal.api.config import Config
    from surreal.pbt.config import to_dict
    from surreal.runtime.runfolder import checkpoint

    pbt = PBTConfig(
        members=len(lrs), interval=interval, fraction=0.5, space=["algo.lr:1e-4:1e-2:log"]
    )
    (tmp_path / store.PBT_FILE).write_text(json.dumps(to_dict(pbt)))
    made = []
    for i, lr in enumerate(lrs):
        run = store_run(tmp_path / f"m{i}", Config(algo=PPOConfig(lr=lr, anneal_lr=False)))
        (run.path / "member.json").write_text(json.dumps({"name": f"m{i}", "interval": interval}))
        if not learners:
            run.checkpoint.write_bytes(f"checkpoint of m{i}".encode())
            continue
        made.append(ppo_learner(lr, seed=i))
        checkpoint.save(run.checkpoint, made[-1], {"global_step": 0})
    return pbt, made


def store_run(path, config):
    from surreal.runtime.runfolder.rundir import RunDir

    run = RunDir(path)
    run.create(config, {"algo": "ppo", "env_info": {}})
    return run


def report(tmp_path, name: str, step: int, eval_return: float, now: float, **extra) -> None:
    status = {"global_step": step, "charts/eval_return": eval_return, "eval_step": step - 1}
    status.update(best_eval_return=eval_return, updated=now, **extra)
    (tmp_path / name / "status.json").write_text(json.dumps(status))


class FakeLoop:
    """What `Member.after_step` uses of the runtime's LearnerLoop."""

    def __init__(self, learner, step: int) -> None:
        self.learner, self.counters = learner, {"global_step": step, "version": 7}
        self.published, self.saved = [], 0

    def publish(self) -> None:
        self.published.append(self.counters["version"])

    def save(self) -> None:
        self.saved += 1


def test_manager_round_copies_the_donors_state_into_the_worst_member(tmp_path):
    pbt, learners = population(tmp_path, [1e-3, 1e-3, 1e-6, 1e-6])
    manager = Manager(tmp_path, pbt, clock=lambda: 1000.0)
    for name, step, ret in [("m0", 120, 200.0), ("m1", 130, 150.0), ("m2", 90, 9.0)]:
        report(tmp_path, name, step, ret, now=999.0)
    report(tmp_path, "m3", 300, 10.0, now=500.0)  # silent for 500 s: not answering
    assert manager.poll() == []  # m0 and m1 are due, neither in the bottom; m2 (90) is not due
    assert manager.poll() is None  # checked already: next at 200 steps
    report(tmp_path, "m2", 110, 9.0, now=999.0)
    decisions = manager.poll()
    assert [(d.recipient, d.donor) for d in decisions] == [("m2", "m0")]  # top half of 3: m0
    (d,) = decisions
    assert d.old == {"algo.lr": 1e-6} and d.donor_hyperparameters == {"algo.lr": 1e-3}
    assert 1e-4 <= d.new["algo.lr"] <= 1e-2
    log = store.read_log(tmp_path)
    assert [r["event"] for r in log] == ["round", "copy", "round"]
    assert log[1]["recipient"] == "m2" and log[1]["donor"] == "m0" and log[2]["left_out"] == ["m3"]
    assert log[0]["due"] == ["m0", "m1"] and log[2]["due"] == ["m2"]
    assert (
        json.loads((tmp_path / "m2" / "config.json").read_text())["algo"]["lr"] == d.new["algo.lr"]
    )
    assert (tmp_path / "best.json").is_file() and json.loads((tmp_path / "best.json").read_text())[
        "member"
    ] == "m0"

    recipient, donor = learners[2], learners[0]

    def same_weights() -> bool:
        pairs = zip(
            recipient.model.state_dict().values(), donor.model.state_dict().values(), strict=True
        )
        return all(torch.equal(a, b) for a, b in pairs)

    assert not same_weights()
    loop = FakeLoop(recipient, step=110)
    Member.attach(tmp_path / "m2").after_step(loop)
    assert same_weights()
    donor_adam, got_adam = donor.optimizer.state_dict()["state"], recipient.optimizer.state_dict()
    assert torch.equal(got_adam["state"][0]["exp_avg"], donor_adam[0]["exp_avg"])  # optimizer
    np.testing.assert_array_equal(recipient.normalizer.mean, donor.normalizer.mean)  # normalizer
    assert recipient.config.lr == d.new["algo.lr"]
    assert all(g["lr"] == d.new["algo.lr"] for g in got_adam["param_groups"])
    assert loop.published == [8] and loop.saved == 1 and loop.counters["global_step"] == 110
    assert json.loads((tmp_path / "m2" / "pbt" / "applied.json").read_text())["step"] == 110
    Member.attach(tmp_path / "m2").after_step(loop)
    assert loop.published == [8]  # taken once

    # the next round ranks m2 only with an evaluation of its new weights (after step 110)
    for name, step, ret in [("m0", 220, 300.0), ("m1", 230, 100.0), ("m2", 210, 50.0)]:
        report(tmp_path, name, step, ret, now=999.0)
    (tmp_path / "m2" / "status.json").write_text(
        json.dumps(
            {"global_step": 210, "charts/eval_return": 5.0, "eval_step": 110, "updated": 999}
        )
    )
    manager.poll()
    assert store.read_log(tmp_path)[-1]["left_out"] == ["m2", "m3"]


def test_manager_is_deterministic_and_resumes_its_random_sequence(tmp_path):
    def decide(folder, rounds):
        pbt, _ = population(folder, [1e-3, 2e-3, 1e-6, 1e-6], interval=10, learners=False)
        out = []
        for r in range(1, rounds + 1):
            manager = Manager(folder, pbt, clock=lambda: 100.0)  # a fresh (restarted) manager
            for i in range(4):
                report(folder, f"m{i}", 10 * r, float(100 - 30 * i), now=99.0)
                (folder / f"m{i}" / "pbt").mkdir(exist_ok=True)
                (folder / f"m{i}" / "pbt" / "applied.json").write_text('{"id": 99}')
            out.append([dataclasses.asdict(d) for d in manager.poll()])
        return out

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert decide(a, 3) == decide(b, 3)
    assert json.loads((a / store.STATE_FILE).read_text())["round"] == 3


def test_population_experiment_names_every_members_processes_and_services(tmp_path):
    from surreal.launch import experiment as launching
    from surreal.pbt import build_experiment, plan_population

    base = launching.plan("ppo", env="gym:CartPole-v1", actors=2, folder=str(tmp_path))
    pp = plan_population(base, make_config(3, ("pbt.init=2:algo.lr=1e-6",)))
    exp = build_experiment(pp)
    names = exp.process_names()
    for m in ("m0", "m1", "m2"):
        for role in ("learner", "buffer", "param-server", "evaluator", "metrics", "actor-1"):
            assert f"{m}-{role}" in names
    assert "population-manager" in names and len(names) == 3 * 7 + 1
    learner = exp.process("m1-learner")
    # its /metrics port (surreal.monitoring) is prefixed like every service of the member
    assert set(learner.bound) == {"m1-params-pub", "m1-prom-learner"}
    assert learner.connected == ["m1-batches", "m1-metrics", "m1-params"]  # params: restarts
    assert learner.env["SURREAL_SERVICE_PREFIX"] == "m1-" and learner.restart.mode == "on-failure"
    assert str(tmp_path) in learner.command[-3]  # its own run folder: RUN/m1
    lr = base.config.algo.lr  # the default for CartPole's task family (surreal.algos.families)
    assert [m.config.algo.lr for m in pp.members] == [lr, lr, 1e-6]
    assert len({m.config.run.seed for m in pp.members}) == 3


def test_a_population_needs_the_runtime_learner_loop(tmp_path):
    from surreal.launch import experiment as launching
    from surreal.pbt import plan_population

    base = launching.plan("ddpg", env="gym:Pendulum-v1", folder=str(tmp_path))
    with pytest.raises(ConfigError, match="own learner process"):
        plan_population(base, make_config(2))


def test_learning_curve_plot_of_a_population(tmp_path):
    from surreal.pbt.plot import curves, plot

    population(tmp_path, [1e-3, 1e-6], learners=False)
    for i, values in enumerate([(20.0, 200.0, 500.0), (9.0, 9.0, 300.0)]):
        with (tmp_path / f"m{i}" / "metrics.jsonl").open("w") as out:
            for k, v in enumerate(values):
                out.write(json.dumps({"step": 1000 * k, "name": "charts/eval_return", "value": v}))
                out.write("\n" + json.dumps({"step": 1000 * k, "name": "charts/sps", "value": 1.0}))
                out.write("\n")
    copy = {"event": "copy", "donor": "m0", "recipient": "m1", "recipient_score": 9.0}
    store.append_log(tmp_path, {**copy, "step": 1000, "recipient_step": 1100})
    assert curves(tmp_path)["m1"] == [(0, 9.0), (1000, 9.0), (2000, 300.0)]
    plot(tmp_path, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
