"""Torch modules as flat dicts of numpy arrays: what learners publish and policies load."""

from __future__ import annotations

from typing import Any

import numpy as np

Params = dict[str, np.ndarray]


def model_params(model: Any, prefix: str = "model/") -> Params:
    """A torch module's weights as a flat dict of numpy arrays, keys `PREFIX<state_dict key>`."""
    return {prefix + k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}


def load_model_params(model: Any, params: Params, prefix: str = "model/") -> None:
    """Inverse of `model_params`: load the `PREFIX*` entries of `params` into `model`."""
    import torch

    state = {
        k[len(prefix) :]: torch.as_tensor(np.array(v))
        for k, v in params.items()
        if k.startswith(prefix)
    }
    model.load_state_dict(state)
