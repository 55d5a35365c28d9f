"""bench/learner_step.py's PPO MLP and TD3 rows on a CUDA GPU: eager, `torch.compile` (what
`run.compile=on` does) and compiled with CUDA graphs (`mode="reduce-overhead"`, which no
`run.compile` setting selects yet), in wall time with the GPU synchronized around each window.

Each row builds its learners through bench/learner_step.py's `stepper` (the same seed, batch and
update as the CPU bench) with `run.device=cuda`; the three modes take turns, the order rotated
every round, each for the same wall-clock window. A mode that fails is reported with its error's
first line. Ran once on an NVIDIA H200 (bench/reports/learning.md, "On a GPU"):

    PYTHONPATH=. python bench/learner_step_cuda.py    # from the repository's root; needs CUDA
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import learner_step as ls  # noqa: E402  (bench/learner_step.py, beside this file)
import torch  # noqa: E402

import surreal.api.compiling as compiling  # noqa: E402
from surreal.api.config import RunConfig  # noqa: E402

ROWS = ["PPO MLP, minibatch 64", "PPO MLP, minibatch 512", "TD3, batch 256"]
MODES = ["eager", "compiled", "graphs"]
ROUNDS, WINDOW_S = 3, 1.0


class Graphs(compiling.Compiled):
    """`Compiled` with CUDA graphs: torch.compile's mode="reduce-overhead"."""

    def __init__(self, fn: Callable, name: str, reset: Callable | None = None, **_: object):
        super().__init__(fn, name, reset, mode="reduce-overhead")


def on_cuda() -> None:
    """Point bench/learner_step.py's builders at the GPU (its fixed PPO batch too)."""
    ls.RunConfig = lambda **kw: RunConfig(**{**kw, "device": "cuda"})
    flat = ls.flat_batch
    ls.flat_batch = lambda: {k: v.cuda() for k, v in flat().items()}


def build(name: str, mode: str) -> tuple:
    if mode != "graphs":
        return ls.stepper(name, "off" if mode == "eager" else "on")
    plain, compiling.Compiled = compiling.Compiled, Graphs
    try:
        return ls.stepper(name, "on")
    finally:
        compiling.Compiled = plain


def why(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err).strip().splitlines()[0][:120]}"


def timed(fn: Callable[[], object]) -> float:
    torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - start


def window(update: Callable[[], int]) -> float:
    """Sample-passes per second of `update` over one WINDOW_S window."""
    torch.cuda.synchronize()
    start, passes = time.perf_counter(), 0
    while time.perf_counter() - start < WINDOW_S:
        passes += update()
    torch.cuda.synchronize()
    return passes / (time.perf_counter() - start)


def row(name: str) -> list[str]:
    steps, first, failed = {}, {}, {}
    for mode in MODES:
        try:
            steps[mode] = build(name, mode)
            firsts = steps[mode][2]
            first[mode] = timed(lambda f=firsts: [u() for u in f + f])  # graphs record later
        except Exception as err:  # noqa: BLE001 - a failing mode is a result
            failed[mode] = why(err)
    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    for r in range(ROUNDS):
        for mode in MODES[r % 3 :] + MODES[: r % 3]:
            if mode in failed:
                continue
            try:
                rates[mode].append(window(steps[mode][0]))
            except Exception as err:  # noqa: BLE001
                failed[mode] = why(err)
    base = statistics.median(rates["eager"])
    lines = []
    for mode in MODES:
        got = rates[mode]
        if mode in failed or not got:
            lines.append(f"| {name} | {mode} | failed: {failed.get(mode)} | | | |")
            continue
        median = statistics.median(got)
        lines.append(
            f"| {name} | {mode} | {median:,.0f} [{min(got):,.0f}-{max(got):,.0f}] | "
            f"{median / base:.2f}x | {first[mode]:.1f} | {steps[mode][1]()} |"
        )
    return lines


def main() -> None:
    on_cuda()
    load_before = os.getloadavg()[0]
    out = [
        f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {torch.get_num_threads()} "
        f"torch threads, {ROUNDS} rounds x {WINDOW_S} s per mode, wall time",
        "",
        "| step | mode | samples/s median [min-max] | vs eager | first update s | still compiled |",
        "|---|---|---:|---:|---:|---|",
    ]
    for name in ROWS:
        out += row(name)
        print("\n".join(out[-3:]), flush=True)
    load = f"1-min load {load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    text = "\n".join([out[0] + f"; {load}", *out[1:]])
    print(text)
    Path(os.environ.get("OUT", "."), "gpu_step.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
