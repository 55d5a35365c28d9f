"""ESConfig: Evolution Strategies as in Surreal-ES (policy and noise scales from the paper)."""

from __future__ import annotations

from dataclasses import dataclass

from surreal.api.bounds import bounded, require
from surreal.api.core import LearnerConfig


@dataclass
class ESConfig(LearnerConfig):
    """ES hyperparameters; the policy and noise scales are the paper's."""

    hidden: tuple[int, ...] = (64, 64)
    """The two fully connected layers (tanh) before the output layer."""
    noise_std: float = bounded(0.02, gt=0)
    """Population noise: theta +- noise_std * eps."""
    action_std: float = bounded(0.01, ge=0)
    """Fixed std of the stochastic policy around its tanh output."""
    discretize: int = 0
    """Bins per action component (10 for Swimmer and Hopper); 0: continuous."""
    population: int = bounded(32, ge=1)
    """Antithetic pairs per generation (2x episodes)"""
    lr: float = 0.02
    """Adam step size."""
    l2: float = 0.005
    """Weight decay folded into the gradient."""
    obs_norm: bool = True
    """Normalize observations with running mean/std gathered by the workers."""
    noise_seed: int = 123
    """Seed of the shared noise table."""
    noise_size: int = bounded(10_000_000, ge=1)
    """Float32 entries of the shared noise table (40 MB)"""
    max_episode_steps: int = bounded(0, ge=0)
    """Cap on rollout length (0: the env's own limit)"""
    eval_every: int = bounded(1, ge=0)
    """Generations between evaluations of the unperturbed policy (0: never)"""
    eval_episodes: int = bounded(5, ge=1)
    """Episodes per evaluation."""
    task_timeout: float = bounded(10.0, gt=0)
    """Seconds before an unanswered pair is re-issued to another worker."""

    def __post_init__(self) -> None:
        require(self, "population", "noise_std")  # population: antithetic pairs
        if self.discretize == 1 or self.discretize < 0:
            raise ValueError(f"discretize={self.discretize}; use 0 (continuous) or >= 2 bins")
        self.hidden = tuple(int(h) for h in self.hidden)
