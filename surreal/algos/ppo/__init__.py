"""PPO: clipped surrogate or adaptive-KL penalty, GAE, normalized advantages and observations."""

from surreal.algos.ppo.config import PPOConfig, VisionPPOConfig

__all__ = ["PPOConfig", "PPOLearner", "VisionPPOConfig"]


def __getattr__(name: str):
    """`PPOLearner` (torch) is imported on first use, so the config imports light."""
    if name == "PPOLearner":
        from surreal.algos.ppo.learner import PPOLearner

        return PPOLearner
    raise AttributeError(f"module 'surreal.algos.ppo' has no attribute {name!r}")
