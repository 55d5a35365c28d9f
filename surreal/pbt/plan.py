"""A population as one symphony Experiment: every member's own topology, renamed, plus a manager.

Member `m<i>` is a whole run in `RUN/m<i>/` (its config, metrics, status, checkpoints). Its
processes are the algorithm's own `Learner.build_experiment` for that run, with every process,
group and service name prefixed `m<i>-` (`m0-learner`, `m0-params`, ...); each process finds its
member's services through `$SURREAL_SERVICE_PREFIX` (`surreal.runtime.processes.common.Component`).
One more process, `population-manager` (`surreal.pbt.manager`), runs the exploit/explore rounds.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import surreal.pbt.store as store
from surreal.api import config as config_io
from surreal.api.config import Config, ConfigError
from surreal.api.recipe import recipe_of
from surreal.launch import experiment as launching
from surreal.pbt.config import PBTConfig, init_overrides, make_config
from surreal.pbt.config import from_dict as pbt_from_dict
from surreal.pbt.config import to_dict as pbt_to_dict
from surreal.pbt.space import check_space
from surreal.runtime.plan.topology import (
    PROCESS_ENV,
    RUNTIME_COMPONENTS,
    LaunchPlan,
    algorithm_experiment,
    restart_policy,
)
from surreal.runtime.runfolder.rundir import RunDir, read_json, write_json
from surreal.runtime.wire import curve
from symphony import Experiment, Process, ProcessGroup

MANAGER = "population-manager"
"""The manager's process name."""
SEED_STRIDE = 10_000
"""Member i runs with `run.seed + SEED_STRIDE * i` (its actors add 1000 * (j + 1) to that)."""


@dataclass
class PopulationPlan:
    """The base run (`RUN/`: the config every member starts from) and one plan per member."""

    base: LaunchPlan
    pbt: PBTConfig
    members: list[LaunchPlan]


def plan_population(
    base: LaunchPlan,
    pbt: PBTConfig,
    steps: int | None = None,
    overrides: tuple[str, ...] = (),
) -> PopulationPlan:
    """Members of `base` (from `surreal.launch.experiment.plan`); with `base.resume`, the population saved
    in that folder, its members' current configs with `steps` and `overrides` applied.

    Raises:
        ConfigError: an algorithm or setting a population cannot use, saying what to change.
    """
    check_population(base, pbt)
    members = []
    for i, name in enumerate(store.member_names(pbt.members)):
        run_dir = RunDir(base.run_dir.path / name)
        if base.resume:
            if not run_dir.exists():
                raise ConfigError(f"--resume {base.run_dir.path}: member folder {name} is missing")
            config = run_dir.load_config()
            if steps is not None:
                config.run.steps = steps
            config_io.apply_overrides(config, list(overrides))
        else:
            config = member_config(base.config, i, pbt)
        members.append(replace(base, config=config, run_dir=run_dir))
    return PopulationPlan(base, pbt, members)


def resume_config(
    run_path: Path, members: int | None, overrides: tuple[str, ...] = ()
) -> PBTConfig:
    """The saved `RUN/pbt.json` with `pbt.*` overrides applied (`members`: what `--population`
    said, None or the saved number).

    Raises:
        ConfigError: `members` differs from the saved population's size.
    """
    saved = pbt_from_dict(read_json(Path(run_path) / store.PBT_FILE))
    if members is not None and members != saved.members:
        raise ConfigError(
            f"--resume {run_path} is a population of {saved.members}; drop --population {members}"
        )
    return make_config(saved.members, overrides, base=saved)


def member_config(base: Config, index: int, pbt: PBTConfig) -> Config:
    """Member `index`'s config: the base's, its own seed, and its `pbt.init` values."""
    config = copy.deepcopy(base)
    config.run.seed = base.run.seed + SEED_STRIDE * index
    config_io.apply_overrides(config, init_overrides(pbt).get(index, []))
    return config


def check_population(base: LaunchPlan, pbt: PBTConfig) -> None:
    """What a population needs: the runtime's learner loop (it takes the manager's directives),
    one learner process per member, and a search space of numeric `algo.*` settings."""
    if recipe_of(base.algo_class).components().get("learner") != RUNTIME_COMPONENTS["learner"]:
        raise ConfigError(
            f"--population: {base.algo_class.__name__} has its own learner process; populations "
            "work with the runtime's learner loop (ppo, ppo-vision, your Learner)"
        )
    if base.config.run.learner_replicas != 1:
        raise ConfigError("--population needs run.learner_replicas=1 (one learner per member)")
    check_space(pbt.hyperparameters(), base.config.algo)


def build_experiment(pp: PopulationPlan) -> Any:
    """The validated symphony Experiment: every member's processes, renamed, and the manager."""
    base = pp.base
    exp = Experiment(
        base.experiment_name,
        metadata={
            "algo": base.algo_ref,
            "env": base.config.env.id,
            "run_dir": str(base.run_dir.path.resolve()),
            "population": str(pp.pbt.members),
        },
    )
    for name, member in zip(store.member_names(pp.pbt.members), pp.members, strict=True):
        for item in algorithm_experiment(member).components:
            exp.add(_renamed(item, name))
    command = [sys.executable, "-m", "surreal.pbt.manager", str(base.run_dir.path.resolve())]
    exp.add(Process(MANAGER, command, env=dict(PROCESS_ENV), restart=restart_policy()))
    return curve.apply(exp, base).validate()


def _renamed(item: Any, member: str) -> Any:
    """A Process or ProcessGroup of a member's experiment with `member-` before every name."""
    if isinstance(item, ProcessGroup):
        return ProcessGroup(f"{member}-{item.name}", [_renamed(p, member) for p in item.processes])
    data = item.to_dict()
    data["name"] = f"{member}-{item.name}"
    for key in ("binds", "connects", "exposes"):
        data[key] = [f"{member}-{service}" for service in data[key]]
    data["env"]["SURREAL_SERVICE_PREFIX"] = f"{member}-"
    if item.name == "learner":  # a member's end is not the population's: restart on failure
        data["restart"] = vars(restart_policy()).copy()
    return Process.from_dict(data)


def create_population(pp: PopulationPlan) -> None:
    """Write `RUN/` (base run, `pbt.json`, the experiment) and every member's folder."""
    base = pp.base
    launching.create_run(base)  # config, run.json, code/, Curve keys (the members use them)
    write_json(base.run_dir.path / store.PBT_FILE, pbt_to_dict(pp.pbt))
    info = base.run_dir.info()
    for i, (name, member) in enumerate(
        zip(store.member_names(pp.pbt.members), pp.members, strict=True)
    ):
        if base.resume:
            config_io.save(member.config, member.run_dir.config_file)
            continue
        member.config = member_config(base.config, i, pp.pbt)  # with the base's code/ refs
        member_info = {k: info[k] for k in ("algo", "env_info", "experiment")}
        if info.get("algo_copy"):
            member_info["algo_copy"] = f"../{info['algo_copy']}"
        member.run_dir.create(member.config, {**member_info, "member": name})
        write_json(
            member.run_dir.path / "member.json",
            {"name": name, "index": i, "interval": pp.pbt.interval},
        )
    if base.resume:  # a changed pbt.interval reaches the learners
        for name in store.member_names(pp.pbt.members):
            path = base.run_dir.path / name / "member.json"
            write_json(path, {**read_json(path, {}), "interval": pp.pbt.interval})
    (base.run_dir.path / "experiment.yaml").write_text(build_experiment(pp).to_yaml())
