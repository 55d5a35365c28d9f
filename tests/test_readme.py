"""Every fenced shell command of README.md runs as written and does what its line says.

Commands run in order (later ones read the runs earlier ones wrote) in one fresh folder that
holds only a link to `examples/`. A line ending in `# needs: WHAT` (cluster, credentials, root,
network, terminal, hours, clone) is skipped and listed. Checked: exit status 0, and for a run
that stops at a goal (`run.stop_at_return=X`), that its best evaluation return reached X.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[1]
NEEDS = re.compile(r"#\s*needs:\s*([\w ,-]+?)\s*$")
GOAL = re.compile(r"run\.stop_at_return=(-?[\d.]+)")


@dataclass
class Command:
    line: str
    needs: str | None


def readme_commands(text: str) -> list[Command]:
    """The shell lines of every ```bash block (continuation lines joined)."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                match = NEEDS.search(line)
                commands.append(Command(line.strip(), match.group(1) if match else None))
    return commands


def test_the_readme_commands_are_found_and_marked():
    commands = readme_commands((ROOT / "README.md").read_text())
    runnable = [c for c in commands if c.needs is None]
    assert len(runnable) >= 15, [c.line for c in runnable]
    assert any(GOAL.search(c.line) for c in runnable)
    assert {"credentials", "root"} <= {
        n.strip() for c in commands for n in (c.needs or "").split(",")
    }


@pytest.mark.slow
@pytest.mark.xdist_group("readme")  # beside the heavy group (tests/conftest.py)
@pytest.mark.timeout(3600)
def test_every_readme_command_runs_as_written(tmp_path, record_property):
    commands = readme_commands((ROOT / "README.md").read_text())
    runnable = [c for c in commands if c.needs is None]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "examples").symlink_to(ROOT / "examples")
    env = dict(
        os.environ,
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        PYTHONPATH=str(ROOT),
        SYMPHONY_HOME=str(tmp_path / "symphony-home"),
        SYMPHONY_CONFIG=str(tmp_path / "no-config.yaml"),
        SYMPHONY_TMUX_SOCKET=f"readme-{os.getpid()}",
    )
    skipped = [f"{c.line}  ({c.needs})" for c in commands if c.needs]
    print("skipped (marked):\n  " + "\n  ".join(skipped))
    ran = []
    for command in runnable:
        started = time.monotonic()
        result = subprocess.run(
            ["bash", "-c", command.line],
            cwd=fresh,
            env=env,
            capture_output=True,
            text=True,
            timeout=scaled(1200),
        )
        # each command's wall time goes into the JUnit report (--junitxml), where the suite's
        # budget is read from (CONTRIBUTING.md, Timings)
        record_property(command.line[:120], f"{time.monotonic() - started:.0f} s")
        out = result.stdout + result.stderr
        assert result.returncode == 0, f"{command.line}\n-> exit {result.returncode}\n{out[-3000:]}"
        goal = GOAL.search(command.line)
        if goal:
            folder = re.search(r"^run folder: (\S+)", result.stdout, re.M)
            assert folder, out[-2000:]
            status = json.loads((fresh / folder.group(1) / "status.json").read_text())
            best = status.get("best_eval_return", float("-inf"))
            assert best >= float(goal.group(1)), f"{command.line}: best eval return {best}"
        ran.append(command.line)
    assert len(ran) == len(runnable) >= 15
