"""The four packages import on their own, light, and their CLIs say what they are for."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[1]

PACKAGES = ["cloudwise", "symphony", "caraml", "surreal"]


def _run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=scaled(120)
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_without_torch(package):
    # Importing any package must stay light: torch is loaded only by code that trains.
    result = _run_python(f"import sys, {package}; print('torch' in sys.modules)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_caraml_imports_no_upper_layer():
    result = _run_python(
        "import sys, caraml; print(sorted(m for m in ('symphony', 'cloudwise', 'surreal') if m in sys.modules))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "tool, purpose",
    [
        ("cloudwise", "Kubernetes-ready"),
        ("symphony", "distributed experiments"),
        ("surreal", "reinforcement learning"),
    ],
)
def test_cli_help_says_what_the_tool_is_for(tool, purpose):
    result = subprocess.run([sys.executable, "-m", tool, "--help"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert purpose in result.stdout


def test_training_without_the_rl_extra_says_which_extra_to_install(tmp_path):
    # A base install has no torch: `surreal launch` must say what to install, not print a traceback.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from surreal.cli import main\n"
        f"main(['launch', 'ppo', '--env', 'gym:CartPole-v1', '--actors', '1', '--folder', r'{tmp_path}'])\n"
    )
    result = _run_python(code)
    assert result.returncode == 2, result.stderr
    assert "pip install 'surreal-stack[rl]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started


def test_the_launch_path_and_the_api_import_no_heavy_package():
    # `surreal --help`, the launch plan and check, the interfaces users subclass and a process's
    # entry point import light; torch, gymnasium, rich and matplotlib load where they are used.
    light = (
        "surreal.cli, surreal.api, surreal.launch.experiment, surreal.launch.progress, "
        "surreal.runtime.plan.topology, surreal.runtime.processes.component, surreal.envs, surreal.algos.es"
    )
    heavy = ("torch", "gymnasium", "rich", "matplotlib", "robosuite", "boto3")
    result = _run_python(f"import sys, {light}; print([m for m in {heavy!r} if m in sys.modules])")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_the_tensorboard_command_every_run_suggests_is_installed_with_the_rl_extra():
    # Every `surreal launch` ends with `tensorboard --logdir RUN/tb`: the [rl] extra installs it.
    rl = re.search(r"^rl = \[(.*?)^\]", (ROOT / "pyproject.toml").read_text(), re.M | re.S)
    assert rl and '"tensorboard>=' in rl.group(1)
    tensorboard = Path(sys.executable).parent / "tensorboard"
    done = subprocess.run(
        [str(tensorboard), "--version"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip()[0].isdigit(), done.stderr
