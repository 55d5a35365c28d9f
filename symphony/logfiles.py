"""Read and follow log files (the local, tmux and slurm backends write one per process)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path


def read_lines(path: str | Path, tail: int | None = None) -> list[str]:
    """Every line of `path` (or its last `tail`); a missing file has no lines yet."""
    try:
        with open(path, errors="replace") as f:
            return list(deque(f, maxlen=tail)) if tail is not None else f.readlines()
    except FileNotFoundError:
        return []


def follow_file(
    path: str | Path, running: Callable[[], bool], tail: int | None = None, poll_s: float = 0.2
) -> Iterator[str]:
    """Yield the (last `tail`) lines of `path`, then new lines until `running()` turns False.

    A line still being written (no newline yet) is yielded once it is complete, or at the end.
    """
    path = Path(path)
    while not path.exists() and running():
        time.sleep(poll_s)
    if not path.exists():
        return
    with open(path, errors="replace") as f:
        yield from (deque(f, maxlen=tail) if tail is not None else f)
        partial = ""
        while True:
            alive = running()  # checked before reading, so the last lines are never lost
            chunk = f.readline()
            while chunk:
                partial += chunk
                if partial.endswith("\n"):
                    yield partial
                    partial = ""
                chunk = f.readline()
            if not alive:
                break
            time.sleep(poll_s)
        if partial:
            yield partial + "\n"
