"""A ring of processes passing a counter through their declared services.

    symphony launch examples/01_ring/ring.py                 # attached, local backend; Ctrl-C stops
    symphony launch examples/01_ring/ring.py --backend tmux --detach
    RING_SIZE=5 RING_ROUNDS=0 symphony launch examples/01_ring/ring.py --detach   # runs until deleted

Node i binds `ring-i` and connects to `ring-(i+1)`; symphony hands each node its addresses as
SYMPH_RING_<i>_HOST/PORT. Each node restarts on failure (kill -9 one: it comes back).
"""

import os
from pathlib import Path

from symphony import Experiment, Process, RestartPolicy

HERE = Path(__file__).resolve().parent


def make_experiment() -> Experiment:
    """The ring; its size and rounds come from RING_SIZE (3) and RING_ROUNDS (5; 0 = forever)."""
    size = int(os.environ.get("RING_SIZE", "3"))
    rounds = int(os.environ.get("RING_ROUNDS", "5"))
    exp = Experiment("ring")
    for i in range(size):
        node = Process(
            f"node-{i}",
            ["python3", "node.py", "--index", str(i), "--size", str(size), "--rounds", str(rounds)],
            cwd=str(HERE),
            restart=RestartPolicy("on-failure", max_restarts=3, backoff_s=0.5),
        )
        exp.add(node.binds(f"ring-{i}").connects(f"ring-{(i + 1) % size}"))
    return exp
