"""ES learning state and its update: every process holding a copy applies the same generation record.

A generation record holds only the noise indices of the antithetic pairs, their two returns, and the
observation statistics the rollouts gathered. From it (and the shared noise table) the master and
every worker compute the same gradient

    g = 1/(2P) sum_i (rank(R_i+) - rank(R_i-)) eps_i        (centered ranks over all 2P returns)

and take the same Adam step, so parameters never travel on the wire except to (re)join a worker.
"""

from __future__ import annotations

import zlib

import numpy as np

from surreal.algos.es.config import ESConfig
from surreal.algos.es.noise_table import SharedNoiseTable
from surreal.algos.es.numerics import Adam, RunningStat, centered_ranks


def es_gradient(
    noise: SharedNoiseTable, indices: np.ndarray, r_pos: np.ndarray, r_neg: np.ndarray, dim: int
) -> np.ndarray:
    """The centered-rank ES ascent direction over the pairs (eps at `indices`).

    Bit for bit the same in every process, whatever its BLAS library or thread count: the sum
    runs in float64, one pair after another in the record's order, with elementwise numpy only
    (a BLAS matrix-vector product splits its sum by thread count and so rounds differently).
    """
    ranks = centered_ranks(np.stack([r_pos, r_neg], axis=1))
    weights = (ranks[:, 0] - ranks[:, 1]).astype(np.float64)
    total = np.zeros(dim, np.float64)
    term = np.empty(dim, np.float64)
    for w, i in zip(weights, indices, strict=True):
        term[:] = noise.get(int(i), dim)  # exact float32 -> float64
        term *= w
        total += term
    return (total / (2 * len(indices))).astype(np.float32)


class ESState:
    """Parameters, Adam moments, observation statistics and the generation counter."""

    def __init__(self, theta: np.ndarray, obs_dim: int, config: ESConfig) -> None:
        self.config = config
        self.theta = theta.astype(np.float32)
        self.adam = Adam(theta.size, config.lr)
        self.obstat = RunningStat(obs_dim)
        self.generation = 0
        self._checksum: int | None = None
        self.refresh_normalizer()

    def refresh_normalizer(self) -> None:
        """Freeze the observation mean/std that rollouts of the next generation use."""
        if self.config.obs_norm:
            self.obs_mean, self.obs_std = self.obstat.mean, self.obstat.std
        else:
            dim = self.obstat.sum.size
            self.obs_mean, self.obs_std = np.zeros(dim, np.float32), np.ones(dim, np.float32)

    def apply(self, record: dict, noise: SharedNoiseTable) -> None:
        """Take the step described by a generation record (identical on every process)."""
        if int(record["generation"]) != self.generation:
            raise ValueError(
                f"record of generation {record['generation']} applied to state at "
                f"generation {self.generation}; request a full sync instead"
            )
        grad = es_gradient(
            noise, record["indices"], record["r_pos"], record["r_neg"], self.theta.size
        )
        self.theta = self.adam.step(self.theta, -grad + self.config.l2 * self.theta)
        self.obstat.add(record["obs_sum"], record["obs_sumsq"], float(record["obs_count"]))
        self.generation += 1
        self._checksum = None
        self.refresh_normalizer()

    def checksum(self) -> int:
        """A CRC-32 of the exact bits of theta, the Adam moments and the observation statistics:
        equal in two processes only if their states are identical (a drifted worker resyncs)."""
        if self._checksum is None:
            crc = zlib.crc32(np.int64(self.generation).tobytes())
            for part in (self.theta, self.adam.m, self.adam.v, self.obstat.sum, self.obstat.sumsq):
                crc = zlib.crc32(np.ascontiguousarray(part).tobytes(), crc)
            self._checksum = zlib.crc32(np.float64(self.obstat.count).tobytes(), crc)
        return self._checksum

    def to_wire(self) -> dict:
        """Everything a joining worker needs (numpy arrays and numbers only: no pickle)."""
        return {
            "theta": self.theta,
            "m": self.adam.m,
            "v": self.adam.v,
            "t": self.adam.t,
            "sum": self.obstat.sum,
            "sumsq": self.obstat.sumsq,
            "count": self.obstat.count,
            "generation": self.generation,
        }

    def load_wire(self, msg: dict) -> None:
        """Overwrite this state with `to_wire()` output of another process."""
        self.theta = np.array(msg["theta"], np.float32)
        self.adam.m, self.adam.v = np.array(msg["m"], np.float32), np.array(msg["v"], np.float32)
        self.adam.t = int(msg["t"])
        self.obstat.sum, self.obstat.sumsq = np.array(msg["sum"]), np.array(msg["sumsq"])
        self.obstat.count = float(msg["count"])
        self.generation = int(msg["generation"])
        self._checksum = None
        self.refresh_normalizer()
