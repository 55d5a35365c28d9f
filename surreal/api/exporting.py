"""What `surreal export` traces: a policy's greedy action as one torch module (docs/export.md).

A policy's `Policy.export_module()` returns an `Exportable`: its `forward` takes the tensors
named `input_names` (a batch first in each) and returns those named `output_names`, with the
observation normalization inside, so the exported file needs nothing but torch or onnxruntime.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from surreal.api.normalizer import RunningNormalizer


class ObsNormalizer(nn.Module):
    """`RunningNormalizer.__call__` in torch: the same float64 arithmetic, then float32 (None:
    the float32 cast only)."""

    def __init__(self, normalizer: RunningNormalizer | None, shape: tuple[int, ...]) -> None:
        super().__init__()
        mean = np.zeros(shape) if normalizer is None else normalizer.mean
        std = np.ones(shape) if normalizer is None else np.sqrt(normalizer.var + normalizer.eps)
        self.register_buffer("mean", torch.as_tensor(np.asarray(mean, np.float64)))
        self.register_buffer("std", torch.as_tensor(np.asarray(std, np.float64)))
        self.on = normalizer is not None
        self.clip = float(normalizer.clip or 0.0) if normalizer is not None else 0.0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.on:
            return obs.to(torch.float32)
        out = (obs.to(torch.float64) - self.mean) / self.std
        if self.clip:
            out = out.clamp(-self.clip, self.clip)
        return out.to(torch.float32)


class Exportable(nn.Module):
    """A policy's greedy action as a module: `forward(*inputs) -> outputs` over a batch."""

    input_names: tuple[str, ...] = ("obs",)
    """The names of `forward`'s arguments in the exported file (ONNX input names)."""
    output_names: tuple[str, ...] = ("action",)
    """The names of what `forward` returns (ONNX output names), in order."""

    def __init__(self, obs_shape: tuple[int, ...]) -> None:
        super().__init__()
        self.obs_shape = tuple(obs_shape)

    def example_inputs(self, batch: int) -> tuple[torch.Tensor, ...]:
        """Inputs of `batch` rows to trace with (observations from N(0, 1))."""
        return (torch.randn(batch, *self.obs_shape),)
