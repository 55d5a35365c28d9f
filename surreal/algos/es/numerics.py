"""ES numerics: centered-rank fitness shaping, Adam, running observation statistics."""

from __future__ import annotations

import numpy as np


def centered_ranks(x: np.ndarray) -> np.ndarray:
    """Replace each value by its rank, scaled into [-0.5, 0.5] (ties broken by position)."""
    flat = np.asarray(x).ravel()
    ranks = np.empty(flat.size, dtype=np.float32)
    ranks[flat.argsort(kind="stable")] = np.arange(flat.size, dtype=np.float32)
    if flat.size > 1:
        ranks = ranks / (flat.size - 1) - 0.5
    else:
        ranks[:] = 0.0
    return ranks.reshape(np.shape(x))


class Adam:
    """Adam on a flat parameter vector (ascent direction passed as `-gradient`)."""

    def __init__(
        self, dim: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8
    ):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m = np.zeros(dim, np.float32)
        self.v = np.zeros(dim, np.float32)
        self.t = 0

    def step(self, theta: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """theta - lr * m_hat / (sqrt(v_hat) + eps) for the loss gradient `grad`."""
        self.t += 1
        self.m = self.beta1 * self.m + (1 - self.beta1) * grad
        self.v = self.beta2 * self.v + (1 - self.beta2) * grad * grad
        a = self.lr * np.sqrt(1 - self.beta2**self.t) / (1 - self.beta1**self.t)
        return (theta - a * self.m / (np.sqrt(self.v) + self.eps)).astype(np.float32)


class RunningStat:
    """Sum, sum of squares and count of observations, merged from every worker's rollouts."""

    def __init__(self, dim: int, eps: float = 1e-2) -> None:
        self.sum = np.zeros(dim, np.float64)
        self.sumsq = np.full(dim, eps, np.float64)
        self.count = eps

    def add(self, s: np.ndarray, sq: np.ndarray, count: float) -> None:
        """Merge statistics gathered elsewhere."""
        self.sum += s
        self.sumsq += sq
        self.count += count

    @property
    def mean(self) -> np.ndarray:
        return (self.sum / self.count).astype(np.float32)

    @property
    def std(self) -> np.ndarray:
        var = self.sumsq / self.count - np.square(self.sum / self.count)
        return np.sqrt(np.maximum(var, 1e-4)).astype(np.float32)
