"""`run.stop_at_return` ends a run that no launcher watches (kube always; slurm and local once
`surreal launch` died): the evaluator tells the learner, which ends as at its budget.

Before, only the launcher's watch compared the evaluations with the goal: a detached run, or one
whose launcher was killed, went on to its full step budget.
"""

import logging
from types import SimpleNamespace

import pytest

import caraml
from caraml.testing import free_port
from surreal.launch import experiment as launching
from surreal.runtime.wire import goal
from surreal.testing import surreal_cli
from symphony.records import Records
from symphony.testing import scaled
from tests.surreal.helpers import (
    QUICK,
    launch_unwatched,
    process_log,
    processes_of,
    status,
    wait_until,
)


class _Process:
    """What `GoalInbox` and `GoalSender` read of their component: its config, the run's token,
    its log, and the address of `learner-goal` (a real port on 127.0.0.1)."""

    def __init__(self, port: int, token: str | None, goal_return: float = 100.0):
        self.config = SimpleNamespace(run=SimpleNamespace(stop_at_return=goal_return))
        self.token = token
        self.log = logging.getLogger("test-goal")
        self._address = SimpleNamespace(
            bind_tcp=f"tcp://127.0.0.1:{port}", tcp=f"tcp://127.0.0.1:{port}"
        )

    def declares(self, service: str) -> bool:
        return service == goal.SERVICE

    def address(self, service: str):
        assert service == goal.SERVICE
        return self._address


def test_the_inbox_takes_only_the_runs_word_of_a_return_at_the_goal():
    port = free_port()
    inbox = goal.GoalInbox(_Process(port, token="t0k"))
    stranger = caraml.Pusher(f"tcp://127.0.0.1:{port}")
    sender = goal.GoalSender(_Process(port, token="t0k"))
    try:
        assert not inbox.reached()
        for junk in (b"\x00\xff", {"eval_return": 500.0}, {"eval_return": "x", "token": "t0k"}):
            stranger.push(junk, timeout=2.0)
        stranger.push({"eval_return": float("nan"), "step": 1, "token": "t0k"}, timeout=2.0)
        stranger.push({"eval_return": 99.0, "step": 1, "token": "t0k"}, timeout=2.0)  # below
        sender.tell(99.5, 10)  # below the goal: the evaluator sends nothing

        def read_all():
            assert not inbox.reached(), "junk, no token, NaN and 99 < 100 end nothing"
            return sum(inbox.guard.dropped.values()) == 4 and inbox.guard.accepted == 1

        wait_until(read_all, 10, "the junk and the return below the goal to arrive")
        assert inbox.guard.dropped["no-token"] == 1
        assert inbox.why() == "budget used"
        sender.tell(101.5, 1234)
        wait_until(inbox.reached, 10, "the evaluator's word")
        assert inbox.hit == {"eval_return": 101.5, "step": 1234}
        assert inbox.why() == "eval 101.5 >= run.stop_at_return 100.0"
    finally:
        for end in (stranger, sender, inbox):
            end.close()


@pytest.mark.parametrize(
    "sets, wired",
    [
        (["run.stop_at_return=60"], True),
        ([], False),
        (["run.stop_at_return=60", "eval.every_s=0"], False),
        (["run.stop_at_return=60", "run.learner_replicas=2"], False),
    ],
)
def test_the_learner_binds_the_goal_only_when_it_can_end_there(tmp_path, sets, wired):
    plan = launching.plan(
        "ppo", env="gym:CartPole-v1", actors=2, overrides=tuple(sets), folder=str(tmp_path)
    )
    exp = launching.build_experiment(plan)
    assert goal.applies(plan.config) is wired, sets
    bound = {p.name for p in exp.processes() if goal.SERVICE in p.bound}
    connected = {p.name for p in exp.processes() if goal.SERVICE in p.connected}
    assert (bound, connected) == (({"learner"}, {"evaluator"}) if wired else (set(), set()))


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_a_run_whose_launcher_was_killed_ends_at_its_goal_not_its_budget(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "goal" / "a"
    args = ["ppo", "--env", "gym:CartPole-v1", "--actors", "2", "--steps", "400000"]
    sets = ["--set", "run.stop_at_return=60", "--name", "goal", "--trial", "a", *QUICK]
    launch_unwatched([*args, *sets], tmp_path, home, run)
    wait_until(lambda: status(run).get("finished"), scaled(300), "the learner to end at its goal")
    ended = status(run)
    assert ended["global_step"] < 400_000, "it ended at its goal, long before its budget"
    assert ended["why"].startswith("eval ") and ended["why"].endswith(">= run.stop_at_return 60.0")
    assert float(ended["why"].split()[1]) >= 60.0
    # the learner's end is the experiment's: the supervisor stops every other process
    wait_until(lambda: not processes_of(run), 60, "every process to end")
    wait_until(lambda: Records(home).load("goal-a").outcome, 30, "the supervisor's record")
    assert Records(home).load("goal-a").outcome == "finished"
    said = surreal_cli(["status", str(run)], tmp_path, home)
    assert said.returncode == 0, said.stdout + said.stderr
    assert f"finished ({ended['why']})" in said.stdout, said.stdout
    learner_log = process_log(home, "goal-a", "learner")
    assert f"stopping: {ended['why']}" in learner_log, learner_log[-2000:]
