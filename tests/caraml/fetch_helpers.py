"""Top-level functions the DataFetcher tests hand to worker processes (spawn needs to import them)."""

from __future__ import annotations

import os

import numpy as np


def make_batch(request: dict) -> dict:
    """Server side: a batch whose contents encode the request number."""
    n = request["n"]
    return {"obs": np.full((request.get("rows", 4), 3), n, np.float32), "n": n}


def to_arrays(reply: dict) -> dict:
    """Worker side preprocessing: scale observations, keep the request number."""
    return {"obs": reply["obs"] * 2.0, "n": np.array([reply["n"]], np.int64)}


def die_on_three(reply: dict) -> dict:
    """Worker side: the process dies hard on request 3 (like an OOM kill)."""
    if reply["n"] == 3:
        os._exit(7)
    return to_arrays(reply)


def raise_on_two(reply: dict) -> dict:
    """Worker side: a bug in preprocessing."""
    if reply["n"] == 2:
        raise ValueError("bad batch 2")
    return to_arrays(reply)
