"""Experiment records: where they live, one per name, prefixes, shared by a team, kept after
the experiment ended."""

import re
import subprocess
import sys

import pytest

from symphony import Experiment, ExperimentNotFound, Process, SymphonyError
from symphony.launcher import free_name, launch
from symphony.records import Records, launcher_mark, resolve_prefix, state_dir
from symphony.testing import cli, wait_for

pytestmark = pytest.mark.timeout(30)


def _exp(name):
    return Experiment(name).add(Process("p", ["true"]))


def test_state_dir_env_beats_config_beats_default(tmp_path, monkeypatch):
    config = tmp_path / "config.yaml"
    monkeypatch.setenv("SYMPHONY_CONFIG", str(config))
    monkeypatch.delenv("SYMPHONY_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert state_dir() == tmp_path / "user" / ".symphony"
    config.write_text(f"home: {tmp_path / 'team'}\n")
    assert state_dir() == tmp_path / "team"
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "mine"))
    assert state_dir() == tmp_path / "mine"


def test_record_keeps_spec_owner_backend_and_log_paths(records):
    exp = _exp("alpha")
    record = records.create(
        exp, "local", owner="ada", launch_command=["symphony", "launch", "x.py"]
    )
    again = records.load("alpha")
    assert again.experiment() == exp
    assert (again.owner, again.backend, again.status) == ("ada", "local", "launching")
    assert again.logs == {"p": str(record.path / "logs" / "p.log")}
    assert again.launch_command == ["symphony", "launch", "x.py"]
    assert (record.path / "spec.yaml").read_text() == exp.to_yaml()


def test_a_name_is_taken_once_and_teammates_see_each_other(tmp_path):
    shared = tmp_path / "team"
    Records(shared).create(_exp("beta"), "local", owner="ada")
    with pytest.raises(SymphonyError, match="another --name"):
        Records(shared).create(_exp("beta"), "tmux", owner="bob")
    Records(shared).create(_exp("gamma"), "tmux", owner="bob")
    assert [(r.name, r.owner) for r in Records(shared).all()] == [("beta", "ada"), ("gamma", "bob")]


def test_remove_deletes_the_record(records):
    records.create(_exp("gone"), "local")
    records.remove("gone")
    with pytest.raises(ExperimentNotFound, match="symphony list --all"):
        records.load("gone")


@pytest.mark.parametrize(
    "prefix, expected", [("ring", "ring"), ("ring-t", "ring-two"), ("o", "other")]
)
def test_prefixes_select_one_name(prefix, expected):
    assert resolve_prefix(prefix, ["ring", "ring-two", "other"], "experiment") == expected


def test_ambiguous_and_unknown_prefixes_list_the_candidates():
    with pytest.raises(ExperimentNotFound, match=r"ambiguous.*names \['ring-one', 'ring-two'\]"):
        resolve_prefix("ring-", ["ring-one", "ring-two"], "experiment")
    with pytest.raises(
        ExperimentNotFound, match=r"no experiment matches 'x'; experiment names: \['ring-one'\]"
    ):
        resolve_prefix("x", ["ring-one"], "experiment")


def test_record_keeps_the_git_revision_of_the_launch_directory(records, tmp_path, monkeypatch):
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(git + ["init", "-q"], cwd=repo, check=True)
    (repo / "f").write_text("x")
    subprocess.run(git + ["add", "f"], cwd=repo, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "m"], cwd=repo, check=True)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    monkeypatch.chdir(repo)
    assert records.create(_exp("rev"), "local").git_revision.startswith(head[:7])
    monkeypatch.chdir(tmp_path)
    assert records.create(_exp("norev"), "local").git_revision is None


# Records of ended experiments stay (`symphony list --all`, `describe`, `logs` show past runs);
# `free_name` gives a relaunch of the same experiment its old name and anything else a new one.


def _sleeper(name, *extra):
    """An experiment that prints a line and then runs until it is stopped."""
    script = "import time; print('hello from p', flush=True); time.sleep(600)"
    return Experiment(name).add(Process("p", [sys.executable, "-c", script]), *extra)


def _finished(records, name="done", owner=None):
    """A local experiment that has run to its end (attached: `true` exits at once)."""
    return launch(_exp(name), "local", detach=False, records=records, owner=owner)


@pytest.mark.timeout(120)
@pytest.mark.integration
def test_a_stopped_experiment_keeps_its_record_logs_and_outcome(records):
    handle = launch(_sleeper("kept"), "local", records=records)
    wait_for(lambda: "hello from p" in handle.logs("p"), what="the process's first line")
    handle.stop(outcome="finished")  # what `surreal launch` does once its run is over

    listed = cli("list", "--all")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("kept "))
    assert row.split()[3] == "finished" and row.split()[-1] == "0/1"
    assert "no experiments running" in cli("list").stdout
    described = cli("describe", "kept")
    assert described.returncode == 0, described.stderr
    assert "status=finished" in described.stdout and "stopped" in described.stdout  # process p
    logs = cli("logs", "kept", "p")
    assert logs.returncode == 0 and "hello from p" in logs.stdout
    followed = cli("logs", "kept", "p", "-f", timeout=30)  # an ended process: prints, returns
    assert followed.returncode == 0 and "hello from p" in followed.stdout
    assert records.load("kept").outcome == "finished"
    assert handle.status().status == "finished"


def test_without_an_outcome_the_process_states_tell_how_it_ended(records):
    handle = _finished(records)
    assert handle.status().status == "finished"
    assert records.load("done").outcome is None
    record = records.load("done")
    record.update(outcome="failed")
    assert record.ended_status("finished") == "failed"
    assert record.ended_status("running") == "running"  # relaunched under it: live status wins


def test_update_keeps_what_another_copy_of_the_record_wrote(records):
    launcher = records.create(_exp("shared"), "local")
    supervisor = records.load("shared")  # read at start, like the supervisor daemon's copy
    launcher.update(outcome="failed")
    supervisor.update(status="stopped")  # written later, from its stale copy
    again = records.load("shared")
    assert (again.status, again.outcome) == ("stopped", "failed")


def _same(record):
    return True


@pytest.mark.timeout(120)
@pytest.mark.integration
def test_free_name_reuses_the_ended_record_of_the_same_experiment_only(records, monkeypatch):
    assert free_name("fresh", _same, records) == "fresh"  # no record: nothing to do
    _finished(records, "done")
    assert free_name("done", lambda r: False, records) == "done-2"  # another run's record
    assert records.load("done").name == "done"  # ... stays
    assert free_name("done", _same, records) == "done"  # its own ended launch: replaced
    with pytest.raises(ExperimentNotFound):
        records.load("done")

    _finished(records, "theirs", owner="someone-else")
    assert free_name("theirs", _same, records) == "theirs-2"  # never another owner's
    _finished(records, "theirs-2")
    assert free_name("theirs", lambda r: r.name == "theirs-2", records) == "theirs-2"

    live = launch(_sleeper("live"), "local", records=records)
    try:  # still running: the name is returned and kept, so the launch is refused as before
        assert free_name("live", _same, records) == "live"
        with pytest.raises(SymphonyError, match="exists"):
            launch(_sleeper("live"), "local", records=records)
        assert records.load("live").status == "running"
    finally:
        live.stop()

    ghost = records.create(_exp("ghost"), "nowhere")  # a backend that cannot describe it
    assert free_name("ghost", _same, records) == "ghost"  # maybe alive: kept, launch refused
    assert records.load("ghost").name == "ghost"
    ghost.update(outcome="finished")  # its launcher stopped it and said so: ended
    assert free_name("ghost", _same, records) == "ghost"
    with pytest.raises(ExperimentNotFound):
        records.load("ghost")

    long = "x" * 63
    _finished(records, long)
    assert free_name(long, lambda r: False, records) == "x" * 61 + "-2"


@pytest.mark.timeout(120)
@pytest.mark.integration
def test_list_all_shows_how_long_each_ran_and_what_its_launcher_reported(records):
    handle = launch(_sleeper("scored"), "local", records=records)
    wait_for(lambda: "hello from p" in handle.logs("p"), what="the process's first line")
    handle.set_summary({"eval": 475.0, "step": "3,000"})  # what `surreal launch` reports
    handle.stop(outcome="finished")
    _finished(records, "plain")  # ended by itself: its supervisor says when
    for name in ("scored", "plain"):
        record = records.load(name)
        assert record.ended is not None and record.ended >= record.created, name

    header, *rows = cli("list", "--all").stdout.splitlines()
    assert header.split() == [
        *("NAME", "OWNER", "BACKEND", "STATUS", "AGE"),
        *("DURATION", "SUMMARY", "PROCESSES"),
    ]
    scored = next(r for r in rows if r.startswith("scored "))
    assert re.search(r" finished +\S+ +\d+:\d\d +eval 475\.0 step 3,000 +0/1$", scored), scored
    plain = next(r for r in rows if r.startswith("plain "))
    assert re.search(r" \d+:\d\d +- +0/1$", plain), plain  # no summary: a dash


def test_a_records_duration_runs_from_launch_to_its_end(records):
    record = records.create(_exp("timed"), "local")
    record.update(created=1000.0)
    assert record.duration("running", now=1125.0) == 125.0  # while it runs: so far
    assert record.duration("finished") is None  # ended, and no one said when
    record.update(ended=1245.5)
    assert records.load("timed").duration("finished") == 245.5
    assert records.load("timed").summary_text() == "-"


def _printer(name, text):
    """An experiment whose one process prints `text` and exits."""
    return Experiment(name).add(Process("p", ["echo", text]))


@pytest.mark.timeout(120)
@pytest.mark.integration
def test_a_relaunch_under_the_same_name_keeps_the_earlier_launches_logs(records):
    launch(_printer("again", "first launch"), "local", detach=False, records=records)
    assert free_name("again", _same, records) == "again"  # ended: retired, its logs kept
    with pytest.raises(ExperimentNotFound):
        records.load("again")
    note = "--- resumed at step 1,000 ---"
    handle = launch(
        _printer("again", "second launch"), "local", detach=False, records=records, note=note
    )
    assert handle.logs("p") == f"first launch\n{note}\nsecond launch\n"
    logs = cli("logs", "again", "p")
    assert logs.returncode == 0 and logs.stdout == handle.logs("p")
    assert free_name("again", lambda r: False, records) == "again-2"  # another's: kept whole
    handle.delete()  # `symphony delete`: the logs go with the record
    launch(_printer("again", "a new experiment"), "local", detach=False, records=records)
    assert records.load("again").log_path("p").read_text() == "a new experiment\n"


def test_a_failed_relaunch_hands_the_earlier_logs_on_to_the_next(records, monkeypatch):
    records.create(_printer("twice", "x"), "local").log_path("p").write_text("first\n")
    records.retire("twice")
    monkeypatch.setenv("PATH", "")  # `echo` cannot be found: the launch fails before it starts
    with pytest.raises(SymphonyError):
        launch(_printer("twice", "x"), "local", records=records, note="--- again ---")
    with pytest.raises(ExperimentNotFound):
        records.load("twice")
    monkeypatch.undo()
    record = records.create(_printer("twice", "x"), "local", note="--- third ---")
    assert record.log_path("p").read_text() == "first\n--- again ---\n--- third ---\n"


def test_a_launch_whose_launcher_is_gone_is_interrupted(records):
    """A record still `launching` whose launcher died (killed during `docker compose up`)
    is told apart from one whose launcher is still at work."""
    record = records.create(_exp("cut"), "compose")
    assert record.data["launcher"] == launcher_mark() and not record.launch_interrupted()
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    record.data["launcher"] = launcher_mark(gone.pid)
    assert record.launch_interrupted()
    mine = launcher_mark()  # this pid, now another process's: a launcher that started earlier
    record.data["launcher"] = {**mine, "started": (mine["started"] or 0) + 1}
    assert record.launch_interrupted()
    record.data["launcher"] = {**launcher_mark(gone.pid), "host": "elsewhere"}
    assert not record.launch_interrupted()  # cannot be asked from here: not called gone
    record.data["launcher"] = launcher_mark(gone.pid)
    record.status = "running"
    assert not record.launch_interrupted()  # the launch was done; the backend says the rest
