"""The algorithm registry resolves names and path/to/file.py:Class references."""

from pathlib import Path

import pytest

from surreal.algos import UnknownAlgorithm, names, resolve
from surreal.core import Learner

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
