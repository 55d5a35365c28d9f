"""docs/new_algorithm.md's code runs as written: each ```python block is a whole file that
`surreal launch FILE:Class` takes through its launch check (the learner learns one synthetic
batch), and the off-policy one learns from a real run whose budget counts the actors' env steps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import status

DOC = Path(__file__).resolve().parents[2] / "docs" / "new_algorithm.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
CLASSES = ("A2C", "SmallDQN")


def _write(tmp_path: Path) -> Path:
    assert len(BLOCKS) == len(CLASSES), "one code block per algorithm of the doc"
    for block, name in zip(BLOCKS, CLASSES, strict=True):
        assert f"class {name}(Learner)" in block
        (tmp_path / f"{name.lower()}.py").write_text(block)
    return tmp_path


@pytest.mark.integration
@pytest.mark.timeout(180)
@pytest.mark.parametrize("name", CLASSES)
def test_each_block_passes_the_launch_check(tmp_path, name):
    folder = _write(tmp_path)
    args = ["launch", f"{folder / name.lower()}.py:{name}", "--env", "gym:CartPole-v1"]
    out = surreal_cli([*args, "--dry-run"], tmp_path, tmp_path / "home")
    assert out.returncode == 0, out.stderr
    assert "launch check" not in out.stderr


@pytest.mark.integration
@pytest.mark.timeout(180)
def test_an_off_policy_learner_whose_config_lacks_the_replay_settings_is_told_which(tmp_path):
    """Before: a traceback from inside the topology (`no attribute 'replay_shards'`)."""
    block = BLOCKS[CLASSES.index("SmallDQN")]
    assert "class SmallDQNConfig(OffPolicyConfig):" in block
    wrong = block.replace("(OffPolicyConfig):", "(LearnerConfig):").replace(
        "import Learner,", "import Learner, LearnerConfig,"
    )
    (tmp_path / "wrong.py").write_text(wrong)
    args = ["launch", f"{tmp_path / 'wrong.py'}:SmallDQN", "--env", "gym:CartPole-v1"]
    out = surreal_cli([*args, "--dry-run"], tmp_path, tmp_path / "home")
    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "SmallDQNConfig has no replay_shards" in lines[0], lines
    assert "base the learner's config_class on surreal.api.OffPolicyConfig" in lines[0]


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_off_policy_block_runs_and_its_budget_counts_env_steps(tmp_path):
    folder = _write(tmp_path)
    args = ["launch", f"{folder / 'smalldqn'}.py:SmallDQN", "--env", "gym:CartPole-v1"]
    args += ["--actors", "2", "--steps", "8000", "--folder", str(tmp_path / "runs"), "--quiet"]
    args += ["--set", "algo.replay_start=500", "--trial", "t1"]
    out = surreal_cli(args, tmp_path, tmp_path / "home", timeout=scaled(240))
    assert out.returncode == 0, out.stdout + out.stderr
    state = status(tmp_path / "runs" / "smalldqn-cartpole-v1" / "t1")
    assert state["finished"] and 8_000 <= state["global_step"] < 8_000 + 2 * 8 * 32 * 2
    assert state["actor_steps"] >= state["global_step"]  # the actors' env steps, not samples
    assert "losses/td_loss" in state
