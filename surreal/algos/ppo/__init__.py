"""PPO: clipped surrogate or adaptive-KL penalty, GAE, normalized advantages and observations."""

from surreal.algos.ppo.config import PPOConfig, VisionPPOConfig
from surreal.algos.ppo.learner import PPOLearner

__all__ = ["PPOConfig", "PPOLearner", "VisionPPOConfig"]
