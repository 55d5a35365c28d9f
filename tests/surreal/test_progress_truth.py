"""Progress that tells the truth (issue 34, item 5): the family line shows only what the user did
not set, a resumed run shows its new budget and its best eval from the first line (and no
learner figures of the launch before), and DDPG/TD3/ES report the learner's busy share and lag."""

from __future__ import annotations

import io
import json
import time
from types import SimpleNamespace

import pytest

from surreal.algos.es.config import ESConfig
from surreal.algos.es.loop import build
from surreal.algos.es.master import ESMaster
from surreal.algos.families import describe, summary, user_keys
from surreal.launch.experiment import plan
from surreal.launch.progress import StatusReader, best_eval, format_status, monitor
from surreal.launch.progress_view import fields, policy_lag
from surreal.runtime.runfolder.rundir import RunDir
from surreal.testing import surreal_cli
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(120)


def test_the_family_line_leaves_out_what_the_user_set_and_wraps_at_100_columns(tmp_path):

    mine = plan(
        "ppo",
        env="gym:CartPole-v1",
        steps=20_000,
        overrides=("algo.lr=3e-4", "algo.gamma=0.98"),
        folder=str(tmp_path),
    )
    text = summary(mine.config)
    lines = text.splitlines()
    assert lines[0].startswith("task family: classic (algo.norm_obs=False, ")
    assert len(lines) > 1 and all(len(line) <= 100 for line in lines), lines
    assert all(line.startswith("    ") and line[4] != " " for line in lines[1:]), lines
    assert "run.steps" not in text and "algo.lr" not in text  # the user's values replaced them
    assert "algo.gamma=0.98" in text  # the same value as the family's: shown from the config ...
    exact = summary(mine.config, user=user_keys(20_000, None, ("algo.lr=3e-4", "algo.gamma=0.98")))
    assert "algo.gamma" not in exact and "algo.gae_lambda=0.8" in exact  # ... not with the keys
    assert text.endswith("overrides win)") and "\n" not in summary(mine.config, width=None)
    defaults = summary(plan("ppo", env="gym:CartPole-v1", folder=str(tmp_path)).config)
    assert "run.steps=200000" in defaults and "algo.lr=0.001" in defaults


def test_describe_keeps_its_one_line_for_the_callers_it_had():
    settings = {"algo.norm_obs": False, "run.steps": 200_000}
    assert describe("classic", settings) == (
        "task family: classic (algo.norm_obs=False, run.steps=200000; --set overrides win)"
    )
    assert describe("classic", settings, user={"run.steps", "algo.norm_obs"}) == (
        "task family: classic (no other changes; --set overrides win)"
    )
    assert describe("other", {}) == "task family: other (no changes; --set overrides win)"


def _stale_run(tmp_path) -> RunDir:
    """A run folder as an earlier launch left it: budget 1,000 used, best eval 255.8."""
    old = {
        "global_step": 1000,
        "total_steps": 1000,
        "actor_steps": 1100,
        "episodes": 40,
        "finished": True,
        "episodic_return": 200.0,
        "charts/eval_return": 230.0,
        "best_eval_return": 255.8,
        "charts/learner_its": 20.0,
        "charts/learn_time": 0.04,
        "charts/policy_lag": 0.5,
        "charts/sps": 900.0,
        "buffer/fill": 3.0,
        "started": time.time() - 200,
        "updated": time.time() - 100,
    }
    (tmp_path / "status.json").write_text(json.dumps(old))
    records = [("charts/eval_return", 255.8), ("losses/q", 1.0), ("charts/eval_return", 230.0)]
    with (tmp_path / "metrics.jsonl").open("w") as out:
        for name, value in records:
            out.write(json.dumps({"step": 500, "name": name, "value": value, "time": 1.0}) + "\n")
        out.write('{"step": 900, "name": "charts/eval_ret')  # a line still being written
    return RunDir(tmp_path)


def test_the_best_eval_comes_from_every_launch_of_the_run(tmp_path):
    run = _stale_run(tmp_path)
    assert best_eval(run) == 255.8
    assert best_eval(run, {"best_eval_return": 300.0}) == 300.0
    assert best_eval(RunDir(tmp_path / "new")) is None


def test_an_earlier_launchs_status_shows_only_its_steps_with_the_new_budget(tmp_path):
    run = _stale_run(tmp_path)
    reader = StatusReader(run, total=3000)
    status, stale = reader.read()
    assert stale and reader.launch_best is None  # no eval of this launch yet
    values = fields(status, None, 3000, [])
    assert values["step"] == "1,000/3,000 (33%)"  # the new budget, not 1,000/1,000
    assert values["eval"] == "- (best 255.8)"
    assert values["learner"] == "- busy, - it/s" and values["lag"] == "-"
    assert values["return"] == "-" and values["steps/s"] == "-"
    fresh = {"global_step": 1000, "total_steps": 3000, "updated": time.time()}
    fresh |= {"charts/eval_return": 218.6, "best_eval_return": 218.6}
    run.status_file.write_text(json.dumps(fresh))  # the new metrics sink's first status
    status, stale = reader.read()
    assert not stale and reader.launch_best == 218.6
    assert fields(status, None, 3000, [])["eval"] == "218.6 (best 255.8)"


class _Resumed:
    """A resumed run's processes: the old status stays for three polls, then the new sink
    writes its own (budget 3,000; its best starts afresh at 218.6), then the learner exits."""

    name = "resumed"

    def __init__(self, run: RunDir) -> None:
        self.run, self.tick = run, 0

    def status(self):
        self.tick += 1
        if self.tick == 4:
            fresh = {"global_step": 1200, "total_steps": 3000, "updated": time.time()}
            fresh |= {"charts/eval_return": 218.6, "best_eval_return": 218.6}
            fresh |= {"charts/learner_its": 10.0, "charts/learn_time": 0.05, "version": 9}
            fresh |= {"policy_version_actor_0": 7, "policy_version_actor_1": 8}
            self.run.status_file.write_text(json.dumps(fresh))
        state = "exited" if self.tick >= 6 else "running"
        learner = SimpleNamespace(name="learner", state=state, exit_code=0, restarts=0)
        actor = SimpleNamespace(name="actor-0", state="running", exit_code=None, restarts=0)
        return SimpleNamespace(processes=[learner, actor])


def test_a_resumed_run_shows_the_new_budget_and_its_best_eval_from_the_first_line(tmp_path):
    run = _stale_run(tmp_path)
    out = io.StringIO()
    # the old best (255.8) is above the goal: this launch's evals decide, not the earlier one's
    code = monitor(_Resumed(run), run, stop_at_return=250.0, out=out, total=3000, every_s=0.0)
    assert code == 0
    lines = out.getvalue().splitlines()
    assert "step 1,000/3,000 (33%)" in lines[0] and "eval - (best 255.8)" in lines[0], lines
    assert "learner - busy, - it/s" in lines[0] and "lag -" in lines[0]
    assert "return -" in lines[0] and "| - steps/s" in lines[0]
    text = out.getvalue()
    assert "/1,000" not in text and "best 218.6" not in text and "goal reached" not in text
    assert "20.00 it/s" not in text  # the earlier launch's learner figures
    last = lines[-1]
    assert "step 1,200/3,000 (40%)" in last and "eval 218.6 (best 255.8)" in last
    assert "learner 50% busy, 10.00 it/s" in last and "lag 1.50" in last


def test_lag_is_the_learners_own_else_how_far_the_actors_policy_is_behind():
    ppo = {"charts/policy_lag": 0.25, "version": 9, "policy_version_actor_0": 2}
    assert policy_lag(ppo) == 0.25
    ddpg = {"version": 12, "policy_version_actor_0": 10, "policy_version_actor_1": 11}
    assert policy_lag(ddpg) == 1.5
    assert policy_lag({"version": 3, "policy_version_actor_0": 4}) == 0.0  # reports cross
    assert policy_lag({"version": 3}) is None and policy_lag({"policy_version_actor_0": 1}) is None
    assert policy_lag({"version": None, "policy_version_actor_0": None}) is None
    line = format_status({"global_step": 10, **ddpg}, 1.0, 100)
    assert "| lag 1.50 |" in line


def test_the_es_master_times_each_generations_update(tmp_path):

    cfg = ESConfig(hidden=(8,), population=4, noise_size=10_000, max_episode_steps=10)
    _, policy, state, noise = build("gym:CartPole-v1", cfg, 0, str(tmp_path))
    master = ESMaster(policy, state, noise, cfg, generations=2, seed=0)
    dim, result = policy.sizes[0], None
    for _ in range(100):  # one worker answers every task it gets
        reply = master.handle({"worker": "w", "generation": -1, "result": result})
        if reply["op"] == "stop":
            break
        result = None
        if reply["op"] == "task":
            result = {"generation": reply["generation"], "task": reply["task"], "steps": 10}
            result |= {"r_pos": 1.0 + reply["task"], "r_neg": 0.5, "obs_count": 10}
            result |= {"obs_sum": [0.0] * dim, "obs_sumsq": [1.0] * dim}
    assert len(master.finished) == 2 and len(master.update_s) == 2
    assert all(0.0 <= s < 5.0 for s in master.update_s)


@pytest.mark.timeout(200)
@pytest.mark.integration
def test_a_ddpg_run_reports_the_learners_busy_share_and_the_policy_lag(tmp_path):

    # 5,000 steps: with the fork server a 1,000-step run learned for ~1 s, so no periodic line
    # (every 2 s) was sure to fall inside it; 5,000 leave several lines whatever the machine's speed
    args = ["launch", "ddpg", "--env", "gym:Pendulum-v1", "--actors", "1", "--steps", "5000"]
    args += ["--name", "busy", "--trial", "a"]  # plain lines every 2 s (stdout is a pipe)
    for setting in ("env.num_envs=1", "algo.hidden=32,32", "algo.batch_size=64"):
        args += ["--set", setting]
    args += ["--set", "algo.replay_start=300", "--set", "eval.every_s=60"]
    result = surreal_cli(args, tmp_path, tmp_path / "home", timeout=scaled(180))  # ~15 s unloaded
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    status = json.loads((tmp_path / "runs" / "busy" / "a" / "status.json").read_text())
    assert status["charts/learn_time"] > 0 and status["charts/learner_its"] > 0
    assert isinstance(status["version"], int) and "policy_version_actor_0" in status
    values = fields(status, None, 5000, [])
    busy, its = values["learner"].split(" busy, ")
    assert busy.endswith("%") and 0 < float(busy[:-1]) <= 100, values
    assert float(its.split(" it/s")[0]) > 0 and float(values["lag"]) >= 0, values
    assert "| lag -" not in format_status(status, 1.0, 5000)
    progress = [line for line in result.stdout.splitlines() if line.startswith("[")]
    assert any("% busy" in line and "| lag -" not in line for line in progress), progress


class _Reaching:
    """A fresh run: its second status has an eval at the goal; its learner exits at the fifth
    look (so a watch that missed the goal ends, later)."""

    name = "reaching"

    def __init__(self, run: RunDir) -> None:
        self.run, self.tick = run, 0

    def status(self):
        self.tick += 1
        eval_return = -150.0 if self.tick >= 2 else -900.0
        state = {"global_step": 1000 * self.tick, "total_steps": 15000, "updated": time.time()}
        state |= {"charts/eval_return": eval_return, "best_eval_return": eval_return}
        self.run.status_file.write_text(json.dumps(state))
        state = "exited" if self.tick >= 5 else "running"
        learner = SimpleNamespace(name="learner", state=state, exit_code=None, restarts=0)
        return SimpleNamespace(processes=[learner])


def test_an_eval_at_the_goal_ends_the_watch_with_0_while_the_learner_still_runs(tmp_path):
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    handle = _Reaching(run)
    code = monitor(handle, run, stop_at_return=-200.0, out=io.StringIO(), total=15000)
    assert code == 0 and handle.tick == 2  # the goal is a verdict: the watch ends at once


def test_the_learner_field_says_when_an_off_policy_learner_waits_for_env_steps():
    status = {"global_step": 900, "charts/learner_its": 10.0, "charts/learn_time": 0.04}
    assert fields(status, None, 5000, [])["learner"] == "40% busy, 10.00 it/s"
    paced = fields(status | {"charts/learner_paced": 0.55}, None, 5000, [])
    assert paced["learner"] == "40% busy, 10.00 it/s, waits for env steps 55%"
    hardly = fields(status | {"charts/learner_paced": 0.01}, None, 5000, [])
    assert hardly["learner"] == "40% busy, 10.00 it/s"  # under 5%: not worth a word
