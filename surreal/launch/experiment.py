"""From a config to a symphony Experiment: one process per component, wired by named services."""

from __future__ import annotations

import dataclasses
import fcntl
import shutil
import sys
from pathlib import Path
from typing import Any

from surreal import monitoring
from surreal.algos.families import apply_family_defaults
from surreal.api import config as config_io
from surreal.api.config import Config, ConfigError
from surreal.api.core import Learner, check_settings
from surreal.api.device import auto_device, check_device, preference
from surreal.api.recipe import RUNTIME_COMPONENTS, recipe_of, reference
from surreal.api.registry import config_class, resolve
from surreal.envs import check_env, env_info
from surreal.launch import config_check
from surreal.launch.preflight import check_algorithm
from surreal.launch.resume_check import fits_checkpoint
from surreal.runtime.plan import compose_env, portable, preload
from surreal.runtime.plan.policy_topology import check_inference, check_remote_actors
from surreal.runtime.plan.topology import LaunchPlan, algorithm_experiment
from surreal.runtime.runfolder import checkpoint, storage_sync
from surreal.runtime.runfolder.rundir import (
    RunDir,
    check_writable,
    new_remote_run_dir,
    resume_run_dir,
    slug,
    write_json,
)
from surreal.runtime.runfolder.storage_sync import prepare_launch_mirror
from surreal.runtime.wire import curve, goal, report_token
from symphony.backends import capabilities, get_backend
from symphony.errors import ExperimentNotFound, SymphonyError
from symphony.launcher import free_name
from symphony.records import Records
from symphony.states import ALIVE_STATES

__all__ = ["LaunchPlan", "build_experiment", "create_run", "plan", "preflight"]


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
    backend: str = "local",
    dry_run: bool = False,
) -> LaunchPlan:
    """Resolve the algorithm, build and check the config and the environment, pick the run folder.

    `dry_run`: a new run in an object store is planned without contacting the store (its
    trial, unless given, is shown as t1); a local folder is still checked for writing.

    Raises:
        UnknownAlgorithm, UnknownEnvironment, ConfigError, FileExistsError, FileNotFoundError:
            with a message that says what to do; nothing has started.
    """
    config_check.check_backend(backend)  # a misspelt --backend: before torch is imported
    offline = dry_run and not resume  # a dry run of a new run contacts no object store
    # an object store that does not answer: now (a dry run checks only the URL's form)
    storage_sync.check_folder(resume or folder, contact=not offline)
    if not resume and not storage_sync.is_remote(folder):
        check_writable(folder)  # /proc, a file as parent, a read-only mount: before torch
    if resume:
        run_dir, algo_ref, algo_class, config, resumed_step = _resumed(resume, algo)
    else:
        if not algo:
            raise ConfigError(
                "name an algorithm (e.g. `surreal launch ppo`) or pass --resume RUN_DIR"
            )
        algo_class = None  # resolved (torch imported) once the settings are checked
        algo_ref = _absolute_ref(algo)
        config, resumed_step = Config(algo=config_class(algo)()), None
    _settle(config, env, actors, steps, overrides, family=not resume)
    algo_class = algo_class or resolve(algo)
    info = _check_run(config, algo_class, backend)
    experiment = slug(
        name or f"{Path(algo_ref.split(':')[-1]).stem}-{config.env.id.split(':')[-1]}"
    )
    if not resume:
        run_dir = _new_run_dir(folder, experiment, trial, offline)
    exp_name = slug(f"{run_dir.path.parent.name}-{run_dir.path.name}")[:63].strip("-")
    return LaunchPlan(
        config,
        algo_ref,
        algo_class,
        info,
        run_dir,
        exp_name,
        bool(resume),
        backend,
        resumed_step=resumed_step,
    )


def _resumed(resume: str, algo: str | None) -> tuple[RunDir, str, type[Learner], Config, int]:
    """--resume RUN_DIR: the run folder, its algorithm (reference and class), its config and
    the step of the checkpoint it continues from."""
    run_dir = resume_run_dir(resume)
    if not run_dir.exists():
        raise FileNotFoundError(f"--resume {resume}: not a run folder (no config.json/run.json)")
    if not run_dir.url:
        check_writable(run_dir.path, "--resume")
    algo_ref = run_dir.info()["algo"]
    if algo and _absolute_ref(algo) != algo_ref and resolve(algo) is not resolve(algo_ref):
        raise ConfigError(f"--resume {resume} trains {algo_ref!r}, not {algo!r}; drop ALGO")
    algo_class = run_dir.algo_class()  # a file learner: the run's own copy
    config = run_dir.load_config()
    step = _check_checkpoint(run_dir.checkpoint)
    return run_dir, algo_ref, algo_class, config, step


def _settle(
    config: Config,
    env: str | None,
    actors: int | None,
    steps: int | None,
    overrides: tuple[str, ...],
    family: bool,
) -> None:
    """The command line's settings into `config` (after the task family's defaults for a new
    run: the user's still win), then its values checked, before torch is imported."""
    if env is not None:
        config.env.id = env
    if family:  # settings per task family and preset (surreal.algos.families)
        # run.preset and run.device choose the preset: the user's before the family's defaults
        chosen = [
            o for o in overrides if o.split("=", 1)[0].strip() in ("run.preset", "run.device")
        ]
        config_io.apply_overrides(config, chosen)
        apply_family_defaults(config)
    if actors is not None:
        config.run.actors = actors
    if steps is not None:
        config.run.steps = steps
    config_io.apply_overrides(config, list(overrides))
    config_check.check_values(config)  # NaN/inf and ranges: before torch is imported


def _check_run(config: Config, algo_class: type[Learner], backend: str) -> Any:
    """Check the config against the environment and the algorithm; the environment's EnvInfo."""
    _check(config, gpus_here=not capabilities(backend).runs_in_image)
    check_env(config.env.id)
    info = env_info(config.env.id, config.env)
    check_settings(algo_class, config.algo, info)  # e.g. a network that cannot read these obs
    config_check.check_fits(config, algo_class, info)  # the algorithm vs the action space
    _check_replicas(config, algo_class)
    check_inference(config, algo_class)  # actor.inference, run.policy_workers
    recipe_of(algo_class).check_run(config)  # the whole run config, e.g. mappo: agents vs policies
    return info


def _new_run_dir(folder: str, experiment: str, trial: str | None, offline: bool) -> RunDir:
    """A new run's folder: FOLDER/EXPERIMENT/TRIAL (the next free trial unless named)."""
    if storage_sync.is_remote(folder):
        return new_remote_run_dir(folder, experiment, trial, offline=offline)
    base = Path(folder) / experiment
    run_dir = RunDir(base / (trial or _next_trial(base)))
    if run_dir.path.exists():
        raise FileExistsError(
            f"{run_dir.path} exists; pick another --trial or continue it with "
            f"--resume {run_dir.path}"
        )
    check_writable(run_dir.path)  # e.g. FOLDER/EXPERIMENT is a file
    return run_dir


def _check_checkpoint(path: Path) -> int:
    """--resume: the checkpoint verified now (`checkpoint.load`: whole, finite, its checksum);
    a bad one falls back to `previous.pt` with one line on stderr (the learner does the same
    when it loads), and with neither usable the launch is refused in one line naming both.
    Returns the step the run continues from (0 without a checkpoint)."""
    if not path.is_file():
        return 0
    state = checkpoint.load(path, note=lambda line: print(f"warning: {line}", file=sys.stderr))
    return int(state["counters"]["global_step"])


def _absolute_ref(ref: str) -> str:
    if ".py:" not in ref and not ref.endswith(".py"):
        return ref
    path, _, cls = ref.partition(":")
    return f"{Path(path).resolve()}:{cls}"


def _next_trial(base: Path) -> str:
    i = 1
    while (base / f"t{i}").exists():
        i += 1
    return f"t{i}"


def _check(config: Config, gpus_here: bool = True) -> None:
    """The devices and the monitoring the run asks for (`gpus_here`: the learner runs on this
    machine, so `run.device` must name a GPU it has; on compose and kube only its spelling
    counts). Ranges were checked with the values (`config_check.check_values`)."""
    # a GPU asked for but not there: a usage error, here (the cluster's GPUs: only the spelling)
    check_device(config.run.device, cuda_count=None if gpus_here else 1 << 16)
    # policy workers' device: spelled right always; there, when they run on this machine
    remote = config.actor.inference == "remote"
    check_device(
        config.actor.inference_device,
        cuda_count=None if gpus_here and remote else 1 << 16,
        name="actor.inference_device",
    )

    monitoring.check(config)  # run.wandb without wandb installed: a usage error, here


def device_line(p: LaunchPlan) -> str:
    """The launch summary's `learner device: cpu (run.device=auto: why)`: where the learner
    will compute (`surreal.api.device.auto_device` for auto)."""
    spec = p.config.run.device.strip().lower()
    if spec != "auto":
        return f"learner device: {spec} (run.device={spec})"
    if portable.applies(p):  # the pod gets a GPU only when run.device names one
        return f"learner device: cpu (run.device=auto on {p.backend}: --set run.device=cuda asks for a GPU)"
    device, why = auto_device(*preference(p.config))
    return f"learner device: {device} (run.device=auto: {why})"


def _check_replicas(config: Config, algo_class: type) -> None:
    """`run.learner_replicas` above 1 (its range is the field's): only with the runtime's learner
    loop and a batch that splits evenly between the replicas."""
    n = config.run.learner_replicas
    if n == 1:
        return
    if recipe_of(algo_class).components().get("learner") != RUNTIME_COMPONENTS["learner"]:
        raise ConfigError(
            f"run.learner_replicas={n}: {algo_class.__name__} has its own learner process; "
            "replicas work with the runtime's learner loop (ppo, ppo-vision, your Learner)"
        )
    per_batch = recipe_of(algo_class).per_batch(config)
    if per_batch % n:
        raise ConfigError(
            f"run.learner_replicas={n} must divide the {per_batch} segments per batch "
            "(algo.batch_size / (actor.rollout_length x env.num_envs), or --actors for a batch of one segment per actor)"
        )


def preflight(p: LaunchPlan) -> None:
    """Run the algorithm once on synthetic data here, before anything starts
    (`surreal.launch.preflight.check_algorithm`); raises PreflightError (a ValueError) saying where."""
    config = p.config
    if portable.applies(p):  # the learner's device is the cluster's: check on the CPU
        config = dataclasses.replace(config, run=dataclasses.replace(config.run, device="cpu"))
    check_algorithm(p.algo_class, config, p.env_info, fits_checkpoint(p))
    check_remote_actors(p, algorithm_experiment)  # remote inference: actors that ask for it


def build_experiment(p: LaunchPlan) -> Any:
    """The symphony Experiment of the plan: the algorithm's `Learner.build_experiment(plan)`
    (the standard topology when it returns None: `surreal.runtime.plan.topology.algorithm_experiment`),
    with the run's Curve keys on every process when `surreal.runtime.wire.curve.enabled(plan)`, and on
    compose and kube commands that run in the image (`surreal.runtime.plan.portable`). The learner's end
    is the run's end (`Experiment.ends_with`): a run whose launcher died still stops there, at
    its budget or at `run.stop_at_return` (the evaluator tells the learner: `surreal.runtime.wire.goal`)."""
    wired = goal.wire(algorithm_experiment(p), p.config).validate()  # run.stop_at_return
    exp = preload.apply(portable.apply(curve.apply(wired, p), p), p)
    report_token.apply(exp, p)  # local runs: only the run's processes report (their token)
    if "learner" in exp.process_names():
        exp.ends_with = ["learner"]
    return exp


def _process_facts(p: LaunchPlan) -> dict[str, Any]:
    """What the run's processes read from `run.json` instead of importing the learner (and
    torch): their entry points (`RunDir.components`) and the recipe ("module:Class", None for
    one made around a learner's own hooks: `surreal.runtime.processes.replay.make_replay`)."""
    feeding = recipe_of(p.algo_class)
    return {"components": feeding.components(), "recipe": reference(feeding)}


def create_run(p: LaunchPlan) -> None:
    """Write the run folder (config, run record, experiment spec) before launching; the plan's
    `command_line` is appended to the run record's `commands` (a model card shows them).

    Raises:
        FileExistsError: the run is running (another launch holds its lock, or its processes
            live on after their launcher); nothing was written.
    """
    p.experiment_name = _free_experiment_name(p)
    _refuse_if_running(p)
    if not p.run_dir.url:
        _hold_lock(p.run_dir.path, create=not p.resume)
    if p.resume:
        config_io.save(p.config, p.run_dir.config_file)
        p.run_dir.ending_file.unlink(missing_ok=True)  # how the earlier launch ended
        before = p.run_dir.info()
        kept = {k: v for k, v in before.items() if k != "cost"}  # a kube launch records it anew
        info = {**kept, "experiment": p.experiment_name, **_process_facts(p)}
        info["commands"] = kept.get("commands", []) + [p.command_line] * bool(p.command_line)
        if info != before:
            write_json(p.run_dir.run_file, info)
    else:
        if p.run_dir.url:  # a run in an object store: written here, uploaded by surreal launch
            prepare_launch_mirror(p.run_dir.url, resume=False)
        info = {
            "algo": p.algo_ref,
            "env_info": p.env_info.to_dict(),
            "experiment": p.experiment_name,
            **_process_facts(p),
            "commands": [p.command_line] * bool(p.command_line),
        }
        _copy_algo_files(p)
        p.run_dir.create(p.config, info)
        copy = p.run_dir.copy_algo_file(p.algo_ref)
        if copy:  # every process, `surreal eval` and `--resume` load the learner from the copy
            write_json(p.run_dir.run_file, {**p.run_dir.info(), "algo_copy": copy})

    curve.prepare(p)  # RUN/keys/ (mode 600) when the run's traffic uses Curve
    report_token.prepare(p)  # else, on this machine: RUN/keys/metrics.token (mode 600)

    compose_env.prepare(p)  # compose: RUN/keys/compose.env for the containers (mode 600)

    monitoring.prepare(p.run_dir.path)  # restart counts and /metrics targets start afresh
    (p.run_dir.path / "experiment.yaml").write_text(build_experiment(p).to_yaml())


LOCK_FILE = ".launch.lock"
"""In the run folder: held (flock) by the launch that writes and runs it; the kernel lets go
of it when that process ends, however it ends."""
_HELD: list[Any] = []  # the lock files this process holds, open until it exits


def _hold_lock(folder: Path, create: bool) -> None:
    """Take the run folder's lock (making the folder of a new run), or raise FileExistsError."""
    try:
        folder.mkdir(parents=True, exist_ok=not create)
    except FileExistsError:
        raise FileExistsError(
            f"{folder} was just created by another launch; pick another --trial"
        ) from None
    lock = open(folder / LOCK_FILE, "a")  # noqa: SIM115 - held until this process exits
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise FileExistsError(
            f"{folder} is being launched or run by another `surreal launch`; follow it with "
            f"`surreal status -f {folder}`, or stop it before launching it again"
        ) from None
    _HELD.append(lock)


def _refuse_if_running(p: LaunchPlan) -> None:
    """--resume of a run whose processes still run (e.g. after its launcher died) is refused
    before anything in its folder is rewritten."""
    if not p.resume:
        return

    try:
        record = Records().load(p.experiment_name)
        here = {p.run_dir.location, str(p.run_dir.path.resolve())}
        if record.spec.get("metadata", {}).get("run_dir") not in here:
            return
        processes = get_backend(record.backend).describe(record).processes
    except (ExperimentNotFound, SymphonyError, OSError):
        return
    alive = [q.name for q in processes if q.state in ALIVE_STATES]
    if alive:
        raise FileExistsError(
            f"--resume {p.run_dir.where}: the run is still running ({len(alive)} processes of "
            f"experiment {record.name}); follow it with `surreal status -f {p.run_dir.where}` "
            f"or stop it (`symphony delete {record.name}`) before resuming it"
        )


def _free_experiment_name(p: LaunchPlan) -> str:
    """The symphony name this launch runs under: the run's own (a resumed run: the one it had),
    taking over the record of its own ended launch; another experiment's name gets `-2`, ...
    (symphony keeps ended runs' records: `symphony.launcher.free_name`)."""
    name = (p.run_dir.info().get("experiment") if p.resume else None) or p.experiment_name
    here = {p.run_dir.location, str(p.run_dir.path.resolve())}
    try:
        return free_name(name, lambda r: r.spec.get("metadata", {}).get("run_dir") in here)
    except SymphonyError:  # e.g. a broken symphony config file: the launch itself says so
        return name


def _copy_algo_files(p: LaunchPlan) -> None:
    """Copy the files that `algo.*` settings name (`path/file.py:Class`, e.g. PPO's `algo.model`)
    into the run's `code/` and point the saved config at the copies, so the run keeps working
    after the originals change."""
    for f in dataclasses.fields(p.config.algo):
        value = getattr(p.config.algo, f.name)
        path, sep, cls = value.rpartition(":") if isinstance(value, str) else ("", "", "")
        if sep and path.endswith(".py") and Path(path).is_file():
            target = p.run_dir.path.resolve() / "code" / Path(path).name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
            setattr(p.config.algo, f.name, f"{target}:{cls}")
