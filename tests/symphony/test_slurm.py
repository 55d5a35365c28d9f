"""The slurm backend on a real single-host Slurm cluster that these tests start and stop."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from symphony.backends.slurm import SlurmBackend
from symphony.errors import BackendError
from symphony.launcher import launch
from symphony.records import Records
from symphony.spec import Experiment, Process, ProcessGroup, Resources
from symphony.testing import cli, env_with, scaled, wait_for
from tests.symphony.slurm_cluster import module_cluster

RING = Path(__file__).resolve().parents[2] / "examples" / "01_ring" / "ring.py"

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(200)]

# Listens on its own service, sends one line to the next process's service, prints what it got,
# then (with "stay") waits to be stopped. argv: my service, next service, stay|done.
RING_NODE = r"""
import os, socket, sys, time
me, nxt, stay = sys.argv[1:4]
def env(service, key):
    return os.environ["SYMPH_" + service.upper().replace("-", "_") + "_" + key]
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", int(env(me, "PORT"))))
srv.listen()
deadline = time.monotonic() + 60
while True:
    try:
        out = socket.create_connection((env(nxt, "HOST"), int(env(nxt, "PORT"))), timeout=1)
        break
    except OSError:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
out.sendall(("hello from " + os.environ["SYMPH_PROCESS"]).encode())
out.close()
conn, _ = srv.accept()
print("got:", conn.recv(100).decode(), "on", env(me, "ADDR"), flush=True)
if stay == "stay":
    time.sleep(3600)
"""


def ring_node(me: str, nxt: str, stay: bool = True) -> list[str]:
    return [sys.executable, "-c", RING_NODE, me, nxt, "stay" if stay else "done"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A two-node cluster, SLURM_CONF and SYMPHONY_HOME set for this module; stopped at the end."""
    yield from module_cluster(tmp_path_factory)


@pytest.fixture(scope="module")
def timed_out(cluster):
    """An experiment launched first with a 1-minute limit; the last test checks the kill."""
    exp = Experiment("tl").add(Process("sleeper", "echo sleeping; sleep 600"))
    return launch(exp, "slurm", time_limit="1")


def experiment_processes(name: str) -> list[psutil.Process]:
    """Live processes of experiment `name` in this module's SYMPHONY_HOME: its launchers (the
    record folder is in their command line) and its processes (SYMPH_EXPERIMENT in their env)."""
    home, found = os.environ["SYMPHONY_HOME"], []
    folder = str(Path(home) / "experiments" / name)
    for proc in psutil.process_iter():
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            env = proc.environ()
            if env.get("SYMPHONY_HOME") == home and (
                env.get("SYMPH_EXPERIMENT") == name or folder in proc.cmdline()
            ):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def job_ids(name: str) -> list[str]:
    return list(Records().load(name).data["jobs"].values())


# --- without a cluster -----------------------------------------------------------------------


def test_batch_script_maps_group_resources(tmp_path):
    group = ProcessGroup(
        "learner",
        [
            Process("a", ["x"], resources=Resources(cpu=1.5, memory_gb=2, gpu=1, node_pool="gpu")),
            Process("b", ["y"], resources=Resources(cpu=1, gpu=1, node_pool="gpu")),
        ],
    )
    exp = Experiment("exp").add(group)
    plan = SlurmBackend(Records(tmp_path)).plan(exp)
    for option in (
        "--job-name=exp.learner",
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=3",
        "--mem=2048M",
        "--gres=gpu:2",
        "--partition=gpu",
        "--time=3-00:00:00",
    ):
        assert f"#SBATCH {option}\n" in plan
    plan = SlurmBackend(
        Records(tmp_path), time_limit="2:00:00", partition="cpu", sbatch_args="--account=rl"
    ).plan(Experiment("e").add(Process("p", ["z"])))
    assert "#SBATCH --time=2:00:00\n" in plan and "#SBATCH --partition=cpu\n" in plan
    assert "#SBATCH --account=rl\n" in plan and "--mem" not in plan and "--gres" not in plan


def test_bad_options_say_what_is_allowed(tmp_path):
    with pytest.raises(BackendError, match="time_limit"):
        SlurmBackend(Records(tmp_path), timelimit="1")
    with pytest.raises(BackendError, match="D-HH:MM:SS"):
        SlurmBackend(Records(tmp_path), time_limit="three days")


def test_name_store_sees_only_its_launch_and_names_what_is_missing(tmp_path):
    from symphony.backends.slurm_names import NameRecord, NameStore

    old, new = NameStore(tmp_path, "old"), NameStore(tmp_path, "new")
    old.publish(NameRecord("replay", "n1", 5000, "r", "1", "old"))
    assert new.lookup("replay") is None
    new.publish(NameRecord("replay", "n2", 6000, "r", "2", "new"))
    assert new.resolve(["replay"], timeout_s=1)["replay"].port == 6000
    with pytest.raises(BackendError, match="'learner'"):
        new.resolve(["replay", "learner"], timeout_s=0.3)


def test_sacct_output_is_read_where_the_cluster_has_accounting():
    from symphony.backends.slurm_jobs import parse_sacct

    text = "12|CANCELLED by 0|None|n1|0:15\n13|TIMEOUT|TimeLimit|n2|0:0\n99|COMPLETED|None|n1|0:0\n"
    jobs = parse_sacct(text, ["12", "13"])
    assert sorted(jobs) == ["12", "13"]
    assert (jobs["12"].state, jobs["12"].exit_code, jobs["12"].active) == (
        "CANCELLED",
        "0:15",
        False,
    )
    assert (jobs["13"].state, jobs["13"].reason, jobs["13"].node) == ("TIMEOUT", "TimeLimit", "n2")


def test_process_state_merges_the_launchers_word_with_slurms():
    from symphony.backends.slurm import merge_state
    from symphony.backends.slurm_jobs import JobInfo

    def job(state):
        return JobInfo("1", state)

    assert merge_state("running", job("PENDING")) == "pending"  # a requeued job
    assert merge_state("running", job("RUNNING")) == "running"
    assert merge_state("stopped", job("COMPLETING")) == "running"  # not over until Slurm says so
    assert merge_state("stopped", job("TIMEOUT")) == "failed"
    assert merge_state("running", job("OUT_OF_MEMORY")) == "failed"
    assert merge_state("stopped", job("CANCELLED")) == "stopped"
    assert merge_state("exited", job("CANCELLED")) == "exited"  # it had finished before the cancel
    assert merge_state("failed", job("COMPLETED")) == "failed"
    assert merge_state("running", job("COMPLETED")) == "unknown"  # the launcher died silently
    assert merge_state("running", None) == "unknown"
    assert merge_state("exited", None) == "exited"


# --- on the cluster ---------------------------------------------------------------------------


def test_ring_example_runs_attached_to_the_end(cluster):
    done = cli("launch", str(RING), "-b", "slurm", env=env_with(RING_ROUNDS="2"), timeout=90)
    assert done.returncode == 0, done.stderr
    assert "ring ended: finished" in done.stderr
    shown = cli("describe", "ring")
    assert shown.returncode == 0 and shown.stdout.count(" exited ") == 3, shown.stdout
    assert "slurm job " in shown.stdout
    logs = cli("logs", "ring", "node-1").stdout
    assert "node 1 got count" in logs and "node 1 got stop" in logs
    assert cli("delete", "ring").returncode == 0


def test_detached_ring_list_describe_logs_exec_delete_leaves_nothing(cluster):
    started = cli(
        "launch", str(RING), "-b", "slurm", "-d", "--name", "live", env=env_with(RING_ROUNDS="0")
    )
    assert started.returncode == 0, started.stderr
    ids = job_ids("live")
    for i in range(3):  # every node got the counter from its predecessor: they found each other
        wait_for(
            lambda i=i: f"node {i} got count" in cli("logs", "live", f"node-{i}").stdout,
            60,
            what=f"node-{i} to get the counter",
        )
    listed = cli("list").stdout
    row = next(line.split() for line in listed.splitlines() if line.startswith("live "))
    assert (row[2], row[3], row[-1]) == ("slurm", "running", "3/3"), listed
    shown = cli("describe", "live").stdout
    assert shown.count(" running ") == 3 and f"slurm job {ids[0]} on n" in shown, shown
    assert cli("logs", "live", "node-0", "--tail", "1").stdout.count("\n") == 1
    inside = cli("exec", "live", "node-2", "--", "printenv", "SLURM_JOB_ID")
    assert (inside.returncode, inside.stdout.strip()) == (0, ids[2])
    assert set(ids) <= set(cluster.squeue_ids())
    assert len(experiment_processes("live")) >= 6  # 3 launchers, 3 ring nodes

    deleted = cli("delete", "live")
    assert deleted.returncode == 0, deleted.stderr
    assert not set(ids) & set(cluster.squeue_ids())
    assert experiment_processes("live") == []
    assert "live" not in cli("list", "--all").stdout


def test_ctrl_c_on_an_attached_launch_cancels_every_job(cluster):
    attached = subprocess.Popen(
        [sys.executable, "-m", "symphony", "launch", str(RING), "-b", "slurm", "--name", "ctrl-c"],
        env=env_with(RING_ROUNDS="0"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        wait_for(lambda: len(experiment_processes("ctrl-c")) >= 6, 60, what="the ring to run")
        ids = job_ids("ctrl-c")
        attached.send_signal(signal.SIGINT)
        # A hang guard, not a time claim: scancel's wait (up to 60 s) plus the sweep, under load.
        attached.communicate(timeout=scaled(240))
    finally:
        attached.kill()
    assert not set(ids) & set(cluster.squeue_ids())
    assert experiment_processes("ctrl-c") == []


def test_a_group_is_one_job_on_one_node(cluster, timed_out):
    exp = Experiment("grouped")
    exp.add(
        ProcessGroup(
            "ab",
            [
                Process("a", ring_node("a-in", "b-in")).binds("a-in").connects("b-in"),
                Process("b", ring_node("b-in", "c-in")).binds("b-in").connects("c-in"),
            ],
        )
    )
    exp.add(Process("c", ring_node("c-in", "a-in")).binds("c-in").connects("a-in"))
    handle = launch(exp, "slurm")
    for name, sender in (("a", "c"), ("b", "a"), ("c", "b")):
        wait_for(lambda n=name: "got:" in handle.logs(n), 60, what=f"{name} to receive")
        assert f"got: hello from {sender}" in handle.logs(name)
    status = handle.status()
    assert [p.state for p in status.processes] == ["running"] * 3
    assert len(experiment_processes("grouped")) == 7  # 2 launchers, their 2 guards, 3 processes
    loc = {p.name: p.location for p in status.processes}
    assert loc["a"] == loc["b"] != loc["c"]
    assert len(handle.record.data["jobs"]) == 2
    handle.stop()
    assert not set(handle.record.data["jobs"].values()) & set(cluster.squeue_ids())
    assert experiment_processes("grouped") == []


def test_a_teammate_with_another_state_dir_finds_the_experiment_through_slurm(cluster, tmp_path):
    handle = launch(Experiment("shared").add(Process("worker", "echo working; sleep 300")), "slurm")
    wait_for(lambda: "working" in handle.logs("worker"), 60, what="the worker to start")
    teammate = env_with(SYMPHONY_HOME=str(tmp_path / "teammate-home"))
    assert "shared" not in cli("list", env=teammate).stdout
    listed = cli("list", "--backend", "slurm", env=teammate).stdout
    assert any(
        line.split()[:4] == ["shared", handle.record.owner, "slurm", "running"]
        for line in listed.splitlines()
    ), listed
    shown = cli("describe", "shared", "--backend", "slurm", env=teammate).stdout
    assert "worker" in shown and " running " in shown, shown
    assert "working" in cli("logs", "shared", "worker", "--backend", "slurm", env=teammate).stdout
    ids = job_ids("shared")
    assert cli("delete", "shared", "--backend", "slurm", env=teammate).returncode == 0
    assert not set(ids) & set(cluster.squeue_ids())
    assert experiment_processes("shared") == []
    handle.stop()


def test_dry_run_prints_the_batch_scripts_and_submits_nothing(cluster):
    before = cluster.squeue_ids()
    out = cli("launch", str(RING), "-b", "slurm", "--dry-run", "--name", "dry")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("#SBATCH --time=3-00:00:00\n") == 3 and "slurm_launcher" in out.stdout
    out = cli(
        "launch",
        str(RING),
        "-b",
        "slurm",
        "--dry-run",
        "-o",
        "time_limit=2:00:00",
        "-o",
        "partition=debug",
    )
    assert out.stdout.count("#SBATCH --time=2:00:00\n") == 3, out.stdout + out.stderr
    assert out.stdout.count("#SBATCH --partition=debug\n") == 3
    out = cli(
        "launch",
        str(RING),
        "-b",
        "slurm",
        "--dry-run",
        "-o",
        "time_limit=2:00:00",
        "-o",
        "partition=debug",
    )
    assert out.stdout.count("#SBATCH --time=2:00:00\n") == 3, out.stdout + out.stderr
    assert out.stdout.count("#SBATCH --partition=debug\n") == 3
    assert cluster.squeue_ids() == before
    assert "dry" not in cli("list", "--all").stdout


def test_a_rejected_submission_says_why_and_leaves_nothing(cluster):
    before = cluster.squeue_ids()
    exp = Experiment("rejected").add(Process("ok", ["sleep", "60"]))
    exp.add(Process("gpu", ["true"], resources=Resources(gpu=1)))
    with pytest.raises(BackendError, match="(?i)gres"):
        launch(exp, "slurm")
    assert cluster.squeue_ids() == before  # the first group's job was cancelled again
    assert "rejected" not in cli("list", "--all").stdout


def test_a_group_no_node_can_hold_is_refused_before_any_job_is_submitted(cluster):
    before = cluster.squeue_ids()
    exp = Experiment("toobig").add(Process("fits", ["sleep", "60"]))
    big = ProcessGroup("big")  # 6 one-CPU processes on one node; the nodes have 4 CPUs
    for i in range(6):
        big.add(Process(f"p-{i}", ["sleep", "60"], resources=Resources(cpu=1)))
    exp.add(big)
    with pytest.raises(BackendError) as err:
        launch(exp, "slurm")
    message = str(err.value)
    assert message.startswith("Slurm would never run group 'big': ")
    assert "--cpus-per-task=6" in message and "2 nodes of 4 CPUs" in message
    assert "nothing was submitted" in message
    assert cluster.squeue_ids() == before  # not even the group that fits
    assert "toobig" not in cli("list", "--all").stdout


def test_failed_job_shows_failed_with_its_log(cluster):
    exp = Experiment("boom").add(Process("bad", "echo about to fail; exit 3"))
    handle = launch(exp, "slurm")
    status = wait_for(
        lambda: (s := handle.status()).details["job bad"].split()[1] == "FAILED" and s,
        60,
        what="the job to end",
    )
    bad = status.process("bad")
    assert (status.status, bad.state, bad.exit_code) == ("failed", "failed", 3)
    assert " FAILED" in status.details["job bad"] and "exit 1:0" in status.details["job bad"]
    assert "about to fail" in handle.logs("bad")
    followed = cli("logs", "boom", "bad", "--follow", timeout=30)  # returns: the process ended
    assert "about to fail" in followed.stdout and "exit code 3" in followed.stdout
    shown = cli("describe", "boom").stdout
    row = next(line for line in shown.splitlines() if line.startswith("bad "))
    assert " failed " in row and " FAILED " in row and row.split()[-2:] == ["3", "-"], shown
    assert "job bad: " in shown and "logs/bad.slurm.log" in shown, shown
    handle.stop()


def test_time_limit_kill_shows_timeout(cluster, timed_out):
    status = wait_for(
        lambda: (s := timed_out.status()).status != "running" and s,
        150,
        poll_s=1,
        what="the 1-minute time limit to kill the job",
    )
    sleeper = status.process("sleeper")
    assert (status.status, sleeper.state) == ("failed", "failed")
    assert " TIMEOUT" in status.details["job sleeper"]
    logs = timed_out.logs("sleeper")
    assert "sleeping" in logs and "DUE TO TIME LIMIT" in logs
    shown = cli("describe", "tl").stdout
    row = next(line for line in shown.splitlines() if line.startswith("sleeper "))
    assert " failed " in row and " TIMEOUT " in row, shown
    assert "job sleeper: " in shown and " TIMEOUT (TimeLimit) " in shown, shown
    timed_out.stop()


def _squeue_states(cluster, ids):
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i %T", "-j", ",".join(ids)],
        env={**os.environ, **cluster.env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return dict(line.split() for line in out.stdout.splitlines())


def test_a_second_users_launch_of_a_taken_name_is_refused_and_changes_nothing(cluster, tmp_path):
    exp = Experiment("taken").add(Process("worker", "echo working; sleep 300"))
    handle = launch(exp, "slurm")
    try:
        wait_for(lambda: "working" in handle.logs("worker"), 60, what="the worker to start")
        ids = job_ids("taken")
        pids = sorted(p.pid for p in experiment_processes("taken"))
        spec = tmp_path / "taken.yaml"
        spec.write_text(exp.to_yaml())
        bob = env_with(
            HOME=str(tmp_path),
            USER="bob",
            LOGNAME="bob",
            SYMPHONY_HOME=str(tmp_path / "bob-home"),
            SYMPHONY_OWNER="bob",
        )
        refused = cli("launch", str(spec), "-b", "slurm", "-d", env=bob)
        assert refused.returncode == 1
        assert "live jobs of an experiment named 'taken'" in refused.stderr
        assert f"owner {handle.record.owner}" in refused.stderr
        assert not (tmp_path / "bob-home" / "experiments" / "taken").exists()
        denied = cli("delete", "taken", "-b", "slurm", env=bob)
        assert denied.returncode == 1 and "--force" in denied.stderr, denied.stderr
        assert f"belongs to {handle.record.owner}, not to bob" in denied.stderr
        assert job_ids("taken") == ids and set(cluster.squeue_ids()) >= set(ids)
        assert set(_squeue_states(cluster, ids).values()) == {"RUNNING"}
        assert sorted(p.pid for p in experiment_processes("taken")) == pids
    finally:
        handle.delete()
    assert experiment_processes("taken") == []


@pytest.mark.parametrize("how", ["--batch", "--full", "plain"])
def test_scancel_kill_of_a_job_leaves_no_process_behind(cluster, how):
    name = f"kill-{how.strip('-')}"
    # a shell with children of its own: they outlive a killed parent unless the guard acts
    handle = launch(
        Experiment(name).add(Process("tree", "sleep 300 & sleep 301 & echo started; wait")),
        "slurm",
    )
    try:
        wait_for(lambda: "started" in handle.logs("tree"), 60, what="the process tree to start")
        wait_for(
            lambda: len([p for p in experiment_processes(name) if p.name() == "sleep"]) == 2,
            30,
            what="both sleeps",
        )
        (job,) = job_ids(name)
        args = ["scancel", "--signal=KILL", *([how] if how != "plain" else []), job]
        subprocess.run(args, env={**os.environ, **cluster.env}, check=True, timeout=30)
        wait_for(lambda: experiment_processes(name) == [], 10, what="every process to end")
    finally:
        handle.delete(force=True)
