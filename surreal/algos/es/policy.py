"""The ES policy of the paper in numpy: two tanh FC layers, an FC + tanh output, fixed action noise.

Parameters live in one flat float32 vector (what ES perturbs). Actions:
- Box, continuous: a = tanh(W3 h + b3) + N(0, action_std^2), rescaled onto the Box bounds.
- Box, discretized into k bins per component: the output layer gives k logits per component and
  the argmax bin's value in linspace(-1, 1, k) is used (the paper's option for Swimmer and Hopper).
- Discrete(n): the argmax of n outputs (a stated extension, for CartPole).
"""

from __future__ import annotations

import numpy as np


class ESPolicy:
    """A numpy MLP policy over a flat parameter vector."""

    def __init__(
        self,
        obs_dim: int,
        action_space,
        hidden: tuple[int, ...] = (64, 64),
        action_std: float = 0.01,
        discretize: int = 0,
    ) -> None:
        """Args: action_space: a gymnasium Box or Discrete space."""
        self.discrete_n = int(getattr(action_space, "n", 0) or 0)
        self.bins = 0 if self.discrete_n else discretize
        if self.discrete_n:
            self.act_dim, out = 1, self.discrete_n
        else:
            self.act_dim = int(np.prod(action_space.shape))
            self.low, self.high = action_space.low, action_space.high
            out = self.act_dim * self.bins if self.bins else self.act_dim
        self.action_std = action_std
        self.sizes = [obs_dim, *hidden, out]
        self.shapes = []
        for i in range(len(self.sizes) - 1):
            self.shapes += [(self.sizes[i], self.sizes[i + 1]), (self.sizes[i + 1],)]
        self.num_params = int(sum(np.prod(s) for s in self.shapes))

    def init_params(self, seed: int) -> np.ndarray:
        """Normalized-column initialization (OpenAI ES), zero biases; the output layer small."""
        rng = np.random.default_rng(seed)
        parts = []
        for i, shape in enumerate(self.shapes):
            if len(shape) == 1:
                parts.append(np.zeros(shape, np.float32))
                continue
            w = rng.standard_normal(shape).astype(np.float32)
            scale = 0.01 if i == len(self.shapes) - 2 else 1.0
            parts.append(w * scale / np.sqrt(np.square(w).sum(axis=0, keepdims=True)))
        return np.concatenate([p.ravel() for p in parts]).astype(np.float32)

    def unflatten(self, flat: np.ndarray) -> list[np.ndarray]:
        """Views of the flat vector as [W1, b1, W2, b2, ...]."""
        out, pos = [], 0
        for shape in self.shapes:
            n = int(np.prod(shape))
            out.append(flat[pos : pos + n].reshape(shape))
            pos += n
        return out

    def forward(self, layers: list[np.ndarray], obs: np.ndarray) -> np.ndarray:
        """Raw outputs of the network for one observation."""
        h = obs
        for i in range(0, len(layers) - 2, 2):
            h = np.tanh(h @ layers[i] + layers[i + 1])
        return h @ layers[-2] + layers[-1]

    def act(self, layers: list[np.ndarray], obs: np.ndarray, rng: np.random.Generator | None):
        """The env action for one (normalized) observation; rng=None gives the noiseless action."""
        out = self.forward(layers, obs)
        if self.discrete_n:
            return int(np.argmax(out))
        if self.bins:
            idx = out.reshape(self.act_dim, self.bins).argmax(axis=1)
            a = np.linspace(-1.0, 1.0, self.bins)[idx]
        else:
            a = np.tanh(out)
            if rng is not None and self.action_std > 0:
                a = a + rng.normal(0.0, self.action_std, a.shape)
        a = np.clip(a, -1.0, 1.0)
        return (self.low + (a + 1.0) * 0.5 * (self.high - self.low)).astype(np.float32)
