"""A pool of fixed-size slots in one shared-memory segment; arrays go in, zero-copy views come out."""

from __future__ import annotations

import os
import sys
import uuid
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

from caraml.errors import CaramlError, SlotTooSmall
from caraml.wire import dtype_from_json, dtype_to_json

SEGMENT_PREFIX = "caraml_"
ALIGN = 64  # every array starts on a cache line

Layout = list[tuple[str, Any, tuple[int, ...], int]]  # (name, dtype, shape, byte offset in slot)


def _attach_untracked(name: str) -> shared_memory.SharedMemory:
    """Open an existing segment without registering it with this process's resource tracker,
    so that only the creating process owns (and unlinks) it."""
    if sys.version_info >= (3, 13):
        return shared_memory.SharedMemory(name=name, track=False)
    register = resource_tracker.register
    resource_tracker.register = lambda *args, **kwargs: None
    try:
        return shared_memory.SharedMemory(name=name)
    finally:
        resource_tracker.register = register


class SlotPool:
    """``n_slots`` slots of ``slot_bytes`` each; the creator unlinks the segment on :meth:`close`."""

    def __init__(self, n_slots: int, slot_bytes: int, name: str | None = None) -> None:
        if n_slots < 1 or slot_bytes < 1:
            raise CaramlError(
                f"a slot pool needs n_slots >= 1 and slot_bytes >= 1, got "
                f"{n_slots} and {slot_bytes}"
            )
        self.n_slots, self.slot_bytes = n_slots, slot_bytes
        self.owner = name is None
        if self.owner:
            name = f"{SEGMENT_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}"
            self._shm = shared_memory.SharedMemory(
                name=name, create=True, size=n_slots * slot_bytes
            )
        else:
            self._shm = _attach_untracked(name)
        self.name = self._shm.name

    def _check_slot(self, slot: int) -> None:
        if not 0 <= slot < self.n_slots:
            raise CaramlError(f"slot {slot} is outside the pool of {self.n_slots} slots")

    def write(self, slot: int, arrays: dict[str, np.ndarray]) -> Layout:
        """Copy ``arrays`` into ``slot``; return the layout that :meth:`view` needs.

        Raises:
            SlotTooSmall: the arrays (aligned to 64 bytes each) need more than ``slot_bytes``.
        """
        self._check_slot(slot)
        if not isinstance(arrays, dict):
            raise CaramlError(
                f"a batch must be a dict of name -> numpy array, got "
                f"{type(arrays).__name__}; return one from the process function"
            )
        layout: Layout = []
        offset = 0
        placed = []
        for key, value in arrays.items():
            arr = np.asarray(value)
            if arr.dtype.hasobject:
                raise CaramlError(f"batch entry {key!r} has dtype object; use a numeric dtype")
            offset = -(-offset // ALIGN) * ALIGN
            layout.append((str(key), dtype_to_json(arr.dtype), tuple(arr.shape), offset))
            placed.append((arr, offset))
            offset += arr.nbytes
        if offset > self.slot_bytes:
            sizes = ", ".join(f"{k}={np.asarray(v).nbytes}" for k, v in arrays.items())
            raise SlotTooSmall(
                f"batch needs {offset} bytes ({sizes}) but a slot holds "
                f"{self.slot_bytes}; raise slot_bytes to at least {offset}"
            )
        base = slot * self.slot_bytes
        for (arr, off), (_, _, shape, _) in zip(placed, layout, strict=True):
            dst = np.ndarray(shape, dtype=arr.dtype, buffer=self._shm.buf, offset=base + off)
            np.copyto(dst, arr, casting="no")
        return layout

    def view(self, slot: int, layout: Layout) -> dict[str, np.ndarray]:
        """Zero-copy arrays over ``slot`` as written with ``layout`` (valid until reused)."""
        self._check_slot(slot)
        base = slot * self.slot_bytes
        buf = self._shm.buf
        return {
            name: np.ndarray(
                shape,
                dtype if isinstance(dtype, np.dtype) else dtype_from_json(dtype),
                buf,
                base + off,
            )
            for name, dtype, shape, off in layout
        }

    def close(self) -> None:
        """Unmap the segment, and unlink it when this pool created it."""
        if self._shm is None:
            return
        shm, self._shm = self._shm, None
        try:
            shm.close()
        except BufferError:
            pass  # views still exist; the mapping goes when they do, the name goes now
        if self.owner:
            try:
                shm.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> SlotPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
