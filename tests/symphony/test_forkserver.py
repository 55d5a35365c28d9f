"""Fork servers on the local backend: processes that declare `preload` fork from one process that
imported the modules, and behave as Popen's did (env, cwd, log, exit codes, restarts, stops);
anything a fork server cannot do falls back to Popen with one line in the supervisor's log.

Each experiment runs `python -m fworker` (a module in this test's own folder, on PYTHONPATH), which
prints what it got as JSON, then waits or ends as its env says. `colorsys` is the preload: only a
fork finds it imported at its start.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import psutil
import pytest

import symphony
import symphony.backends
import symphony.launcher
from symphony import Experiment, Process, RestartPolicy
from symphony.errors import SpecError
from symphony.local.supervisor import read_state
from symphony.testing import processes_with_run_id, scaled, wait_for

pytestmark = pytest.mark.timeout(180)

WORKER = textwrap.dedent("""
    import json, os, signal, sys

    def on_term(*_):
        print("got SIGTERM", flush=True)
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    print(json.dumps({
        "argv": sys.argv[1:], "cwd": os.getcwd(), "foo": os.environ.get("FOO"),
        "pid": os.getpid(), "ppid": os.getppid(), "sid": os.getsid(0),
        "preloaded": "colorsys" in sys.modules, "stdin": sys.stdin.read(),
    }), flush=True)
    print("to stderr", file=sys.stderr, flush=True)
    mode = os.environ.get("MODE", "wait")
    if mode == "wait":
        while True:
            signal.pause()
    if mode == "raise":
        raise RuntimeError("boom")
    if mode == "message":
        sys.exit("bye")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.exit(int(os.environ.get("CODE", "0")))
""")
THREADED = (
    "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
)


@pytest.fixture
def here(tmp_path, monkeypatch, symphony_home):
    """This test's folder: the launch directory, its modules on PYTHONPATH."""
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "fworker.py").write_text(WORKER)
    (mods / "threaded.py").write_text(THREADED)
    (tmp_path / "sub").mkdir()
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(mods) + (os.pathsep + path if path else ""))
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SYMPHONY_FORKSERVER", raising=False)
    return tmp_path


def worker(name, preload=("colorsys",), args=(), **env):
    restart = env.pop("restart", None) or RestartPolicy()
    return Process(
        name,
        [sys.executable, "-m", "fworker", *args],
        env={k.upper(): str(v) for k, v in env.items()},
        preload=list(preload),
        restart=restart,
    )


def launch(records, *processes, name="fork"):
    return symphony.launch(Experiment(name).add(*processes), "local", records=records)


def report(handle, process):
    """The JSON line the worker printed first (waits for it)."""
    line = wait_for(
        lambda: next((x for x in handle.logs(process).splitlines() if x.startswith("{")), None),
        what=f"{process}'s first line",
    )
    return json.loads(line)


def supervisor_log(handle):
    path = handle.record.file("supervisor.log")
    return path.read_text() if path.exists() else ""


@pytest.mark.integration
def test_a_fork_gets_its_env_cwd_log_and_command_line_and_is_the_supervisors_child(here, records):
    forked = worker("forked", args=["x", "y z"], foo="1")
    forked.cwd = "sub"
    handle = launch(records, forked, worker("plain", preload=(), foo="2"))
    got, plain = report(handle, "forked"), report(handle, "plain")
    supervisor = read_state(handle.record)["supervisor_pid"]
    assert got["argv"] == ["x", "y z"] and got["foo"] == "1" and got["stdin"] == ""
    assert got["cwd"] == str(here / "sub")
    assert got["preloaded"] and not plain["preloaded"]  # only the fork found colorsys imported
    assert got["ppid"] == supervisor == plain["ppid"]  # adopted: the supervisor's own child
    assert got["sid"] == got["pid"]  # its own session, as Popen's start_new_session
    wait_for(lambda: "to stderr" in handle.logs("forked"), what="stderr in the log")
    cmdline = psutil.Process(got["pid"]).cmdline()
    assert [a for a in cmdline if a] == forked.argv()  # ps shows its own command, not the server's
    (server,) = read_state(handle.record)["fork_servers"]
    assert server["state"] == "ready" and server["processes"] == ["forked"]
    assert psutil.Process(server["pid"]).ppid() == supervisor
    assert "fork server ready" in supervisor_log(handle) and "Popen" not in supervisor_log(handle)
    run_id = handle.record.data["run_id"]
    handle.stop()
    assert processes_with_run_id(run_id) == []  # the processes and the fork server


@pytest.mark.integration
def test_kill_9_of_a_forked_process_is_seen_and_it_restarts_as_a_fork(here, records):
    policy = RestartPolicy("on-failure", max_restarts=3, backoff_s=0.05)
    handle = launch(records, worker("victim", restart=policy))
    first = report(handle, "victim")
    os.kill(first["pid"], signal.SIGKILL)
    back = wait_for(
        lambda: (
            (p := handle.status().process("victim")).restarts == 1 and p.state == "running" and p
        ),
        what="the restarted process",
    )
    assert back.last_end == "killed by SIGKILL" and back.pid != first["pid"]
    assert "victim: restart 1 (" in handle.logs("victim")
    again = wait_for(
        lambda: [json.loads(x) for x in handle.logs("victim").splitlines() if x[:1] == "{"][1:],
        what="the second start's line",
    )[0]
    assert again["preloaded"] and again["pid"] == back.pid  # forked again, not Popen
    run_id = handle.record.data["run_id"]
    handle.stop()
    assert processes_with_run_id(run_id) == []


CODES = {"zero": ("exit", 0, 0), "three": ("exit", 3, 3), "max": ("exit", 255, 255)}
CODES |= {"raised": ("raise", 0, 1), "message": ("message", 0, 1), "killed": ("kill", 0, -9)}


@pytest.mark.integration
@pytest.mark.parametrize("forks", [True, False], ids=["fork-server", "popen"])
def test_exit_codes_are_reported_exactly_as_popen_reports_them(here, records, monkeypatch, forks):
    if not forks:
        monkeypatch.setenv("SYMPHONY_FORKSERVER", "0")
    procs = [worker(name, mode=mode, code=code) for name, (mode, code, _) in CODES.items()]
    handle = launch(records, *procs)
    status = handle.wait(timeout=scaled(120))
    assert {n: status.process(n).exit_code for n in CODES} == {n: c[2] for n, c in CODES.items()}
    assert all(report(handle, n)["preloaded"] == forks for n in CODES)
    assert "RuntimeError: boom" in handle.logs("raised") and "bye" in handle.logs("message")
    if not forks:  # the switch: one line says why
        assert supervisor_log(handle).count("fork server off (SYMPHONY_FORKSERVER=0)") == 1


@pytest.mark.integration
def test_ctrl_c_of_an_attached_launch_leaves_no_process(here, symphony_home):
    spec = here / "exp.py"
    spec.write_text(
        "import sys\nfrom symphony import Experiment, Process\n\n"
        "def make_experiment():\n"
        "    cmd = [sys.executable, '-m', 'fworker']\n"
        "    return Experiment('ctrlc').add(\n"
        "        Process('a', cmd, preload=['colorsys']), Process('b', cmd, preload=['colorsys']),\n"
        "        Process('deaf', ['sh', '-c', \"trap '' TERM; while true; do sleep 1; done\"]))\n"
    )
    launch = subprocess.Popen(
        [sys.executable, "-m", "symphony", "launch", str(spec), "-o", "grace_s=1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        record = wait_for(lambda: _record(symphony_home, "ctrlc"), what="the record")
        handle = symphony.launcher.ExperimentHandle(symphony.backends.get_backend("local"), record)
        forked = [report(handle, n)["pid"] for n in ("a", "b")]
        assert all(psutil.Process(p).ppid() == launch.pid for p in forked)
        launch.send_signal(signal.SIGINT)
        assert launch.wait(timeout=scaled(120)) == 130
    finally:
        if launch.poll() is None:
            launch.kill()
    assert processes_with_run_id(record.data["run_id"]) == []
    assert {p.state for p in handle.status().processes} == {"stopped"}


def _record(home, name):
    from symphony.records import Records

    try:
        record = Records(home).load(name)
    except symphony.ExperimentNotFound:
        return None
    # read again once the supervisor runs: the copy read before it may predate the launch's
    # own save (the one with the run's id), and the state file be written in between
    return Records(home).load(name) if read_state(record) else None


@pytest.mark.integration
def test_the_processes_stop_when_the_supervisor_dies(here, records):
    handle = launch(records, worker("a"), worker("b"))
    pids = [report(handle, n)["pid"] for n in ("a", "b")]
    os.kill(read_state(handle.record)["supervisor_pid"], signal.SIGKILL)
    for name in ("a", "b"):
        wait_for(lambda n=name: "got SIGTERM" in handle.logs(n), what=f"{name}'s SIGTERM")
    wait_for(lambda: not any(psutil.pid_exists(p) for p in pids), what="the processes to end")
    wait_for(
        lambda: processes_with_run_id(handle.record.data["run_id"]) == [],
        what="the fork server to end",
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("preload", "says"),
    [
        (["colorsys", "no_such_module_xyz"], "cannot import 'no_such_module_xyz'"),
        (["threaded"], "started 1 thread(s)"),
    ],
    ids=["import-error", "threads"],
)
def test_a_fork_server_that_cannot_fork_falls_back_to_popen_with_one_line(
    here, records, preload, says
):
    handle = launch(records, worker("a", preload=preload), worker("b", preload=preload))
    assert not report(handle, "a")["preloaded"] and not report(handle, "b")["preloaded"]
    wait_for(lambda: says in supervisor_log(handle), what="the warning")
    lines = supervisor_log(handle).splitlines()
    assert len(lines) == 1 and lines[0].endswith("a, b start with Popen"), lines
    assert {p.state for p in handle.status().processes} == {"running"}
    handle.stop()


@pytest.mark.integration
def test_a_dead_fork_server_leaves_its_processes_and_restarts_use_popen(here, records):
    policy = RestartPolicy("on-failure", max_restarts=3, backoff_s=0.05)
    handle = launch(records, worker("a", restart=policy), worker("b", restart=policy))
    a, b = report(handle, "a"), report(handle, "b")
    assert a["preloaded"] and b["preloaded"], supervisor_log(handle)  # both forked
    (server,) = read_state(handle.record)["fork_servers"]
    assert server["state"] == "ready", server
    os.kill(server["pid"], signal.SIGKILL)
    try:
        wait_for(lambda: "exited with code -9" in supervisor_log(handle), what="the warning")
    except AssertionError as err:  # say what the supervisor saw, and whether it still runs
        state = read_state(handle.record)
        alive = psutil.pid_exists(state["supervisor_pid"])
        raise AssertionError(
            f"{err}; supervisor alive: {alive}; fork servers: {state['fork_servers']}; "
            f"its log:\n{supervisor_log(handle)}"
        ) from None
    assert psutil.pid_exists(b["pid"])  # its forks run on
    os.kill(a["pid"], signal.SIGKILL)
    again = wait_for(
        lambda: [json.loads(x) for x in handle.logs("a").splitlines() if x[:1] == "{"][1:],
        what="a's restart",
    )[0]
    assert not again["preloaded"]  # started with Popen
    assert handle.status().process("a").state == "running"
    handle.stop()


def test_preload_round_trips_through_the_spec_and_is_checked():
    exp = Experiment("rt").add(Process("p", ["python", "-m", "w"], preload=["json", "a.b_c"]))
    back = Experiment.from_yaml(exp.to_yaml())
    assert back.process("p").preload == ["json", "a.b_c"] and back.to_dict() == exp.to_dict()
    assert "preload" not in Experiment("x").add(Process("q", ["true"])).to_yaml()
    with pytest.raises(SpecError, match="not module names"):
        Process("p", ["true"], preload=["json", "not a module"])
    with pytest.raises(SpecError, match="list of module names"):
        Process("p", ["true"], preload="json")


def test_a_preload_on_a_command_that_is_not_python_m_starts_with_popen_and_says_so(tmp_path):
    from symphony.local.forking import ForkServers

    notes = []
    forks = ForkServers(notes.append, str(tmp_path / "supervisor.log"))
    forks.start([("sh", ["sh", "-c", "true"], {}, ["json"])], str(tmp_path))
    assert notes == [f"sh starts with Popen: its command is not `{sys.executable} -m MODULE`"]
    assert not forks.waiting("sh") and forks.servers == []
    forks.close()
