"""DQN (Double DQN, a target network, epsilon-greedy actors), written only against the public
API: `surreal.api` (Learner, Policy, `OffPolicyConfig`, `Explorer`) and the `off-policy`
recipe (docs/new_algorithm.md walks through a smaller one). `DQNConfig` imports without torch;
the learner is `surreal.algos.dqn.learner.DQNLearner` (torch)."""

from surreal.algos.dqn.config import DQNConfig

__all__ = ["DQNConfig"]
