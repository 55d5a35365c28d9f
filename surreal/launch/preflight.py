"""The launch-time check: run an algorithm's code once on synthetic data before anything starts.

`surreal launch` calls `check_algorithm` in its own process: make_policy -> act -> act
(deterministic) -> value -> the learner -> load_params(params()) -> learn on `example_batch`.
A failure becomes one `PreflightError` paragraph naming the stage, the file:line where it broke
and the error, instead of a crashed actor or learner process minutes later.
"""

from __future__ import annotations

import inspect
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from surreal.api.config import Config, ConfigError
from surreal.api.core import Learner
from surreal.api.recipe import recipe_of, segment_batch
from surreal.api.spaces import EnvInfo
from surreal.api.synthetic import SyntheticEnv

__all__ = [
    "RUNTIME_METRICS",
    "PreflightError",
    "SyntheticEnv",
    "check_algorithm",
    "segment_batch",  # the default `Recipe.example_batch` (surreal.api.recipe)
]

RUNTIME_METRICS = (
    "charts/sps",
    "charts/learn_time",
    "charts/policy_lag",
    "charts/learner_its",
    "buffer/fill",
)
"""Metric names the learner process sets itself; a learner must not return them."""

_LIBRARIES = tuple(
    str(Path(sysconfig.get_paths()[key]).resolve()) for key in ("stdlib", "purelib", "platlib")
)
_HERE = {str(p.resolve()) for p in Path(__file__).parent.glob("*.py")}  # the runtime's own files


class PreflightError(ValueError):
    """The algorithm failed on synthetic data at launch; the message says where and why."""


def check_algorithm(
    algo_class: type[Learner],
    run_config: Config,
    env_info: EnvInfo,
    fits: Callable[[Learner], None] | None = None,
) -> None:
    """Run the algorithm's hooks once on synthetic data in this process; `fits(learner)`, when
    given, checks the learner built (a resumed run's checkpoint: `surreal.launch.resume_check`)
    and raises a ConfigError of its own.

    Raises:
        PreflightError: naming the stage, the file:line where it failed and the error.
    """
    import torch

    name, cfg = algo_class.__name__, run_config.algo
    stage, where = f"{name}.make_policy(config, env_info)", algo_class.make_policy
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        policy = algo_class.make_policy(cfg, env_info)
        obs = SyntheticEnv(env_info).reset()
        stage, where = f"{type(policy).__name__}.act(obs)", type(policy).act
        _check_act(policy.act(obs), len(obs))
        stage = f"{type(policy).__name__}.act(obs, deterministic=True)"
        _check_act(policy.act(obs, deterministic=True), len(obs))
        stage, where = f"{type(policy).__name__}.value(obs)", type(policy).value
        policy.value(obs)
        stage, where = f"{name}(config, env_info)", algo_class.__init__
        learner = algo_class.create(run_config, env_info)
        if fits is not None:
            fits(learner)
        stage, where = f"{type(policy).__name__}.load_params({name}.params())", algo_class.params
        policy.load_params(learner.params())
        feeding = recipe_of(algo_class)
        stage, where = f"{feeding.__name__}.example_batch(...)", feeding.example_batch
        batch = feeding.example_batch(run_config, env_info, policy)
        if batch is not None:
            stage, where = f"{name}.learn(batch)", algo_class.learn
            _check_metrics(learner.learn(batch))
    except ConfigError:
        raise  # fits: says what to do itself
    except Exception as err:
        raise PreflightError(_paragraph(name, stage, err, where)) from err
    finally:
        torch.set_num_threads(threads)


def _check_act(result: Any, n: int) -> None:
    if not (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], dict)):
        raise TypeError(f"act must return (actions, extras dict), got {type(result).__name__}")
    actions, extras = result
    if len(actions) != n:
        raise ValueError(f"act got {n} observations but returned {len(actions)} actions")
    for key, value in extras.items():
        if np.shape(value)[:1] != (n,):
            raise ValueError(
                f"extras[{key!r}] must have one entry per env ({n}), got shape {np.shape(value)}"
            )


def _check_metrics(metrics: Any) -> None:
    if not isinstance(metrics, dict):
        raise TypeError(f"learn must return a dict of metric name -> float, got {metrics!r}")
    for key, value in metrics.items():
        if not isinstance(key, str) or "/" not in key:
            raise ValueError(f"metric name {key!r}: use 'section/name', e.g. 'losses/my_loss'")
        if key in RUNTIME_METRICS:
            raise ValueError(f"metric {key!r} is set by the learner process itself; rename it")
        float(value)  # raises for what cannot be logged


def _paragraph(algo: str, stage: str, err: BaseException, where: Any) -> str:
    """One paragraph: stage, the file:line of the failure in the algorithm's code, the error."""
    frames = [
        f
        for f in traceback.extract_tb(err.__traceback__)
        if not str(Path(f.filename).resolve()).startswith(_LIBRARIES)
        and str(Path(f.filename).resolve()) not in _HERE
    ]
    if frames:
        location = f"{frames[-1].filename}:{frames[-1].lineno}"
    else:
        location = _definition(where)
    return (
        f"{algo} failed the launch check at {stage}: {location}: {type(err).__name__}: {err}. "
        "`surreal launch` ran the algorithm once on a small synthetic batch before starting "
        "anything, and nothing was started or written; fix the code and launch again."
    )


def _definition(function: Any) -> str:
    try:
        return f"{inspect.getsourcefile(function)}:{inspect.getsourcelines(function)[1]}"
    except (OSError, TypeError):
        return getattr(function, "__qualname__", "?")
