"""From a config to a symphony Experiment: one process per component, wired by named services."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from surreal import config as config_io
from surreal import config_check
from surreal.config import Config, ConfigError
from surreal.rundir import RunDir, slug
from surreal.spaces import EnvInfo


@dataclass
class LaunchPlan:
    """Everything decided before anything starts (built by `plan`, no side effects)."""

    config: Config
    algo_ref: str
    algo_class: type
    env_info: EnvInfo
    run_dir: RunDir
    experiment_name: str
    resume: bool = False


def plan(
    algo: str | None,
    *,
    env: str | None = None,
    actors: int | None = None,
    steps: int | None = None,
    overrides: tuple[str, ...] = (),
    folder: str = "runs",
    name: str | None = None,
    trial: str | None = None,
    resume: str | None = None,
) -> LaunchPlan:
    """Resolve the algorithm, build and check the config and the environment, pick the run folder.

    Raises:
        UnknownAlgorithm, UnknownEnvironment, ConfigError, FileExistsError, FileNotFoundError:
            with a message that says what to do; nothing has started.
    """
    from surreal.algos import resolve
    from surreal.envs import check_env, env_info

    if resume:
        run_dir = RunDir(Path(resume))
        if not run_dir.exists():
            raise FileNotFoundError(
                f"--resume {resume}: not a run folder (no config.json/run.json)"
            )
        algo_ref = run_dir.info()["algo"]
        if algo and algo != algo_ref and resolve(algo) is not resolve(algo_ref):
            raise ConfigError(f"--resume {resume} trains {algo_ref!r}, not {algo!r}; drop ALGO")
        algo_class = resolve(algo_ref)
        config = run_dir.load_config()
    else:
        if not algo:
            raise ConfigError(
                "name an algorithm (e.g. `surreal launch ppo`) or pass --resume RUN_DIR"
            )
        algo_class = resolve(algo)
        algo_ref = algo if ":" not in algo else _absolute_ref(algo)
        config = Config(algo=algo_class.config_class())
    if env is not None:
        config.env.id = env
    if actors is not None:
        config.run.actors = actors
    if steps is not None:
        config.run.steps = steps
    config_io.apply_overrides(config, list(overrides))
    _check(config)
    check_env(config.env.id)
    info = env_info(config.env.id, config.env)
    if hasattr(algo_class, "check_config"):
        algo_class.check_config(config.algo, info)  # e.g. a network that cannot read these obs
    config_check.check(config, algo_class, info)  # NaN/inf, ranges, algorithm vs action space
    if not resume:
        base = Path(folder) / slug(
            name or f"{Path(algo_ref.split(':')[-1]).stem}-{config.env.id.split(':')[-1]}"
        )
        run_dir = RunDir(base / (trial or _next_trial(base)))
        if run_dir.path.exists():
            raise FileExistsError(
                f"{run_dir.path} exists; pick another --trial or continue it with "
                f"--resume {run_dir.path}"
            )
    exp_name = slug(f"{run_dir.path.parent.name}-{run_dir.path.name}")[:63].strip("-")
    return LaunchPlan(config, algo_ref, algo_class, info, run_dir, exp_name, bool(resume))


def _absolute_ref(ref: str) -> str:
    path, _, cls = ref.partition(":")
    return f"{Path(path).resolve()}:{cls}"


def _next_trial(base: Path) -> str:
    i = 1
    while (base / f"t{i}").exists():
        i += 1
    return f"t{i}"


def _check(config: Config) -> None:
    """Values the types alone do not rule out."""
    positive = {
        "run.actors": config.run.actors,
        "run.steps": config.run.steps,
        "env.num_envs": config.env.num_envs,
        "actor.rollout_length": config.actor.rollout_length,
        "run.checkpoint_every": config.run.checkpoint_every,
        "actor.group_size": config.actor.group_size,
    }
    for key, value in positive.items():
        if value < 1:
            flag = {"run.actors": "--actors", "run.steps": "--steps"}.get(key, f"--set {key}")
            raise ConfigError(f"{key} must be >= 1, got {value} ({flag} N)")
    if config.actor.max_ahead is not None and config.actor.max_ahead < 0:
        raise ConfigError("actor.max_ahead must be >= 0 or none (never wait)")


PROCESS_ENV = {"PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _command(run_dir: RunDir, role: str, index: int = 0) -> list[str]:
    return [
        sys.executable,
        "-m",
        "surreal",
        "component",
        role,
        str(run_dir.path.resolve()),
        "--index",
        str(index),
    ]


def module_command(module: str, run_dir: RunDir, role: str, index: int = 0) -> list[str]:
    """`python -m MODULE ROLE RUN_DIR --index I`: the command line of an algorithm's own process."""
    return [sys.executable, "-m", module, role, str(run_dir.path.resolve()), "--index", str(index)]


def restart_policy() -> Any:
    """How every process but the learner restarts: on failure, 0.5-5 s apart, up to 20 times
    within any 10 minutes (a crash loop ends the run; crashes now and then over days do not)."""
    from symphony import RestartPolicy

    return RestartPolicy(
        mode="on-failure", max_restarts=20, backoff_s=0.5, max_backoff_s=5.0, window_s=600.0
    )


def new_experiment(p: LaunchPlan) -> Any:
    """The symphony Experiment of a plan, labelled with its algo, env and run folder, holding the
    runtime's metrics sink (every topology starts from this)."""
    from symphony import Experiment, Process

    exp = Experiment(
        p.experiment_name,
        metadata={
            "algo": p.algo_ref,
            "env": p.config.env.id,
            "run_dir": str(p.run_dir.path.resolve()),
        },
    )
    exp.add(
        Process(
            "metrics",
            _command(p.run_dir, "metrics"),
            env=dict(PROCESS_ENV),
            restart=restart_policy(),
        ).binds("metrics")
    )
    return exp


def learner_process(p: LaunchPlan, command: list[str]) -> Any:
    """The learner Process: `run.torch_threads` OpenMP threads and CPUs; never restarted (its end
    is the run's end, and `surreal launch --resume` continues it)."""
    from symphony import Process, Resources

    threads = p.config.run.torch_threads
    return Process(
        "learner",
        command,
        env=dict(PROCESS_ENV, OMP_NUM_THREADS=str(threads)),
        resources=Resources(cpu=max(1, threads)),
    )


def add_evaluator(exp: Any, p: LaunchPlan) -> None:
    """Add the runtime's evaluator (reads params, reports eval returns) unless `eval.every_s` is 0."""
    from symphony import Process

    if p.config.eval.every_s > 0:
        exp.add(
            Process(
                "evaluator",
                _command(p.run_dir, "evaluator"),
                env=dict(PROCESS_ENV),
                restart=restart_policy(),
            ).connects("params", "metrics")
        )


def build_experiment(p: LaunchPlan) -> Any:
    """The symphony Experiment: metrics, buffer, learner, parameter server, evaluator, actors.

    A learner class may define `build_experiment(plan)` to wire a different topology (ES).
    """
    from symphony import Process, ProcessGroup

    custom = getattr(p.algo_class, "build_experiment", None)
    if custom is not None:
        return custom(p)
    again = restart_policy()

    def proc(role: str, index: int = 0, name: str | None = None, **kw: Any) -> Process:
        return Process(name or role, _command(p.run_dir, role, index), env=dict(PROCESS_ENV), **kw)

    exp = new_experiment(p)
    exp.add(proc("buffer", restart=again).binds("experience", "batches").connects("metrics"))
    exp.add(
        learner_process(p, _command(p.run_dir, "learner"))
        .binds("params-pub")
        .connects("batches", "metrics")
    )
    exp.add(proc("param-server", restart=again).binds("params").connects("params-pub", "metrics"))
    add_evaluator(exp, p)
    size = p.config.actor.group_size
    for g, start in enumerate(range(0, p.config.run.actors, size)):
        group = ProcessGroup(f"actors-{g}")
        for i in range(start, min(start + size, p.config.run.actors)):
            group.add(
                proc("actor", i, name=f"actor-{i}", restart=again).connects(
                    "params", "experience", "metrics"
                )
            )
        exp.add(group)
    return exp.validate()


def create_run(p: LaunchPlan) -> None:
    """Write the run folder (config, run record, experiment spec) before launching."""
    if p.resume:
        config_io.save(p.config, p.run_dir.config_file)
    else:
        p.run_dir.create(
            p.config,
            {"algo": p.algo_ref, "env_info": p.env_info.to_dict(), "experiment": p.experiment_name},
        )
    (p.run_dir.path / "experiment.yaml").write_text(build_experiment(p).to_yaml())
