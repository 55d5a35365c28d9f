"""surreal: distributed reinforcement learning (PPO, DDPG, ES) from a laptop to a cluster."""

__version__ = "0.1.0"
