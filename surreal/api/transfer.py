"""The batch path to the learner's device (`Learner.to_device`): torch at the top, so this
module loads in the learner process only.

`to_device` wraps each array as a tensor without copying (CPU) or stages it through pinned host
memory and copies it asynchronously (CUDA); `Prefetcher` starts the copy of batch k+1 while the
caller still works on batch k.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import torch


def to_device(batch: dict[str, np.ndarray], device: Any) -> dict[str, Any]:
    """A batch dict of numpy arrays as tensors on `device`.

    CPU: `torch.from_numpy` views, no copy (the arrays must outlive the tensors: a DataFetcher
    slot is reused once its handle is released). CUDA: each array is copied once into pinned
    host memory and from there to the GPU asynchronously (on the current stream).
    """
    device = torch.device(device)
    out: dict[str, Any] = {}
    for key, value in batch.items():
        array = np.asarray(value)
        with warnings.catch_warnings():  # read-only shared memory: a view is fine, never written
            warnings.simplefilter("ignore", UserWarning)
            tensor = torch.from_numpy(array)
        if device.type != "cpu":
            tensor = tensor.pin_memory().to(device, non_blocking=True)
        out[key] = tensor
    return out


class Prefetcher:
    """Iterate over `batches` (numpy dicts) as device tensors, copying batch k+1 while the
    caller works on batch k.

    On CUDA the copy runs on a side stream and the consumer's stream waits on it before the
    batch is handed out; on CPU each batch is converted (zero-copy) when it is asked for, so the
    source's arrays are never held longer than before. Order and values are the source's.
    """

    def __init__(self, batches: Iterable[dict[str, np.ndarray]], device: Any) -> None:
        self.device = torch.device(device)
        self.source = iter(batches)
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.next: tuple[dict[str, Any], Any] | None = None
        if self.stream is not None:
            self._stage()

    def _stage(self) -> None:
        try:
            batch = next(self.source)
        except StopIteration:
            self.next = None
            return
        with torch.cuda.stream(self.stream):
            tensors = to_device(batch, self.device)
            event = torch.cuda.Event()
            event.record(self.stream)
        self.next = (tensors, event)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return self

    def __next__(self) -> dict[str, Any]:
        if self.stream is None:
            return to_device(next(self.source), self.device)
        if self.next is None:
            raise StopIteration
        tensors, event = self.next
        torch.cuda.current_stream(self.device).wait_event(event)
        for tensor in tensors.values():  # memory made on the side stream, used on this one
            tensor.record_stream(torch.cuda.current_stream(self.device))
        self._stage()
        return tensors
