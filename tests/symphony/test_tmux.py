"""The tmux backend end to end on an isolated tmux server: the ring, restarts, Ctrl-C, delete,
and an `ends_with` process ending the experiment with no launcher watching."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

import symphony
from symphony import Experiment, Process
from symphony.backends.tmux import TmuxBackend
from symphony.records import Records
from symphony.testing import cli, processes_with_run_id, scaled, wait_for
from tests.symphony.test_local import LEADER, SERVER

pytestmark = [pytest.mark.tmux, pytest.mark.timeout(180)]

RING = str(Path(__file__).resolve().parents[2] / "examples" / "01_ring" / "ring.py")


def _states(name="ring"):
    return {p.name: p for p in TmuxBackend(Records()).describe(Records().load(name)).processes}


def _all_running(name="ring", count=3):
    states = _states(name)
    return len(states) == count and all(p.state == "running" and p.pid for p in states.values())


def _tmux(socket, *args):
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, timeout=10)


@pytest.mark.integration
def test_ring_on_tmux_list_describe_logs_delete(symphony_home, tmux_socket):
    launched = cli(
        "launch", RING, "--backend", "tmux", "--detach", env=dict(os.environ, RING_ROUNDS="0")
    )
    assert launched.returncode == 0, launched.stderr
    wait_for(_all_running, what="3 running nodes")
    windows = _tmux(
        tmux_socket, "list-windows", "-t", "ring", "-F", "#{window_name}"
    ).stdout.split()
    assert windows == ["node-0", "node-1", "node-2"]
    record = Records().load("ring")
    env = psutil.Process(_states()["node-0"].pid).environ()  # what the window gave the process
    assert env["SYMPH_RING_1_ADDR"] == f"127.0.0.1:{record.data['endpoints']['ring-1'][1]}"
    assert env["SYMPH_PROCESS"] == "node-0"
    run_id = record.data["run_id"]
    marked = {p.pid for p in processes_with_run_id(run_id)}
    runners = _tmux(
        tmux_socket, "list-panes", "-s", "-t", "ring", "-F", "#{pane_pid}"
    ).stdout.split()
    assert {p.pid for p in _states().values()} | {int(r) for r in runners} <= marked

    listed = cli("list").stdout
    assert "ring" in listed and "tmux" in listed and "3/3" in listed
    described = cli("describe", "ring").stdout
    assert "tmux ring:node-1" in described and described.count("running") >= 3
    wait_for(lambda: "got count" in cli("logs", "ring", "node-2").stdout, what="counts in the log")
    # The log file is complete: it holds the first lines, which scrolled out of the pane long ago.
    wait_for(lambda: len(cli("logs", "ring", "node-0").stdout.splitlines()) > 40, what="a long log")
    assert cli("logs", "ring", "node-0").stdout.startswith("node 0 listening on ring-0")
    pane = _tmux(tmux_socket, "capture-pane", "-p", "-t", "ring:node-0").stdout
    assert "node 0 got count" in pane

    assert cli("delete", "ring").returncode == 0
    assert processes_with_run_id(run_id) == []
    assert _tmux(tmux_socket, "has-session", "-t", "ring").returncode != 0
    assert "no experiments" in cli("list", "--all").stdout


@pytest.mark.integration
def test_kill_9_on_tmux_restarts_and_describe_counts_it(symphony_home, tmux_socket):
    assert (
        cli("launch", RING, "-b", "tmux", "-d", env=dict(os.environ, RING_ROUNDS="0")).returncode
        == 0
    )
    wait_for(_all_running, what="3 running nodes")
    victim = _states()["node-1"].pid
    os.kill(victim, signal.SIGKILL)
    back = wait_for(
        lambda: (s := _states()["node-1"]).restarts == 1 and s.state == "running" and s.pid and s,
        what="node-1 restarted",
    )
    assert back.pid != victim
    row = next(
        line for line in cli("describe", "ring").stdout.splitlines() if line.startswith("node-1")
    )
    assert row.split()[2:4] == ["running", "1"]

    def counts_after_restart():
        return (
            "got count"
            in cli("logs", "ring", "node-1").stdout.split("restart 1 (0/3 crashes)", 1)[-1]
        )

    wait_for(counts_after_restart, timeout=60, what="the restarted node passing the counter")
    run_id = Records().load("ring").data["run_id"]
    assert cli("delete", "ring").returncode == 0
    assert processes_with_run_id(run_id) == []


@pytest.mark.integration
def test_ring_on_tmux_runs_to_the_end(symphony_home, tmux_socket):
    assert (
        cli("launch", RING, "-b", "tmux", "-d", env=dict(os.environ, RING_ROUNDS="3")).returncode
        == 0
    )
    wait_for(
        lambda: {p.state for p in _states().values()} == {"exited"}, timeout=90, what="the end"
    )
    assert "got stop at count 9" in cli("logs", "ring", "node-1").stdout
    assert "finished" in cli("list", "--all").stdout
    # The windows stay open (remain-on-exit) so the last output can still be read in tmux.
    assert "got stop" in _tmux(tmux_socket, "capture-pane", "-p", "-t", "ring:node-1").stdout
    assert cli("delete", "ring").returncode == 0


@pytest.mark.integration
def test_ctrl_c_on_attached_tmux_launch_leaves_no_process(symphony_home, tmux_socket):
    launch = subprocess.Popen(
        [sys.executable, "-m", "symphony", "launch", RING, "-b", "tmux"],
        env=dict(os.environ, RING_ROUNDS="0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: (
                (symphony_home / "experiments" / "ring" / "record.yaml").exists() and _all_running()
            ),
            what="3 running nodes",
        )
        run_id = Records().load("ring").data["run_id"]
        launch.send_signal(signal.SIGINT)
        launch.communicate(
            timeout=scaled(120)
        )  # drains its output: a full pipe would block its exit
        assert launch.returncode != 0
    finally:
        if launch.poll() is None:
            launch.kill()
    assert processes_with_run_id(run_id) == []
    assert _tmux(tmux_socket, "has-session", "-t", "ring").returncode != 0


@pytest.mark.integration
def test_status_comes_from_the_pane_when_the_runner_itself_dies(symphony_home, tmux_socket):
    assert (
        cli("launch", RING, "-b", "tmux", "-d", env=dict(os.environ, RING_ROUNDS="0")).returncode
        == 0
    )
    wait_for(_all_running, what="3 running nodes")
    node = _states()["node-2"].pid
    runner = int(
        _tmux(tmux_socket, "display-message", "-p", "-t", "ring:node-2", "#{pane_pid}").stdout
    )
    assert psutil.Process(node).ppid() == runner
    os.kill(runner, signal.SIGKILL)
    wait_for(lambda: _states()["node-2"].state == "failed", what="node-2 reported failed")
    wait_for(
        lambda: not psutil.pid_exists(node) or psutil.Process(node).status() == "zombie",
        what="the command to die with its runner",
    )
    assert "failed" in cli("describe", "ring").stdout
    run_id = Records().load("ring").data["run_id"]
    assert cli("delete", "ring").returncode == 0
    assert processes_with_run_id(run_id) == []


@pytest.mark.integration
@pytest.mark.parametrize(("code", "outcome"), [(0, "finished"), (3, "failed")])
def test_the_end_of_an_ends_with_process_ends_the_experiment_with_no_launcher(
    records, tmux_socket, code, outcome
):
    """As the local supervisor does (test_local), with nothing watching the detached launch:
    the leader's runner stops the server, which would otherwise idle for 1000 s."""
    exp = Experiment("lead", ends_with=["leader"]).add(
        Process("leader", [sys.executable, "-c", LEADER, str(code)]).connects("web"),
        Process("server", [sys.executable, "-c", SERVER]).binds("web"),
    )
    handle = symphony.launch(exp, "tmux", records=records, socket=tmux_socket)
    run_id = records.load("lead").data["run_id"]
    status = handle.wait(timeout=scaled(60))
    assert status.process("leader").exit_code == code
    assert status.process("server").state == "stopped", status.process("server")
    assert "serving" in handle.logs("server")
    assert "it ends the experiment" in handle.logs("leader")
    assert status.status == outcome  # not "stopped": the server was stopped for it
    assert outcome in cli("list", "--all").stdout
    assert processes_with_run_id(run_id) == []
    handle.delete()
