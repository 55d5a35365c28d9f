"""`surreal launch --resume RUN --set ...`: the run's checkpoint must fit the networks that the
resumed settings build, checked before anything is written (`surreal.launch.preflight`).

Before, `--set algo.hidden=32,32` on a resume of a run trained with 64,64 saved the new config
over the run's, then the learner failed to load its checkpoint, was restarted
`run.max_restarts` times and the run stopped; the advice it printed, `--resume RUN`, failed the
same way, since the run's config now said 32,32.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from surreal.api.config import Config, ConfigError, to_dict
from surreal.api.core import Learner
from surreal.runtime.plan.topology import LaunchPlan
from surreal.runtime.runfolder import checkpoint


def fits_checkpoint(p: LaunchPlan) -> Callable[[Learner], None] | None:
    """For a resumed run with a checkpoint: a check that loads it into the learner built from
    the plan's settings and raises ConfigError, naming the settings that changed, when it does
    not fit. None for a new run (nothing to fit)."""
    if not p.resume or not p.run_dir.checkpoint.is_file():
        return None
    saved = p.run_dir.load_config()

    def check(learner: Learner) -> None:
        state = checkpoint.load(p.run_dir.checkpoint)  # verified (or previous.pt), as it resumes
        try:
            learner.load_state_dict(state["learner"])
        except Exception as err:  # torch: RuntimeError (shapes), KeyError (names)
            raise ConfigError(_refusal(p.run_dir.where, saved, p.config, err)) from None

    return check


def changed(saved: Config, config: Config) -> list[str]:
    """`key: before -> now` for every setting of `config` that differs from `saved`, in key
    order, but `run.*` (steps, actors, backend: how the run goes on, never its networks)."""
    before, now = _flat(to_dict(saved)), _flat(to_dict(config))
    return [
        f"{key}: {before.get(key)!r} -> {now.get(key)!r}"
        for key in sorted(before.keys() | now.keys())
        if not key.startswith("run.") and before.get(key) != now.get(key)
    ]


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _refusal(where: str, saved: Config, config: Config, err: Exception) -> str:
    diff = changed(saved, config)
    why = checkpoint.mismatch(err, limit=300)
    if not diff:
        return (
            f"--resume {where}: its checkpoint does not fit the learner its algorithm builds "
            f"now ({why}); these are the settings in its config.json, so the algorithm's "
            "code changed since, or an earlier --resume with --set changed them (its run.json "
            "lists every launch's command): --set the values it was trained with"
        )
    return (
        f"--resume {where}: its checkpoint does not fit the networks of these settings "
        f"({'; '.join(diff)}): a resumed run keeps what it was trained with; drop those "
        f"--set, or start a new run with them ({why})"
    )
