"""The symphony CLI: help, dry runs, bad inputs that start nothing, name prefixes."""

import subprocess
import textwrap

import pytest

from symphony import Experiment, Process
from symphony.records import Records
from symphony.testing import cli

pytestmark = pytest.mark.timeout(60)

COMMANDS = ["launch", "list", "describe", "logs", "delete", "exec"]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_without_side_effects(command, symphony_home):
    result = cli(command, "--help")
    assert result.returncode == 0, result.stderr
    assert f"Usage: python -m symphony {command}" in result.stdout
    assert not symphony_home.exists()


def _write(tmp_path, body: str, name="exp.py"):
    marker = tmp_path / "started"
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).replace("MARKER", str(marker)))
    return path, marker


GOOD = """
    from symphony import Experiment, Process

    def make_experiment():
        return Experiment("good").add(
            Process("a", ["sh", "-c", "touch MARKER; sleep 30"]).binds("svc"),
            Process("b", ["sh", "-c", "touch MARKER; sleep 30"]).connects("svc"),
        )
"""

BAD = {
    "unbound connects": (
        """
        from symphony import Experiment, Process

        def make_experiment():
            return Experiment("bad").add(
                Process("a", ["sh", "-c", "touch MARKER"]).connects("replay"))
    """,
        "add `.binds('replay')` to the process that serves it",
    ),
    "duplicate names": (
        """
        from symphony import Experiment, Process

        def make_experiment():
            return Experiment("bad").add(
                Process("a", ["sh", "-c", "touch MARKER"]), Process("a", ["true"]))
    """,
        "name 'a' is used twice",
    ),
    "no make_experiment": (
        """
        from symphony import Experiment
        EXP = Experiment("bad")
    """,
        "has no make_experiment() function",
    ),
    "empty command": (
        """
        from symphony import Experiment, Process

        def make_experiment():
            return Experiment("bad").add(Process("a", ["sh", "-c", "touch MARKER"]), Process("b", []))
    """,
        "process 'b' has no command",
    ),
    "program not found": (
        """
        from symphony import Experiment, Process

        def make_experiment():
            return Experiment("bad").add(
                Process("a", ["sh", "-c", "touch MARKER"]), Process("b", ["no-such-program-xyz"]))
    """,
        "program 'no-such-program-xyz' is not found",
    ),
    "bad name": (
        """
        from symphony import Experiment, Process

        def make_experiment():
            return Experiment("Bad_Exp").add(Process("a", ["sh", "-c", "touch MARKER"]))
    """,
        "not a DNS-1123 label",
    ),
}


@pytest.mark.parametrize(
    "case, backend",
    [(case, "local") for case in sorted(BAD)]
    + [
        pytest.param(case, "tmux", marks=pytest.mark.tmux)
        for case in ("program not found", "unbound connects", "empty command")
    ],
)
def test_bad_input_is_a_clear_error_and_starts_nothing(
    case, backend, tmp_path, symphony_home, request
):
    if backend == "tmux":
        request.getfixturevalue("tmux_socket")  # anything that started would land on its own server
    path, marker = _write(tmp_path, BAD[case][0])
    result = cli("launch", str(path), "--backend", backend)
    assert result.returncode == 2  # bad input is a usage error, as in cloudwise and surreal
    assert BAD[case][1] in result.stderr.splitlines()[-1]  # one line says it all
    assert "Traceback" not in result.stderr
    assert Records().all() == [] and not marker.exists()


def test_unknown_backend_lists_the_known_ones_and_starts_nothing(tmp_path, symphony_home):
    path, marker = _write(tmp_path, GOOD)
    result = cli("launch", str(path), "--backend", "nomad")
    assert result.returncode == 2
    assert (
        "unknown backend 'nomad'; choose one of: local, tmux, test, compose, kube, slurm"
        in result.stderr
    )
    assert Records().all() == [] and not marker.exists()


def test_missing_file_and_bad_yaml_are_clear_errors(tmp_path, symphony_home):
    assert "does not exist" in cli("launch", str(tmp_path / "nope.py")).stderr
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nprocesses: [{name: a, command: [true], colour: red}]\n")
    assert "unknown process key(s) ['colour']" in cli("launch", str(spec)).stderr
    assert Records().all() == []


@pytest.mark.parametrize("backend", ["local", pytest.param("tmux", marks=pytest.mark.tmux)])
def test_dry_run_prints_the_plan_and_starts_nothing(backend, tmp_path, symphony_home, request):
    socket = request.getfixturevalue("tmux_socket") if backend == "tmux" else None
    path, marker = _write(tmp_path, GOOD)
    result = cli("launch", str(path), "--dry-run", "-b", backend)
    assert result.returncode == 0, result.stderr
    assert "SYMPH_SVC_ADDR=127.0.0.1:" in result.stdout and "a: sh -c" in result.stdout
    assert not symphony_home.exists() and not marker.exists()
    if socket:
        assert f"tmux session 'good' on socket {socket}" in result.stdout
        assert subprocess.run(["tmux", "-L", socket, "ls"], capture_output=True).returncode != 0


def test_yaml_spec_launches_like_the_python_file(tmp_path, symphony_home):
    exp = Experiment("from-yaml").add(Process("p", ["sh", "-c", "echo hi from yaml"]))
    spec = tmp_path / "spec.yaml"
    spec.write_text(exp.to_yaml())
    result = cli("launch", str(spec), "--name", "renamed")
    assert result.returncode == 0, result.stderr
    assert cli("logs", "renamed", "p").stdout == "hi from yaml\n"
    assert Records().load("renamed").experiment().process("p") == exp.process("p")


@pytest.mark.integration
def test_names_resolve_by_unique_prefix_else_list_the_candidates(records):
    for name in ("ring-one", "ring-two"):
        records.create(Experiment(name).add(Process("node", ["true"])), "local")
    ambiguous = cli("describe", "ring")
    assert ambiguous.returncode == 2
    assert (
        "'ring' is ambiguous: it matches experiment names ['ring-one', 'ring-two']"
        in ambiguous.stderr
    )
    unknown = cli("logs", "zzz", "node")
    assert (
        "no experiment matches 'zzz'; experiment names: ['ring-one', 'ring-two']" in unknown.stderr
    )
    assert "pending" in cli("describe", "ring-t").stdout
    assert "no process matches 'x'; process names: ['node']" in cli("logs", "ring-one", "x").stderr
    assert cli("delete", "ring-o").stdout == "deleted ring-one\n"
    assert [r.name for r in records.all()] == ["ring-two"]


@pytest.mark.integration
def test_list_shows_teammates_experiments_and_mine_filters_them(records):
    records.create(Experiment("adas-run").add(Process("node", ["true"])), "local", owner="ada")
    records.create(Experiment("my-run").add(Process("node", ["true"])), "local")
    everyone = cli("list").stdout
    assert "adas-run  ada" in everyone and "my-run" in everyone
    mine = cli("list", "--mine").stdout
    assert "my-run" in mine and "adas-run" not in mine


@pytest.mark.parametrize("backend", ["local", pytest.param("tmux", marks=pytest.mark.tmux)])
@pytest.mark.integration
def test_a_relative_cwd_is_relative_to_the_launch_directory(
    backend, tmp_path, symphony_home, request
):
    if backend == "tmux":
        request.getfixturevalue("tmux_socket")
    (tmp_path / "sub").mkdir()
    exp = Experiment("where").add(Process("p", ["sh", "-c", "pwd; echo done"], cwd="sub"))
    (tmp_path / "spec.yaml").write_text(exp.to_yaml())
    assert cli("launch", "spec.yaml", "-b", backend, "-d", cwd=tmp_path).returncode == 0
    followed = cli("logs", "where", "p", "-f", timeout=60).stdout
    assert followed.splitlines()[:2] == [str(tmp_path / "sub"), "done"]
    assert cli("delete", "where").returncode == 0


def test_the_test_backend_runs_attached_from_the_cli(tmp_path, symphony_home):
    exp = Experiment("threads").add(Process("p", ["sh", "-c", "echo in a thread"]))
    (tmp_path / "spec.yaml").write_text(exp.to_yaml())
    detached = cli("launch", str(tmp_path / "spec.yaml"), "-b", "test", "--detach")
    assert detached.returncode == 2 and "drop --detach" in detached.stderr
    assert not symphony_home.exists()
    attached = cli("launch", str(tmp_path / "spec.yaml"), "-b", "test")
    assert attached.returncode == 0, attached.stderr
    assert "threads ended: finished" in attached.stderr


def test_bad_name_and_bad_backend_option_are_errors_that_start_nothing(tmp_path, symphony_home):
    path, marker = _write(tmp_path, GOOD)
    assert (
        "--name 'Bad_Name' is not a DNS-1123 label"
        in cli("launch", str(path), "--name", "Bad_Name").stderr
    )
    unknown = cli("launch", str(path), "-o", "colour=red")
    assert "unknown local backend option(s) ['colour']; known: grace_s" in unknown.stderr
    assert (
        "unknown local backend option(s)"
        in cli("launch", str(path), "--dry-run", "-o", "colour=red").stderr
    )
    assert Records().all() == [] and not marker.exists()


def test_config_file_sets_default_backend_and_backend_options(tmp_path, symphony_home, monkeypatch):
    config = tmp_path / "config.yaml"
    config.write_text(
        "backend: test\nbackend_options: {test: {colour: red}}\nlist_backends: [nomad]\n"
    )
    monkeypatch.setenv("SYMPHONY_CONFIG", str(config))
    path, marker = _write(tmp_path, GOOD)
    result = cli("launch", str(path))
    assert "unknown test backend option(s) ['colour']" in result.stderr  # both settings were read
    assert "cannot list nomad experiments: unknown backend 'nomad'" in cli("list").stderr
    assert not marker.exists()


def test_a_bare_dash_o_is_the_dry_run_output_folder(tmp_path, symphony_home):
    out = tmp_path / "manifests"
    result = cli("launch", "examples/03_kube/echo.py", "-b", "kube", "--dry-run", "-o", str(out))
    assert result.returncode == 0, result.stderr
    kinds = sorted(p.name.split("-")[1] for p in out.glob("*.yaml"))
    assert "namespace" in kinds and "service" in kinds and "networkpolicy" in kinds
    assert not symphony_home.exists()


def test_option_values_keep_colons_as_strings_and_parse_numbers_and_yaml(tmp_path, symphony_home):
    from symphony.cli import _option_value

    assert _option_value("2:00:00") == "2:00:00"  # plain YAML would make this 7200
    assert (
        _option_value("90") == 90 and _option_value("1.5") == 1.5 and _option_value("true") is True
    )
    assert _option_value("{learner: [creds]}") == {"learner": ["creds"]}
    assert _option_value("me/exp:1") == "me/exp:1"
    result = cli(
        "launch", "examples/01_ring/ring.py", "-b", "slurm", "--dry-run", "-o", "time_limit=2:00:00"
    )
    assert result.returncode == 0, result.stderr
    assert "#SBATCH --time=2:00:00" in result.stdout


PRINTER = """
    from symphony import Experiment, Process

    def make_experiment():
        return Experiment("printer").add(
            Process("actor-0", ["sh", "-c", "echo hello; echo bye"]),
            Process("learner", ["sh", "-c", "printf 'no newline at the end'"]),
        )
"""


@pytest.mark.parametrize("backend", ["local", "test", pytest.param("tmux", marks=pytest.mark.tmux)])
@pytest.mark.integration
def test_attached_launch_streams_output_prefixed_by_process(
    backend, tmp_path, symphony_home, request
):
    if backend == "tmux":
        request.getfixturevalue("tmux_socket")
    path, _ = _write(tmp_path, PRINTER)
    result = cli("launch", str(path), "-b", backend)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("actor-0 |")] == [
        "actor-0 | hello",
        "actor-0 | bye",
    ]
    assert "learner | no newline at the end" in lines  # the last, unterminated line too
    quiet = cli("launch", str(path), "-b", backend, "--name", "quiet", "--no-logs")
    assert quiet.returncode == 0, quiet.stderr
    assert "hello" not in quiet.stdout and "|" not in quiet.stdout
    if backend != "test":  # (the test backend keeps output in memory, gone with the command)
        assert cli("logs", "quiet", "actor-0").stdout == "hello\nbye\n"  # still in the log
