"""The shared noise table: N(0, 1) float32 numbers from a seed, one read-only copy per machine.

Every process that opens the table with the same (seed, size) on one machine maps the same file in
shared memory (`/dev/shm`), so a machine with 32 workers holds one copy. The first opener generates
it into a private temporary file and renames it into place: the rename is atomic, so a reader
either sees no table or a complete one. A perturbation is addressed by its start index alone,
which is why workers and master need to exchange only indices ("seeds") and returns.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

DEFAULT_DIR = "/dev/shm"


class SharedNoiseTable:
    """A read-only view of the machine's noise table for (seed, size)."""

    def __init__(self, seed: int, size: int, directory: str | os.PathLike | None = None) -> None:
        """Open (creating if needed) the table. directory defaults to $SURREAL_NOISE_DIR or /dev/shm."""
        if size < 1:
            raise ValueError(f"noise table size={size}; it must be >= 1")
        self.seed, self.size = seed, size
        root = Path(directory or os.environ.get("SURREAL_NOISE_DIR", DEFAULT_DIR))
        if not root.is_dir():
            raise ValueError(
                f"the ES noise table's folder {root} does not exist or is not a folder "
                "(set SURREAL_NOISE_DIR to a folder on a local disk or tmpfs, e.g. /dev/shm)"
            )
        self.path = root / f"surreal-es-noise-{seed}-{size}.f32"
        self.created = False
        if not self.path.exists():
            self._generate()
        self.noise = np.memmap(self.path, dtype=np.float32, mode="r", shape=(size,))

    def _generate(self) -> None:
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        rng = np.random.default_rng(self.seed)
        out = np.memmap(tmp, dtype=np.float32, mode="w+", shape=(self.size,))
        step = 1 << 22
        for lo in range(0, self.size, step):
            hi = min(lo + step, self.size)
            out[lo:hi] = rng.standard_normal(hi - lo, dtype=np.float32)
        out.flush()
        del out
        os.replace(tmp, self.path)
        self.created = True

    def get(self, index: int, dim: int) -> np.ndarray:
        """The perturbation eps of length dim that starts at `index` (a zero-copy view)."""
        return self.noise[index : index + dim]

    def sample_index(self, rng: np.random.Generator, dim: int) -> int:
        """A uniformly random start index for a perturbation of length dim."""
        if dim > self.size:
            raise ValueError(
                f"the policy has {dim} parameters but the noise table only {self.size}"
                " entries; raise noise_size"
            )
        return int(rng.integers(0, self.size - dim + 1))

    def unlink(self) -> None:
        """Remove the file (processes that still map it keep their copy; new ones regenerate it)."""
        self.path.unlink(missing_ok=True)
