"""Checkpoints: the learner's state (model, optimizer, normalizer) with the step counters."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from surreal.core import Learner
from surreal.storage_sync import track


def save(path: Path, learner: Learner, counters: dict[str, int]) -> None:
    """Write `latest.pt` atomically: learner state, its published params, and the counters."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    state = {
        "learner": learner.state_dict(),
        "params": learner.params(),
        "counters": dict(counters),
        "time": time.time(),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    track(path)  # a run in an object store uploads it


def load(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by `save` (our own file: full unpickling is allowed)."""
    import torch

    if not path.is_file():
        raise FileNotFoundError(
            f"no checkpoint at {path}; a run writes one every "
            "run.checkpoint_every learner iterations and at exit"
        )
    return torch.load(path, map_location="cpu", weights_only=False)
