"""One CLI style across surreal, symphony and cloudwise: defaults in --help, the same argument
names for the same things, and usage errors that exit 2 with one line and no traceback."""

import subprocess
import sys

import pytest

from symphony.testing import scaled

pytestmark = pytest.mark.timeout(120)


def run(tool: str, *args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", tool, *args],
        capture_output=True,
        text=True,
        timeout=scaled(100),
        cwd=cwd,
    )


@pytest.mark.parametrize(
    "tool, command, defaults",
    [
        (
            "surreal",
            "launch",
            [
                "[default: local]",
                "[default: runs]",
                "(none, required; with --resume, the run's)",
                "100000",
            ],
        ),
        ("surreal", "eval", ["[default: 10]"]),
        ("symphony", "launch", ["Default: the config file's `backend`, else local"]),
        ("symphony", "build", ["default: $SYMPHONY_BUILD_CONFIG or ./"]),
        ("cloudwise", "machine-type", ["[default: 0]"]),
        ("cloudwise", "", ["[default: .]"]),
    ],
)
def test_help_shows_the_defaults(tool, command, defaults):
    result = run(tool, *command.split(), "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for default in defaults:
        assert default in text, (default, text)


def test_surreal_launch_help_states_env_actors_and_steps_defaults():
    text = " ".join(run("surreal", "launch", "--help").stdout.split())
    for option in ("--env", "--actors", "--steps"):
        after = text.split(option, 1)[1].split(" --", 1)[0]
        assert "default:" in after, (option, after)


def test_a_run_folder_is_run_dir_everywhere():
    for command in (["status"], ["eval"]):
        assert "RUN_DIR" in run("surreal", *command, "--help").stdout.split("\n")[0]
    assert "--resume RUN_DIR" in run("surreal", "launch", "--help").stdout


def test_the_test_backend_is_documented():
    text = " ".join(run("symphony", "launch", "--help").stdout.split())
    assert "test (threads inside this command, for tests)" in text


USAGE_ERRORS = [
    ("surreal", ["launch", "ppo", "--steps", "lots"], "Invalid value for '--steps'"),
    ("surreal", ["status"], "Missing argument 'RUN_DIR'"),
    ("surreal", ["launch", "nosuch-algo", "--dry-run"], "unknown algorithm 'nosuch-algo'"),
    ("surreal", ["launch", "ppo"], "name the environment: --env, e.g. `surreal launch ppo --env"),
    ("surreal", ["frobnicate"], "No such command 'frobnicate'"),
    ("symphony", ["launch"], "Missing argument 'FILE'"),
    ("symphony", ["launch", "nowhere.py"], "experiment file 'nowhere.py' does not exist"),
    ("symphony", ["launch", "examples/01_ring/ring.py", "-b", "nomad"], "unknown backend 'nomad'"),
    ("symphony", ["logs", "--tail", "-3", "x", "y"], "Invalid value for '--tail'"),
    ("cloudwise", ["machine-type"], "Missing option '--provider'"),
    ("cloudwise", ["machine-type", "--provider", "aws", "--gpu-type", "zz"], "unknown --gpu-type"),
    ("cloudwise", ["pool", "add"], "Missing argument 'NAME'"),
    ("cloudwise", ["frobnicate"], "No such command 'frobnicate'"),
]


@pytest.mark.parametrize("tool, args, message", USAGE_ERRORS)
def test_usage_errors_exit_2_with_one_line(tool, args, message, tmp_path, monkeypatch):
    monkeypatch.setenv("SYMPHONY_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("SYMPHONY_CONFIG", str(tmp_path / "no-config.yaml"))
    result = run(tool, *args)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert message in lines[0]
    assert "Traceback" not in result.stderr and not (tmp_path / "home").exists()


def test_no_internal_names_in_a_request_error():
    result = run("cloudwise", "machine-type", "--provider", "aws", "--gpu-type", "zz")
    assert "request" not in result.stderr and "gpu_type" not in result.stderr
