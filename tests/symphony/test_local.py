"""The local backend end to end, through the real CLI: the ring, restarts, Ctrl-C and delete."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from symphony.backends.local import LocalBackend
from symphony.records import Records
from symphony.testing import cli, processes_with_run_id, scaled, wait_for

pytestmark = pytest.mark.timeout(180)

RING = str(Path(__file__).resolve().parents[2] / "examples" / "01_ring" / "ring.py")

# Two processes that make stopping hard: one ignores SIGTERM, one leaves a grandchild behind
# in a new session (it is found by its SYMPHONY_RUN_ID), and a third serves a port.
STUBBORN = textwrap.dedent("""
    from symphony import Experiment, Process

    def make_experiment():
        return Experiment("stubborn").add(
            Process("deaf", ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]),
            Process("forker", ["sh", "-c", "setsid sleep 1000 & sleep 1000"]),
            Process("server", [{python!r}, "-c", "import socket, os, time; s = socket.socket(); "
                    "s.bind(('127.0.0.1', int(os.environ['SYMPH_WEB_PORT']))); s.listen(); "
                    "print('serving', flush=True); time.sleep(1000)"]).binds("web"),
        )
""").replace("{python!r}", repr(sys.executable))


def _run_id(name="ring"):
    return Records().load(name).data["run_id"]


def _states(name="ring"):
    record = Records().load(name)
    return {p.name: p for p in LocalBackend(Records()).describe(record).processes}


def _all_running(name="ring", count=3):
    states = _states(name)
    return len(states) == count and all(p.state == "running" for p in states.values())


@pytest.mark.integration
def test_ring_runs_attached_to_the_end(symphony_home):
    result = cli("launch", RING, env=dict(os.environ, RING_ROUNDS="2"))
    assert result.returncode == 0, result.stderr
    assert "ring ended: finished" in result.stderr
    listed = cli("list", "--all").stdout
    assert "ring" in listed and "finished" in listed
    assert "no experiments running" in cli("list").stdout
    assert "got stop at count 6" in cli("logs", "ring", "node-2").stdout
    described = cli("describe", "ring").stdout
    rows = [line.split() for line in described.splitlines() if line.startswith("node-")]
    assert [(row[2], row[-3:]) for row in rows] == [("exited", ["exited", "with", "0"])] * 3


@pytest.mark.integration
def test_detached_ring_list_describe_logs_exec_delete(symphony_home):
    result = cli("launch", RING, "--detach", env=dict(os.environ, RING_ROUNDS="0"))
    assert result.returncode == 0, result.stderr
    wait_for(_all_running, what="3 running nodes")
    run_id = _run_id()
    marked = {p.pid for p in processes_with_run_id(run_id)}
    assert {p.pid for p in _states().values()} <= marked  # (python3 may be a wrapper script)
    listed = cli("list", "--mine").stdout
    assert "ring" in listed and "running" in listed and "3/3" in listed
    described = cli("describe", "ri").stdout  # a unique prefix is enough
    assert described.count("running") >= 3 and "node-2" in described
    wait_for(
        lambda: "got count" in cli("logs", "ring", "node-1", "--tail", "3").stdout, what="counts"
    )
    assert len(cli("logs", "ring", "node-1", "--tail", "2").stdout.splitlines()) == 2
    addr = cli("exec", "ring", "node-0", "--", "sh", "-c", "echo $SYMPH_RING_1_ADDR").stdout.strip()
    assert addr == f"127.0.0.1:{Records().load('ring').data['endpoints']['ring-1'][1]}"
    supervisor = LocalBackend(Records()).describe(Records().load("ring")).details["supervisor_pid"]

    deleted = cli("delete", "ring")
    assert deleted.returncode == 0, deleted.stderr
    assert processes_with_run_id(run_id) == []
    assert not psutil.pid_exists(supervisor) or psutil.Process(supervisor).status() == "zombie"
    assert not (symphony_home / "experiments" / "ring").exists()
    assert "no experiments" in cli("list", "--all").stdout


@pytest.mark.integration
def test_kill_9_restarts_the_process_and_the_ring_goes_on(symphony_home):
    assert cli("launch", RING, "-d", env=dict(os.environ, RING_ROUNDS="0")).returncode == 0
    wait_for(_all_running, what="3 running nodes")
    victim = _states()["node-1"].pid
    os.kill(victim, signal.SIGKILL)
    back = wait_for(
        lambda: (s := _states()["node-1"]).restarts == 1 and s.state == "running" and s,
        what="node-1 restarted",
    )
    assert back.pid != victim
    assert _states()["node-0"].state == "running" and _states()["node-0"].restarts == 0
    row = next(
        line for line in cli("describe", "ring").stdout.splitlines() if line.startswith("node-1")
    )
    assert row.split()[3] == "1"  # the RESTARTS column

    def counts_after_restart():
        log = cli("logs", "ring", "node-1").stdout
        return "got count" in log.split("restart 1 (0/3 crashes)", 1)[-1]

    wait_for(counts_after_restart, timeout=60, what="the restarted node passing the counter")
    run_id = _run_id()
    assert cli("delete", "ring").returncode == 0
    assert processes_with_run_id(run_id) == []


@pytest.mark.integration
def test_ctrl_c_on_attached_launch_leaves_no_process(symphony_home, tmp_path):
    exp_file = tmp_path / "stubborn.py"
    exp_file.write_text(STUBBORN)
    launch = subprocess.Popen(
        [sys.executable, "-m", "symphony", "launch", str(exp_file), "-o", "grace_s=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_for(
            lambda: (
                (symphony_home / "experiments" / "stubborn" / "state.json").exists()
                and _all_running("stubborn", 3)
            ),
            what="3 running processes",
        )
        run_id = _run_id("stubborn")
        wait_for(lambda: len(processes_with_run_id(run_id)) >= 4, what="the grandchild")
        launch.send_signal(signal.SIGINT)
        launch.communicate(
            timeout=scaled(120)
        )  # drains its output: a full pipe would block its exit
        assert launch.returncode == 130
    finally:
        if launch.poll() is None:
            launch.kill()
    assert processes_with_run_id(run_id) == []
    assert {p.state for p in _states("stubborn").values()} == {"stopped"}


@pytest.mark.integration
def test_delete_of_a_detached_launch_leaves_no_process_and_frees_the_port(symphony_home, tmp_path):
    exp_file = tmp_path / "stubborn.py"
    exp_file.write_text(STUBBORN)
    assert cli("launch", str(exp_file), "--detach", "-o", "grace_s=1").returncode == 0
    wait_for(lambda: _all_running("stubborn", 3), what="3 running processes")
    run_id = _run_id("stubborn")
    port = Records().load("stubborn").data["endpoints"]["web"][1]
    wait_for(lambda: "serving" in cli("logs", "stub", "serv").stdout, what="the server")
    assert cli("delete", "stubborn").returncode == 0
    assert processes_with_run_id(run_id) == []
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # the port is free again


@pytest.mark.integration
def test_logs_follow_prints_until_the_process_ends(symphony_home):
    assert cli("launch", RING, "--detach", env=dict(os.environ, RING_ROUNDS="10")).returncode == 0
    followed = cli("logs", "ring", "node-2", "-f", timeout=90)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.rstrip().endswith("node 2 got stop at count 30")
    assert "node 2 got count 29" in followed.stdout


def test_python_api_reports_failure_exit_code_and_restart_limit(records):
    import symphony
    from symphony import Experiment, Process, RestartPolicy

    exp = Experiment("api").add(
        Process("once", ["sh", "-c", "echo hi; exit 3"]),
        Process(
            "flaky", ["sh", "-c", "echo try; exit 1"], restart=RestartPolicy("on-failure", 2, 0.01)
        ),
    )
    handle = symphony.launch(exp, "local", records=records)
    status = handle.wait(timeout=60)
    once, flaky = status.process("once"), status.process("flaky")
    assert (once.state, once.exit_code, once.restarts) == ("failed", 3, 0)
    assert (flaky.state, flaky.restarts) == ("failed", 2)
    assert handle.logs("once") == "hi\n"
    assert handle.logs("flaky").count("try\n") == 3 and "restart 2 (2/2 crashes)" in handle.logs(
        "flaky"
    )
    # every attempt's lines stay, in order, each restart marked before the attempt it starts
    attempts = [line for line in handle.logs("flaky").splitlines() if "[symphony]" not in line]
    assert attempts == [
        "try",
        "--- restarted after exit code 1 (attempt 2) ---",
        "try",
        "--- restarted after exit code 1 (attempt 3) ---",
        "try",
    ]
    assert wait_for(lambda: records.load("api").status == "failed", what="the record's status")
    assert handle.stop().status == "failed"  # stopping an ended experiment changes nothing
    assert records.load("api").status == "failed"
    handle.delete()
    assert records.all() == []


def test_a_port_taken_after_allocation_is_replaced_before_start(records):
    import socket

    from symphony import Experiment, Process
    from symphony.local.supervisor import Supervisor

    exp = Experiment("ports").add(
        Process("p", ["sh", "-c", "echo port=$SYMPH_SVC_PORT"]).binds("svc")
    )
    record = records.create(exp, "local")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        taken = held.getsockname()[1]
        record.data.update(run_id="test-ports", cwd=".", endpoints={"svc": ["127.0.0.1", taken]})
        assert Supervisor(record).run() == 0
    port = int(records.load("ports").file("logs/p.log").read_text().strip().split("=")[1])
    assert port != taken and port > 0


LEADER = (
    "import os, socket, sys, time\n"
    "while True:\n"
    "    try:\n"
    "        socket.create_connection(('127.0.0.1', int(os.environ['SYMPH_WEB_PORT']))).close()\n"
    "        break\n"
    "    except OSError:\n"
    "        time.sleep(0.05)\n"
    "print('the server answered', flush=True)\n"
    "sys.exit(int(sys.argv[1]))\n"
)
SERVER = (
    "import os, socket, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', int(os.environ['SYMPH_WEB_PORT']))); s.listen()\n"
    "print('serving', flush=True)\n"
    "time.sleep(1000)\n"
)


@pytest.mark.parametrize(("code", "outcome"), [(0, "finished"), (3, "failed")])
def test_the_end_of_an_ends_with_process_ends_the_experiment(records, code, outcome):
    import symphony
    from symphony import Experiment, Process

    exp = Experiment("lead", ends_with=["leader"]).add(
        Process("leader", [sys.executable, "-c", LEADER, str(code)]).connects("web"),
        Process("server", [sys.executable, "-c", SERVER]).binds("web"),
    )
    handle = symphony.launch(exp, "local", records=records)
    status = handle.wait(timeout=60)  # the server would idle for 1000 s
    assert status.process("leader").exit_code == code
    assert status.process("server").state == "stopped"
    assert "serving" in handle.logs("server")
    assert "it ends the experiment" in handle.logs("leader")
    assert wait_for(lambda: records.load("lead").status == outcome, what="the record's status")
    assert handle.status().status == outcome  # not "stopped": the others were stopped for it
    assert not processes_with_run_id(records.load("lead").data["run_id"])
    handle.delete()


def test_tmux_s_runner_marks_each_restart_in_the_log_as_the_supervisor_does(tmp_path):
    """The command a tmux window runs (`symphony.local.runner`), without tmux: the same log."""
    log, policy = (
        tmp_path / "flaky.log",
        '{"mode": "on-failure", "max_restarts": 1, "backoff_s": 0.01}',
    )
    command = ["sh", "-c", "echo try; exit 3"]  # (a kill -9 is never a crash: no limit)
    runner = [sys.executable, "-m", "symphony.local.runner", str(tmp_path / "state.json"), str(log)]
    result = subprocess.run([*runner, policy, "--", *command], capture_output=True, timeout=60)
    assert result.returncode == 3, result.stderr
    attempts = [line for line in log.read_text().splitlines() if "[symphony]" not in line]
    assert attempts == ["try", "--- restarted after exit code 3 (attempt 2) ---", "try"]


def test_a_supervisor_whose_record_was_removed_by_an_interrupted_launch_exits_silently(tmp_path):
    """Ctrl-C while a local run starts removes its record: the supervisor daemon, a moment
    behind, finds no folder and ends without a word (it printed a FileNotFoundError traceback
    on the launcher's terminal)."""
    done = subprocess.run(
        [sys.executable, "-m", "symphony.local.supervisor", str(tmp_path / "gone"), "1"],
        capture_output=True,
        text=True,
        timeout=60,  # the daemon shares the pipes, so this waits for it too
    )
    assert done.returncode == 0 and done.stdout == "" and done.stderr == "", done.stderr
