"""Where the learner computes (`run.device`) and its CPU threads; torch loads only when asked.

`run.device` is `auto` (the faster device for the configured step: `auto_device`), `cpu`,
`cuda` or `cuda:N`. `check_device` runs at launch, before anything starts: asking for a GPU that is not
there is a one-line usage error. In the learner process, `Learner.device` is the resolved
`torch.device` and `Learner.to_device(batch)` moves a batch dict of numpy arrays there
(`surreal.api.transfer`).
"""

from __future__ import annotations

import os
from typing import Any

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


GPU_MIN_MINIBATCH = 2048
"""`run.device=auto` puts a small-MLP update step (PPO's MLP, DDPG/TD3/SAC) on a GPU only from
this many samples per minibatch on. Measured once on an H200 (docs/gpu.md): such a step took
~6 ms there at minibatch 64 and 512 alike (launch- and Python-bound, not arithmetic), where one
core of the 2-core CPU machine took 1.4 ms at 64 and 1.9 ms at 512 (PPO) and TD3's batch of 256
ran 51.6k samples/CPU-s against the H200's 44.2k/s; the CPU's time grows with the minibatch and
the GPU's barely does, so the crossing lies above 512: 2,048 is the GPU recipe's floor (its
minibatches are 4,096), an estimate until bench/gpu_suite.py measures both sides."""


PAYS_AFTER_STEPS = 60_000
"""`auto` compiles PPO's MLP step on the CPU for runs of at least this many minibatch steps
(`run.steps x algo.update_epochs / minibatch size`). From bench/learner_step.py on the 2-core
build machine (bench/reports/learning.md, "Compiled learner step"): a cold compile costs 15-17 CPU-s (7-9
more for a second minibatch shape, e.g. a shorter last minibatch) and the compiled step saves
~0.6 ms of CPU per minibatch step, at minibatch 64 and at 512 alike (per-step overhead, not
arithmetic), so the compile is paid back after ~25-45k steps; 60k asks for about twice that.
HalfCheetah's recipe (1M steps x 10 epochs / 64) is 156k steps: compiled; the test suite's runs
and CartPole's (200k x 20 / 256 = 16k) are not."""


def pays(minibatch_steps: float, device: Any) -> bool:
    """`auto` for a step measured to pay (PPO's MLP): on the CPU, for runs of `PAYS_AFTER_STEPS`
    minibatch steps or more. Off on a GPU: measured once on an H200 (bench/reports/learning.md, "On a
    GPU"), the compiled PPO step there was 1.88x eager and still slower than one CPU core's."""
    return device.type == "cpu" and minibatch_steps >= PAYS_AFTER_STEPS


def auto_device(prefers_gpu: bool, why: str, cuda_count: int | None = None) -> tuple[str, str]:
    """What `run.device=auto` resolves to, and why (the launch summary's words): the first GPU
    when there is one and the step `prefers_gpu` (`LearnerConfig.device_preference`), else the
    CPU."""
    count = _cuda_count() if cuda_count is None else cuda_count
    if count == 0:
        return "cpu", "no CUDA GPU here"
    return ("cuda:0", why) if prefers_gpu else ("cpu", why)


def preference(run_config: Any) -> tuple[bool, str]:
    """Whether the run's learner would rather compute on a GPU, and why: `run.compile=graphs`
    asks for one, else the algorithm config's `LearnerConfig.device_preference` (a config
    without one: yes, the rule before this one)."""
    if run_config.run.compile == "graphs":
        return True, "run.compile=graphs (CUDA graphs need a GPU)"
    ask = getattr(run_config.algo, "device_preference", None)
    return ask(run_config) if ask is not None else (True, "a GPU is there")


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
