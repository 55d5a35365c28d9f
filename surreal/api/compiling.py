"""`run.compile`: a learner's update step through `torch.compile`, eager after a failure.

`Learner.compiled(fn, name)` is the entry point (surreal/api/core.py); this module holds the work:
`enabled` resolves the setting (`auto` asks the learner whether compiling pays for this run:
`Learner.compile_pays`, `pays`; `graphs` is `torch.compile`'s CUDA graphs, on a GPU only:
`graphs_here`); `Compiled` wraps the step and falls back to the plain function,
with one warning line on the process's log, when compiling or running the compiled version
raises. What was measured to pay and what not: bench/reports/learning.md, "Compiled learner step"
(bench/learner_step.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_map_only

from surreal.api.config import ConfigError
from surreal.api.device import PAYS_AFTER_STEPS, pays  # noqa: F401  (the rule lives there, torch-free)

log = logging.getLogger(__name__)
"""Where the fall back's warning goes: the process's log (`surreal.monitoring.logs` prints the
WARNING records of every logger without a handler of its own)."""

MODES = ("auto", "on", "off", "graphs")
"""The values of `run.compile`: `graphs` is `on` plus CUDA graphs (`torch.compile`'s
"reduce-overhead" mode: a step's kernels replayed as one graph, no launch per kernel)."""


def check(mode: str) -> str:
    """`mode` if it is a `run.compile` value, else ConfigError (one line)."""
    if mode not in MODES:
        raise ConfigError(f"run.compile must be auto, on, off or graphs, got {mode!r}")
    return mode


def enabled(mode: str, paid: bool) -> bool:
    """Whether the update step is compiled: `on` or `graphs`, or `auto` where the learner says
    it pays, `paid` (`graphs` off a GPU is `auto`: `graphs_here`)."""
    return check(mode) in ("on", "graphs") or (mode == "auto" and paid)


def graphs_here(mode: str, device: torch.device) -> str:
    """`mode`, except `graphs` on a device that is not a CUDA GPU: one warning line on the
    process's log, and `auto` instead (CUDA graphs replay GPU kernels; a CPU has none)."""
    if check(mode) != "graphs" or device.type == "cuda":
        return mode
    log.warning(
        "run.compile=graphs: CUDA graphs need a CUDA GPU and the learner runs on %s; "
        "run.compile=auto instead",
        device,
    )
    return "auto"


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    line = text[0] if text else ""
    line = f"{type(err).__name__}: {line}" if line else type(err).__name__
    return line if len(line) <= 200 else line[:197] + "..."


class Compiled:
    """`fn` through `torch.compile` (compiled on its first call, again for a new input shape;
    with `graphs`, in CUDA graphs: each call starts a new graph step and its tensor outputs are
    copied out of the graph's memory); if compiling or a compiled call raises, one warning line on the process's log and `fn`
    itself from then on. The failed call is run again eagerly, after `reset()` when given (e.g.
    the optimizer's `zero_grad`, for a step that failed in its compiled backward).

    Attributes:
        name: what the warning calls the step.
        active: True while the compiled version is in use (False after a fall back).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str,
        reset: Callable[[], Any] | None = None,
        graphs: bool = False,
        **options: Any,
    ) -> None:
        self.fn = fn
        self.name = name
        self.reset = reset
        self.graphs = graphs
        self.compiled: Callable[..., Any] | None = None
        if graphs:
            options.setdefault("mode", "reduce-overhead")
        try:
            self.compiled = torch.compile(fn, **options)
        except Exception as err:  # noqa: BLE001 - any failure falls back, never stops the run
            self._fall_back(err)

    @property
    def active(self) -> bool:
        return self.compiled is not None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.compiled is None:
            return self.fn(*args, **kwargs)
        try:
            if not self.graphs:
                return self.compiled(*args, **kwargs)
            # each call is a new step of the graph's replays; its outputs are copied out of the
            # graph's memory, which the next replay (the actor's step after the critic's, the next
            # minibatch) overwrites
            torch.compiler.cudagraph_mark_step_begin()
            return tree_map_only(torch.Tensor, torch.clone, self.compiled(*args, **kwargs))
        except Exception as err:  # noqa: BLE001 - see the class's docstring
            self._fall_back(err)
            if self.reset is not None:
                self.reset()
            return self.fn(*args, **kwargs)

    def _fall_back(self, err: BaseException) -> None:
        self.compiled = None
        log.warning(
            "run.compile: compiling %s failed (%s); it runs eagerly from now on",
            self.name,
            _first_line(err),
        )
