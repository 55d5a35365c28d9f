"""Experiment records: where they live, one per name, prefixes, shared by a team."""

import pytest

from symphony import Experiment, ExperimentNotFound, Process, SymphonyError
from symphony.records import Records, resolve_prefix, state_dir

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
