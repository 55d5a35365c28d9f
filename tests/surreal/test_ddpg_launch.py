"""`surreal launch ddpg`: sharded topology, learning Pendulum, and kill -9 of replay/parameter shards."""

from __future__ import annotations

import json
import os
import signal
import time
from types import SimpleNamespace

import pytest

from symphony.testing import scaled

pytest.importorskip("gymnasium")
pytest.importorskip("torch")

from surreal.algos.ddpg.learner_loop import slack  # noqa: E402
from surreal.testing import surreal_cli  # noqa: E402
from tests.surreal.helpers import (  # noqa: E402
    PENDULUM_SMALL,
    describe,
    processes_of,
    start_launch,
    status,
    wait_until,
)

SMALL = [*PENDULUM_SMALL, "--set", "eval.episodes=5", "--set", "eval.every_s=2"]


@pytest.mark.timeout(60)
@pytest.mark.integration
def test_dry_run_shows_k_replay_shards_and_k_parameter_servers_behind_proxies(tmp_path):
    result = surreal_cli(
        [
            "launch",
            "ddpg",
            "--env",
            "gym:Pendulum-v1",
            "--actors",
            "3",
            "--dry-run",
            "--set",
            "algo.replay_shards=3",
            "--set",
            "algo.param_shards=2",
        ],
        tmp_path,
        tmp_path / "home",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for name in (
        "replay-proxy",
        "replay-0",
        "replay-1",
        "replay-2",
        "param-proxy",
        "param-server-0",
        "param-server-1",
        "learner",
        "actor-2",
        "evaluator",
        "metrics",
    ):
        assert f"name: {name}\n" in out, name
    assert "name: replay-3\n" not in out and "name: param-server-2\n" not in out
    assert not (tmp_path / "runs").exists()  # --dry-run writes nothing


@pytest.mark.timeout(300)
@pytest.mark.integration
def test_td3_is_ddpg_with_the_td3_options_and_user_settings_still_win(tmp_path):
    import json

    args = ["launch", "td3", "--env", "gym:Pendulum-v1", "--dry-run", "--set", "algo.actor_delay=3"]
    result = surreal_cli(args, tmp_path, tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "# task family: classic" in result.stdout
    text = result.stdout.split("\n", 2)[2]  # after the two comment lines: the config
    algo = json.JSONDecoder().raw_decode(text)[0]["algo"]
    assert (algo["twin_critics"], algo["policy_smoothing"]) == (True, 0.2)  # TD3's options
    assert algo["actor_delay"] == 3  # the user's --set wins over TD3's 2
    assert not (tmp_path / "runs").exists()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_td3_reaches_minus_200_on_pendulum_within_15k_env_steps_and_stops_there(tmp_path):
    started = time.monotonic()
    result = surreal_cli(
        ["launch", "td3", "--env", "gym:Pendulum-v1", "--steps", "15000", "--name", "td3"]
        + ["--trial", "a", "--quiet", "--set", "run.stop_at_return=-200"],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(560),
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    st = status(tmp_path / "runs" / "td3" / "a")
    print(
        f"TD3 Pendulum-v1: best eval {st['best_eval_return']:.1f} at env step "
        f"{st.get('eval_step')} (stored {st['global_step']}), wall {wall:.0f} s"
    )
    assert st["best_eval_return"] >= -200
    assert st["global_step"] < 15000  # stopped at the goal, before the budget


@pytest.mark.slow
@pytest.mark.long  # the README's DDPG line is this command, and test_readme checks its -200
@pytest.mark.timeout(600)
def test_ddpg_reaches_minus_200_on_pendulum_within_30k_env_steps(tmp_path):
    started = time.monotonic()
    result = surreal_cli(
        [
            "launch",
            "ddpg",
            "--env",
            "gym:Pendulum-v1",
            "--actors",
            "2",
            "--steps",
            "30000",
            "--name",
            "pend",
            "--trial",
            "a",
            "--set",
            "run.stop_at_return=-200",
            *SMALL,
        ],
        tmp_path,
        tmp_path / "home",
        timeout=scaled(560),
    )
    wall = time.monotonic() - started
    assert result.returncode == 0, result.stdout + result.stderr
    st = status(tmp_path / "runs" / "pend" / "a")
    print(
        f"DDPG Pendulum-v1: best eval {st['best_eval_return']:.1f} at env step "
        f"{st.get('eval_step')} (stored {st['global_step']}), wall {wall:.0f} s"
    )
    assert st["best_eval_return"] >= -200
    assert st["global_step"] <= 30000


@pytest.mark.timeout(400)
@pytest.mark.integration
def test_kill_9_of_a_replay_shard_and_a_parameter_server_training_goes_on(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "shard" / "a"
    proc = start_launch(
        [
            "ddpg",
            "--env",
            "gym:Pendulum-v1",
            "--actors",
            "2",
            "--steps",
            "10000000",
            "--name",
            "shard",
            "--trial",
            "a",
            "--set",
            "algo.replay_shards=2",
            "--set",
            "algo.param_shards=2",
            "--set",
            "algo.replay_start=500",
            *SMALL,
        ],
        tmp_path,
        home,
    )
    try:
        wait_until(lambda: status(run).get("version", 0) >= 10, 180, "learner updates", proc)
        replay = describe(home, "shard-a").process("replay-0")
        wait_until(
            lambda: "buffer/shard0_started" in status(run), 30, "replay-0's first report", proc
        )
        held, first_start = status(run)["buffer/shard0_added"], status(run)["buffer/shard0_started"]
        os.kill(replay.pid, signal.SIGKILL)
        wait_until(
            lambda: (lambda p: p.restarts >= 1 and p.state == "running")(
                describe(home, "shard-a").process("replay-0")
            ),
            60,
            "replay-0 to restart",
            proc,
        )
        # The restarted shard reports with its own start time, and its count starts again from 0
        # (it may pass the dead shard's count within its first 2-s report when actors are fast).
        wait_until(
            lambda: status(run).get("buffer/shard0_started", first_start) > first_start,
            60,
            "the restarted shard to report",
            proc,
        )
        restarted_count = status(run)["buffer/shard0_added"]
        server = describe(home, "shard-a").process("param-server-1")
        os.kill(server.pid, signal.SIGKILL)
        wait_until(
            lambda: (lambda p: p.restarts >= 1 and p.state == "running")(
                describe(home, "shard-a").process("param-server-1")
            ),
            60,
            "param-server-1 to restart",
            proc,
        )
        version, step = status(run)["version"], status(run)["global_step"]
        # training goes on: new parameter versions, new experience, and the new shard refills
        wait_until(
            lambda: (
                status(run).get("version", 0) >= version + 5
                and status(run).get("global_step", 0) > step + 300
            ),
            180,
            "training to go on",
            proc,
        )
        assert status(run)["buffer/shard0_started"] > first_start  # a fresh shard, refilling
        wait_until(
            lambda: status(run)["buffer/shard0_added"] > restarted_count,
            60,
            "the restarted shard to refill",
            proc,
        )
        print(
            f"replay-0 held {held} transitions when killed: that experience is lost "
            "(plus chunks queued for it in the proxy); the other shard kept serving"
        )
        assert describe(home, "shard-a").process("learner").state == "running"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=scaled(180))
    wait_until(lambda: not processes_of(run), 30, "every process to end")


@pytest.mark.timeout(600)
@pytest.mark.integration
def test_resume_continues_the_learner_from_its_checkpoint(tmp_path):
    import torch

    home, run = tmp_path / "home", tmp_path / "runs" / "res" / "a"
    quick = ["--set", "algo.replay_start=300", "--set", "eval.every_s=0", *SMALL[:6]]
    first = surreal_cli(
        [
            "launch",
            "ddpg",
            "--env",
            "gym:Pendulum-v1",
            "--actors",
            "1",
            "--steps",
            "800",
            "--name",
            "res",
            "--trial",
            "a",
            *quick,
        ],
        tmp_path,
        home,
    )
    assert first.returncode == 0, first.stdout + first.stderr
    before = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    # a new run: the learner samples from the warm-up's 300 random steps on and the actor keeps
    # pace from there (one update per env step); it once stood at its first parameters while
    # the learner took ~300 updates on the warm-up alone. The learner keeps the bound from its
    # side (`UpdatePace`, its slack: the actors' unpushed steps and a version's updates): a
    # loaded machine once slowed the actor and the learner took 732 where 724 were allowed
    config = json.loads((run / "config.json").read_text())
    ahead = slack(SimpleNamespace(**config["algo"]), config["run"]["actors"])
    assert before["learner"]["iteration"] <= before["counters"]["global_step"] - 300 + ahead, (
        before["learner"]["iteration"],
        before["counters"]["global_step"],
        ahead,
    )
    again = surreal_cli(["launch", "--resume", str(run), "--steps", "1600"], tmp_path, home)
    assert again.returncode == 0, again.stdout + again.stderr
    after = torch.load(run / "checkpoints" / "latest.pt", weights_only=False)
    assert "resumed from" in (run / "logs" / "learner.log").read_text()
    assert after["counters"]["global_step"] >= 1600 > before["counters"]["global_step"]
    assert after["learner"]["iteration"] > before["learner"]["iteration"] > 0
    # the restored replay needs no warm-up: from its first step the actor keeps pace with the
    # learner (one update per env step), not replay_start steps ahead of it
    added = after["counters"]["global_step"] - before["counters"]["global_step"]
    updates = after["learner"]["iteration"] - before["learner"]["iteration"]
    assert updates >= added - 2 * 32, (added, updates)  # two chunks' slack (it was 800 vs 496)
    assert (
        after["learner"]["actor_opt"]["state"][0]["step"]
        > before["learner"]["actor_opt"]["state"][0]["step"]
    )
