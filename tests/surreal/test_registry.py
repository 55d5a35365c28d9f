"""The algorithm registry resolves names and path/to/file.py:Class references."""

from pathlib import Path

import pytest

from surreal.algos import UnknownAlgorithm, names, resolve
from surreal.api.core import Learner

pytestmark = pytest.mark.timeout(60)
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "02_custom_learner" / "a2c.py"


def test_ppo_is_registered_and_a_learner():
    cls = resolve("ppo")
    assert issubclass(cls, Learner) and cls.__name__ == "PPOLearner"
    assert {"ppo", "ddpg", "es"} <= set(names())


def test_unknown_name_suggests_nearest():
    with pytest.raises(UnknownAlgorithm, match="did you mean 'ppo'"):
        resolve("ppoo")


def test_file_reference_loads_the_class():
    cls = resolve(f"{EXAMPLE}:A2C")
    assert issubclass(cls, Learner) and cls.config_class.__name__ == "A2CConfig"


def test_bad_file_references_say_what_is_wrong(tmp_path):
    with pytest.raises(UnknownAlgorithm, match="no such file"):
        resolve(str(tmp_path / "missing.py") + ":X")
    with pytest.raises(UnknownAlgorithm, match="did you mean 'A2C'"):
        resolve(f"{EXAMPLE}:A2c")
    plain = tmp_path / "plain.py"
    plain.write_text("class NotALearner:\n    pass\n")
    with pytest.raises(UnknownAlgorithm, match="not a subclass"):
        resolve(f"{plain}:NotALearner")


def test_each_built_in_config_class_is_its_learners_and_imports_without_torch():
    """`surreal launch` checks a command line's settings against the config dataclass before
    the learner (and torch, seconds on a loaded machine) is imported: a bad `--set` answers at
    once. The light path must name the same class the learner uses."""
    import subprocess
    import sys

    from surreal.api.registry import config_class

    for name in names():
        assert config_class(name) is resolve(name).config_class, name
    code = (
        "import sys\n"
        "from surreal.launch.experiment import plan\n"
        "from surreal.api.config import ConfigError\n"
        "from surreal.api.registry import config_class, names\n"
        "classes = [config_class(n) for n in names()]\n"
        "try:\n"
        "    plan('ppo', env='gym:CartPole-v1', overrides=['algo.lr=banana'])\n"
        "except ConfigError as err:\n"
        "    print(err)\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["algo.lr expects float, got 'banana'", "no torch"]
