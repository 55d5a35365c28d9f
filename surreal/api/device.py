"""Where the learner computes (`run.device`), its CPU threads, and the batch path to the device.

`run.device` is `auto` (the first GPU when torch sees one, else the CPU), `cpu`, `cuda` or
`cuda:N`. `check_device` runs at launch, before anything starts: asking for a GPU that is not
there is a one-line usage error. In the learner process, `Learner.device` is the resolved
`torch.device` and `Learner.to_device(batch)` moves a batch dict of numpy arrays there.

The batch path: `to_device` wraps each array as a tensor without copying (CPU) or stages it
through pinned host memory and copies it asynchronously (CUDA); `Prefetcher` starts the copy of
batch k+1 while the caller still works on batch k.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from surreal.api.config import ConfigError

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def check_device(spec: str, cuda_count: int | None = None, name: str = "run.device") -> str:
    """The device `spec` (the setting NAME: `run.device`, `actor.inference_device`) resolves to
    here, as a string (`cpu`, `cuda:0`, ...).

    Raises:
        ConfigError: a spec that is none of auto/cpu/cuda/cuda:N, or a GPU this machine lacks
            (one line saying what to set instead).
    """
    count = _cuda_count() if cuda_count is None else cuda_count
    spec = spec.strip().lower()
    if spec == "auto":
        return "cuda:0" if count > 0 else "cpu"
    if spec == "cpu":
        return "cpu"
    if spec == "cuda" or spec.startswith("cuda:"):
        index_text = spec.partition(":")[2] or "0"
        if not index_text.isdigit():
            raise ConfigError(f"{name} must be {DEVICE_CHOICES}, got {spec!r}")
        index = int(index_text)
        if count == 0:
            raise ConfigError(
                f"{name}={spec}: torch sees no CUDA GPU on this machine; "
                f"use --set {name}=cpu (or auto)"
            )
        if index >= count:
            raise ConfigError(
                f"{name}={spec}: this machine has {count} CUDA GPU(s) (cuda:0..cuda:{count - 1})"
            )
        return f"cuda:{index}"
    raise ConfigError(f"{name} must be {DEVICE_CHOICES}, got {spec!r}")


def wants_gpu(spec: str) -> bool:
    """Whether `run.device` asks for a GPU explicitly (the learner process then declares one)."""
    return spec.strip().lower().startswith("cuda")


def resolve(spec: str) -> Any:
    """`check_device(spec)` as a `torch.device`."""
    import torch

    return torch.device(check_device(spec))


def learner_threads(torch_threads: int, actors: int, cpus: int | None = None) -> int:
    """torch threads of the learner: `run.torch_threads` when > 0, else (0, the default) what
    the learner's process can use: the CPUs it may run on (`os.sched_getaffinity`) minus one per
    actor and one for the buffer and parameter server together, at least 1.

    On a laptop with 2 actors and 8 CPUs that is 5; with 100 actors (on other machines of a
    cluster the learner's own CPUs count; set `run.torch_threads` there) it is 1 here.
    """
    if torch_threads > 0:
        return torch_threads
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cpus or 1) - actors - 1)


def to_device(batch: dict[str, np.ndarray], device: Any) -> dict[str, Any]:
    """A batch dict of numpy arrays as tensors on `device`.

    CPU: `torch.from_numpy` views, no copy (the arrays must outlive the tensors: a DataFetcher
    slot is reused once its handle is released). CUDA: each array is copied once into pinned
    host memory and from there to the GPU asynchronously (on the current stream).
    """
    import torch

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
        import torch

        self.device = torch.device(device)
        self.source = iter(batches)
        self.stream = torch.cuda.Stream(self.device) if self.device.type == "cuda" else None
        self.next: tuple[dict[str, Any], Any] | None = None
        if self.stream is not None:
            self._stage()

    def _stage(self) -> None:
        import torch

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
        import torch

        if self.next is None:
            raise StopIteration
        tensors, event = self.next
        torch.cuda.current_stream(self.device).wait_event(event)
        for tensor in tensors.values():  # memory made on the side stream, used on this one
            tensor.record_stream(torch.cuda.current_stream(self.device))
        self._stage()
        return tensors
