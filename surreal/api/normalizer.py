"""RunningNormalizer: running mean/variance of observations, shipped with the parameters."""

from __future__ import annotations

import numpy as np


class RunningNormalizer:
    """Normalizes observations with a running mean and variance (parallel-variance updates).

    The learner updates it from the batches it consumes; its state travels with the parameters
    (`to_params` / `load_params`) so actors and evaluators normalize exactly like the learner.
    """

    def __init__(
        self, shape: tuple[int, ...], clip: float | None = 10.0, eps: float = 1e-8
    ) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = 1e-4
        self.clip, self.eps = clip, eps

    def update(self, x: np.ndarray) -> None:
        """Fold a batch [n, *shape] into the running statistics."""
        x = x.reshape(-1, *self.mean.shape).astype(np.float64)
        batch_mean, batch_var, n = x.mean(0), x.var(0), x.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var = m2 / total
        self.count = total

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """Normalize (and clip) a batch; float32 out."""
        out = (x - self.mean) / np.sqrt(self.var + self.eps)
        if self.clip:
            out = np.clip(out, -self.clip, self.clip)
        return out.astype(np.float32)

    def to_params(self, prefix: str = "obs_norm/") -> dict[str, np.ndarray]:
        """The state as flat numpy arrays (for parameters and checkpoints)."""
        return {
            prefix + "mean": self.mean.copy(),
            prefix + "var": self.var.copy(),
            prefix + "count": np.asarray(self.count),
        }

    def load_params(self, params: dict[str, np.ndarray], prefix: str = "obs_norm/") -> None:
        """Restore the state written by `to_params`."""
        self.mean = np.asarray(params[prefix + "mean"], np.float64)
        self.var = np.asarray(params[prefix + "var"], np.float64)
        self.count = float(params[prefix + "count"])
