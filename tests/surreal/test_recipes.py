"""The algorithm seam (issue 48): a `Learner` that only learns (<= 14 public members) and a
torch-free recipe that says how it is fed and assembled, picked by name; a learner written for
the old hooks keeps working through a recipe made around them, after one warning line."""

from __future__ import annotations

import logging
import subprocess
import sys

import pytest

from surreal.algos.es.topology import ESRecipe
from surreal.algos.offpolicy import OffPolicy
from surreal.algos.ppo import PPOConfig
from surreal.api.config import Config
from surreal.api.core import Learner, Policy
from surreal.api.recipe import RECIPES, Episodes, OnPolicy, load, recipe_of, reference
from surreal.api.registry import resolve
from surreal.multiagent.topology import MAPPORecipe

LEARNER_MEMBERS = {
    "config_class", "recipe", "create", "make_model", "make_policy",  # assembly
    "learn", "params", "state_dict", "load_state_dict",  # learning and its state
    "device", "to_device", "compiled",  # device and compile helpers
    "sync_gradients", "gather",  # learner replicas
}  # fmt: skip


def test_a_learner_has_fourteen_public_members_all_about_learning():
    assert {m for m in dir(Learner) if not m.startswith("_")} == LEARNER_MEMBERS


@pytest.mark.parametrize(
    ("algo", "recipe"),
    [
        ("ppo", OnPolicy),
        ("ppo-vision", OnPolicy),
        ("ddpg", OffPolicy),
        ("td3", OffPolicy),
        ("sac", OffPolicy),
        ("es", ESRecipe),
        ("mappo", MAPPORecipe),
    ],
)
def test_every_builtin_algorithm_names_its_recipe(algo, recipe):
    assert recipe_of(resolve(algo)) is recipe
    assert load(reference(recipe)) is recipe  # what run.json records, loaded back


def test_recipes_load_by_name_without_torch():
    code = (
        "import sys; from surreal.api.recipe import RECIPES, load\n"
        "print(sorted(load(n).name for n in RECIPES), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("]")[1].strip() == "False", out.stdout
    assert set(RECIPES) == {"on-policy", "episodes", "off-policy"}


def test_the_on_policy_batch_is_one_function_ppo_sizes_its_minibatches_with():
    config = Config(algo=PPOConfig(batch_size=1024))
    assert OnPolicy.per_batch(config) == 4  # 1,024 steps / (32 steps x 8 envs)
    config.algo.batch_size = 0
    assert OnPolicy.per_batch(config) == config.run.actors
    assert Episodes.episode_aligned and not OnPolicy.episode_aligned


class _OldPolicy(Policy):
    def act(self, obs, deterministic=False):
        return obs[:, 0], {}


class _OldStyle(Learner):
    """A learner written before recipes: the hooks on the class."""

    episode_aligned = True

    @classmethod
    def segments_per_batch(cls, run_config):
        return 7

    @classmethod
    def make_policy(cls, config, env_info):
        return _OldPolicy()

    def learn(self, batch):
        return {}


def test_a_learner_with_the_old_hooks_gets_a_recipe_calling_them_after_one_warning(caplog):
    caplog.set_level(logging.WARNING)
    first, again = recipe_of(_OldStyle), recipe_of(_OldStyle)
    assert first is again and issubclass(first, OnPolicy)
    assert first.per_batch(Config(algo=PPOConfig())) == 7 and first.episode_aligned
    assert reference(first) is None  # the buffer asks the learner class, as before
    lines = [r.getMessage() for r in caplog.records if "_OldStyle" in r.getMessage()]
    assert len(lines) == 1
    assert "segments_per_batch, episode_aligned moved from Learner to its recipe" in lines[0]
