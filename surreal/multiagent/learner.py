"""MultiAgentPPOLearner (`surreal launch mappo`): PPO per policy on a multi-agent env.

Every policy of the run (`algo.policy_mapping`) is learned by one of these, on its agents'
trajectories, in its own process with its own buffer and parameter server; actors step the joint
env (`surreal.multiagent.actor`). With one shared policy and `algo.central_value` this is MAPPO;
with `algo.self_play` a two-player game is learned against a pool of past versions.
"""

from __future__ import annotations

from surreal.algos.ppo.learner import PPOLearner
from surreal.multiagent.config import MultiAgentPPOConfig
from surreal.multiagent.topology import MAPPORecipe


class MultiAgentPPOLearner(PPOLearner):
    """PPO for each policy of a multi-agent run; the topology is `surreal.multiagent.topology`."""

    config_class = MultiAgentPPOConfig
    recipe = MAPPORecipe
