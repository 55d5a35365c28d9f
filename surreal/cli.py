"""The `surreal` command line: launch, eval, status, export, plot."""

from __future__ import annotations

import atexit
import json
import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click

import symphony
from cloudwise.clistyle import CONTEXT_SETTINGS, InputError, StyledGroup
from surreal.algos import families
from surreal.api import config as config_io
from surreal.api.config import EnvConfig, RunConfig
from surreal.api.registry import config_class
from surreal.launch import cluster_launch, config_check
from surreal.launch import experiment as launching
from surreal.launch.commands import export_command, plot_command
from surreal.launch.evaluate import evaluate_run, run_status
from surreal.launch.progress import format_status, monitor
from surreal.launch.stopping import raise_interrupt, stop_and_keep_logs
from surreal.pbt import build_experiment, run_population
from surreal.pbt.config import split_overrides, to_dict
from surreal.pbt.run import prepare_population
from surreal.pbt.status import population_status
from surreal.pbt.store import is_population
from surreal.runtime.processes.component import run_component
from surreal.runtime.runfolder.rundir import read_json, resolve_run
from surreal.runtime.runfolder.storage_sync import LaunchSync
from symphony.backends import backend_names, get_backend
from symphony.errors import ExperimentNotFound
from symphony.launcher import ExperimentHandle
from symphony.records import ACTIVE_STATUSES, Records

_UserError = (
    InputError  # a problem with the input: `Error: ...` on one line, exit 2, nothing started
)


_EXTRAS = {
    "torch": "rl",
    "gymnasium": "rl",
    "tensorboardX": "rl",
    "robosuite": "robosuite",
    "mujoco": "rl",
}


def _missing_extra(err: ModuleNotFoundError) -> Exception:
    """A clear error when training needs a package of an extra that is not installed."""
    top = (err.name or "").split(".")[0]
    if top not in _EXTRAS:
        return err
    extra = _EXTRAS[top]
    first = "pip install torch==2.13.0 (or your CUDA build), then " if top == "torch" else ""
    return _UserError(
        f"{top} is not installed; training needs the [{extra}] extra: "
        f"{first}pip install 'surreal-stack[{extra}]'"
    )


@click.group(cls=StyledGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="surreal-stack")
def main() -> None:
    """surreal: distributed reinforcement learning (PPO, DDPG, ES).

    `surreal launch ppo --env gym:CartPole-v1 --actors 4` starts actors, a replay buffer, a
    learner and a parameter server as separate processes on one machine or a cluster.
    """


@main.command()
@click.argument("algo", required=False)
@click.option(
    "--env",
    "env_id",
    show_default="none, required; with --resume, the run's",
    help="Environment (required for a new run), e.g. gym:CartPole-v1, gym:HalfCheetah-v5, "
    "robosuite:Lift; multi-agent (with mappo): pettingzoo:mpe.simple_spread_v3, ma:nim.",
)
@click.option(
    "--actors",
    type=int,
    show_default=f"{RunConfig.actors}; with --resume, the run's",
    help=f"Actor processes (each steps env.num_envs = {EnvConfig.num_envs} environments). "
    "With actor.inference=remote they only step environments and run.policy_workers=N "
    "policy workers run the policy for them, batched, on actor.inference_device=cpu|cuda "
    "(docs/policy_workers.md).",
)
@click.option(
    "--backend",
    default="local",
    metavar="NAME",
    help=f"symphony backend: {', '.join(backend_names(internal=False))}.",
)
@click.option(
    "--steps",
    type=int,
    show_default=f"{RunConfig.steps}; ppo on classic control: 200000; with --resume, the run's",
    help="Environment steps the learner consumes before it stops.",
)
@click.option(
    "--folder",
    default="runs",
    help="Where runs are written: a path, or s3://BUCKET/PREFIX (endpoint and credentials "
    "from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...).",
)
@click.option("--name", show_default="ALGO-ENV", help="Experiment name.")
@click.option("--trial", show_default="t1, t2, ...", help="Trial name inside the experiment.")
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override a config field, e.g. --set algo.lr=3e-4 (repeatable).",
)
@click.option(
    "--resume",
    type=click.Path(),
    metavar="RUN_DIR",
    help="Continue the run in RUN_DIR from its checkpoint.",
)
@click.option(
    "--image",
    help="Container image of every process on compose and kube (config: run.image); "
    "`symphony build cpu -c docker/build.yaml` makes one.",
)
@click.option(
    "--option",
    "-o",
    "backend_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="symphony backend option, as `symphony launch -o` (e.g. -o namespace=me); "
    "a bare -o DIR with --dry-run writes the kube manifests there.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the config and what the backend would start (kube: the manifests, also "
    "into -o DIR); start nothing, write nothing else.",
)
@click.option(
    "--quiet",
    is_flag=True,
    help="Plain progress lines, at most one per 30 s, instead of the live panel on a terminal.",
)
@click.option(
    "--population",
    type=int,
    metavar="N",
    callback=lambda _ctx, _param, n: _population_size(n),
    help="Population-based training: N members of ALGO (each its own learner, buffer and "
    "--actors actors) and a population-manager that copies the best into the worst with "
    "perturbed algo.* settings every pbt.interval steps (--set pbt.*; docs/pbt.md).",
)
def launch(**args: Any) -> None:
    """Train ALGO (ppo, ppo-vision, ddpg, td3, sac, dqn, es, mappo, or path/to/file.py:MyLearner) with
    actors, a buffer, a learner, a parameter server, an evaluator and a metrics sink, each its
    own process.

    Before anything starts, the algorithm runs once on synthetic data in this process (the
    launch check); a failure is reported with its file:line and nothing is written.

    Writes FOLDER/EXPERIMENT/TRIAL (config.json, metrics.jsonl, TensorBoard events, checkpoints)
    and shows progress until the step budget is used (a live panel on a terminal, plain lines
    otherwise); Ctrl-C stops every process (a checkpoint
    is written first).
    """
    _quiet_third_party()
    try:
        plan, population_plan = _plan_and_check(args)
        if args["dry_run"]:
            _print_dry_run(plan, population_plan, args)
        elif population_plan is not None:
            sys.exit(_run_population(population_plan, args["backend"]))
        else:
            _start(plan, args)
    except KeyboardInterrupt:  # Ctrl-C before the run started (after: `_run` stops it)
        click.echo("interrupted: the run was not started (nothing runs)", err=True)
        sys.exit(130)


NO_ENV = (
    "name the environment: --env, e.g. `surreal launch {algo} --env gym:CartPole-v1`, "
    "`--env gym:HalfCheetah-v5`, `--env robosuite:Lift`, `--env pettingzoo:mpe.simple_spread_v3` "
    "(with mappo); or --resume RUN_DIR"
)
"""`surreal launch ALGO` without --env (a usage error: no environment is assumed)."""


def _require_env(args: dict[str, Any], overrides: list[str]) -> None:
    """A new run names its environment (--env, or --set env.id=...); an unknown ALGO is said
    first (`config_class` raises LookupError)."""
    if not args["algo"] or args["resume"] or args["env_id"]:
        return
    if not any(o.split("=", 1)[0].strip() == "env.id" for o in overrides):
        config_class(args["algo"])
        raise _UserError(NO_ENV.format(algo=args["algo"]))


_PLAN_ARGS = ("actors", "steps", "folder", "name", "trial", "resume", "backend", "dry_run")
"""The arguments of `surreal launch` that `surreal.launch.experiment.plan` takes by the same name."""


def _plan_and_check(args: dict[str, Any]) -> tuple[Any, Any]:
    """The launch plan of `surreal launch`'s arguments (and its population's, with
    --population or a population's --resume), after the launch check; a bad input raises the
    one-line usage error."""
    pbt_overrides, overrides = split_overrides(args["overrides"])
    resume, population = args["resume"], args["population"]
    populated = bool(population) or bool(resume and is_population(Path(resume)))
    if pbt_overrides and not populated:
        raise _UserError(f"{pbt_overrides[0]}: pbt.* settings need --population N")
    try:
        _require_env(args, overrides)
        given = {key: args[key] for key in _PLAN_ARGS}
        plan = launching.plan(args["algo"], env=args["env_id"], overrides=overrides, **given)
        plan.backend = args[
            "backend"
        ]  # e.g. Curve keys on multi-node backends (surreal.runtime.wire.curve)
        plan.command_line = shlex.join(["surreal", *sys.argv[1:]])  # run.json, model cards
        plan.config.run.image = args["image"] or plan.config.run.image
        launching.preflight(plan)  # the algorithm's code on synthetic data, before anything starts
        if not populated:
            return plan, None
        return plan, prepare_population(plan, population, pbt_overrides, args["steps"], overrides)
    except (LookupError, ValueError, FileExistsError, FileNotFoundError) as err:
        raise _UserError(str(err)) from err
    except ModuleNotFoundError as err:
        raise _missing_extra(err) from err


def _print_dry_run(plan: Any, population_plan: Any, args: dict[str, Any]) -> None:
    """What --dry-run prints: the run folder, the family defaults, the config, then what the
    backend would start (a population: its settings and experiment)."""
    if population_plan is not None:
        pbt = json.dumps({"pbt": to_dict(population_plan.pbt)}, indent=2)
        text = f"{pbt}\n{build_experiment(population_plan).to_yaml()}"
    else:
        try:
            opts = cluster_launch.options(plan, args["backend"], args["backend_pairs"])
            text = cluster_launch.dry_run(plan, args["backend"], opts)
        except (symphony.SymphonyError, FileExistsError) as err:
            raise _UserError(str(err)) from err
    click.echo(_dry_run_folder_line(plan, args["trial"]))
    click.echo(f"# {_family_line(plan)}")
    click.echo(json.dumps(config_io.to_dict(plan.config), indent=2, sort_keys=True))
    click.echo(f"# {launching.device_line(plan)}")
    click.echo(text)


def _start(plan: Any, args: dict[str, Any]) -> None:
    """Start the run: detached on the backends that run it without this command (kube,
    slurm: prints how to follow it), else watched here until it ends (exits with its code)."""
    backend = args["backend"]
    try:
        opts = cluster_launch.options(plan, backend, args["backend_pairs"])
        if cluster_launch.detached(backend):
            click.echo(cluster_launch.launch_detached(plan, backend, opts))
            return
    except (symphony.SymphonyError, FileExistsError) as err:
        raise _UserError(str(err)) from err
    user = families.user_keys(args["steps"], args["actors"], args["overrides"])
    sys.exit(_run(plan, backend, args["quiet"], opts, user))


def _population_size(n: int | None) -> int | None:
    if n is not None and n < 2:
        raise click.BadParameter(f"needs N >= 2 members, got {n} (omit it for a single run)")
    return n


def _run_population(population_plan, backend: str) -> int:
    try:
        config_check.check_backend(backend)  # before the run folder is written
    except ValueError as err:
        raise _UserError(str(err)) from err
    try:
        return run_population(population_plan, backend)
    except symphony.SymphonyError as err:
        raise _UserError(str(err)) from err


def _dry_run_folder_line(plan, trial: str | None) -> str:
    """`# run folder: WHERE (not created: --dry-run)`; for an object store also that it was
    not contacted (so a new run's trial, unless --trial named it, is only assumed free)."""
    where = plan.run_dir.where
    if not plan.run_dir.url or plan.resume:
        return f"# run folder: {where} (not created: --dry-run)"
    guess = "" if trial else "; the launch takes the first free trial"
    return f"# run folder: {where} (not created, the object store not contacted: --dry-run{guess})"


def _family_line(plan, user: set[str] = frozenset(), width: int | None = None) -> str:
    """`task family: classic (algo.norm_obs=False, ...)`: the defaults `surreal launch` chose,
    less those the user set (`user`: dotted keys), wrapped at `width` columns (None: one line)."""
    return families.summary(plan.config, user=user, width=width)


def _create_run(plan: Any, backend: str) -> Any:
    """Write the run folder (after the backend's check); the started LaunchSync that uploads
    a run in an object store and follows its status."""
    try:
        config_check.check_backend(backend)  # before the run folder is written
    except ValueError as err:
        raise _UserError(str(err)) from err
    try:
        launching.create_run(plan)
    except FileExistsError as err:  # the run is running: nothing was written
        raise _UserError(str(err)) from err
    sync = LaunchSync(plan.run_dir)  # a run in an object store: upload, follow its status
    try:
        sync.start()
    except ValueError as err:
        raise _UserError(str(err)) from err
    return sync


def _run(plan, backend: str, quiet: bool, opts: dict, user: set[str] = frozenset()) -> int:
    """Create the run, launch it, watch it until it ends or Ctrl-C; its exit code."""
    sync = _create_run(plan, backend)
    out = sys.stdout
    click.echo(
        f"run folder: {plan.run_dir.where}  (experiment {plan.experiment_name}, "
        f"{plan.config.run.actors} actors x {plan.config.env.num_envs} envs, backend {backend})"
    )
    if not plan.resume:
        click.echo(_family_line(plan, user, width=100))
    click.echo(launching.device_line(plan))
    started = time.monotonic()
    signal.signal(signal.SIGTERM, raise_interrupt)  # `kill` and `timeout` stop the run like Ctrl-C
    try:  # interrupted while it starts: symphony stops what it started (`launch` says so)
        handle = symphony.launch(
            launching.build_experiment(plan), backend, note=_resume_note(plan), **opts
        )
    except symphony.SymphonyError as err:
        raise _UserError(str(err)) from err
    code, summarized = 130, False

    def summary() -> None:
        status = read_json(plan.run_dir.status_file, {}) or {}
        click.echo(format_status(status, time.monotonic() - started, plan.config.run.steps))

    try:
        code = monitor(
            handle,
            plan.run_dir,
            plan.config.run.stop_at_return,
            out=out,
            total=plan.config.run.steps,
            every_s=30.0 if quiet else 2.0,
            live=False if quiet else None,
        )
        summary()  # at once: the run has ended; stopping the other processes follows
        summarized = True
        click.echo("stopping the other processes...")
    except KeyboardInterrupt:
        click.echo("interrupted: stopping every process (the learner writes a checkpoint)")
    finally:
        _ignore_interrupts()  # stopping is bounded (the backend's grace period): let it end
        stop_and_keep_logs(handle, plan.run_dir.path / "logs", code)
        sync.close()  # the logs and the last status
        if not summarized:  # interrupted: the learner's last checkpoint is in the status now
            summary()
        click.echo(
            f"done: {plan.run_dir.where} (surreal eval {plan.run_dir.where}; "
            f"surreal plot {plan.run_dir.where} -o curves.png; "
            f"tensorboard --logdir {plan.run_dir.shown('tb')})"
        )
    return code


def _resume_note(plan) -> str | None:
    """The line that opens a resumed launch's lines in every process's log, below the earlier
    launches' (symphony's record keeps them: `symphony.records.Records.retire`)."""
    if not plan.resume:
        return None
    return f"--- resumed at step {plan.resumed_step or 0:,} ---"


def _ignore_interrupts() -> None:
    """Ctrl-C (and SIGTERM) again while the run stops: ignored, not a traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@main.command("eval")
@click.argument("run_dir", type=click.Path())
@click.option("--episodes", default=10, show_default=True, help="Greedy episodes to run.")
@click.option("--video", type=click.Path(), help="Also record the first episode to this .mp4/.gif.")
def eval_command(run_dir: str, episodes: int, video: str | None) -> None:
    """Load RUN_DIR's checkpoint and report the mean greedy return over --episodes episodes."""
    _quiet_third_party()
    if video:
        _private_runtime_dir()
    try:  # evaluate_run checks --video (check_video) before the run is read
        result = evaluate_run(run_dir, episodes, video)
    except (FileNotFoundError, LookupError, ValueError) as err:
        raise _UserError(str(err)) from err
    click.echo(
        f"{result['episodes']} episodes at step {result['step']:,}: "
        f"return {result['mean']:.1f} +- {result['std']:.1f} "
        f"(min {result['min']:.1f}, max {result['max']:.1f})"
    )
    if video:
        click.echo(f"video: {video}")


def _quiet_third_party() -> None:
    """Keep robosuite's import-time chatter (macro-file and optional-model warnings) off this
    terminal; the component processes still write it to their logs (RUN_DIR/logs/*.log)."""
    logging.getLogger("robosuite_logs").disabled = True


def _private_runtime_dir() -> None:
    """Give the renderer (SDL, for gymnasium's frames) the XDG_RUNTIME_DIR it wants.

    Without one it prints "error: XDG_RUNTIME_DIR is invalid or not set" although recording
    works; a private temporary folder (mode 0700, removed at exit) keeps that noise away.
    """
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current) and os.access(current, os.W_OK):
        return
    folder = tempfile.mkdtemp(prefix="surreal-xdg-")  # created with mode 0700
    os.environ["XDG_RUNTIME_DIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


@main.command()
@click.argument("run_dir", type=click.Path())
@click.option(
    "-f",
    "--follow",
    is_flag=True,
    help="Then show its progress until the run ends, as `surreal launch` does (e.g. after "
    "the launch's terminal was closed: the run goes on without it). Ctrl-C stops following, "
    "not the run. Exit code: 0 the run finished, 1 it failed.",
)
def status(run_dir: str, follow: bool) -> None:
    """Show RUN_DIR's progress (steps, returns, checkpoint) and whether its processes are alive."""
    if follow and "://" in run_dir:
        raise _UserError("--follow watches a run on this machine: pass its local run folder")
    try:
        populated = "://" not in run_dir and is_population(Path(run_dir))
        click.echo(population_status(Path(run_dir)) if populated else run_status(run_dir))
    except (FileNotFoundError, LookupError, ValueError) as err:
        raise _UserError(str(err)) from err
    if follow and not populated:
        sys.exit(_follow(Path(run_dir)))


def _follow(path: Path) -> int:
    """`surreal status -f`: the launcher's progress display on a running local or cluster run."""
    run = resolve_run(path)
    try:
        record = Records().load(str(run.info().get("experiment")))
    except ExperimentNotFound:  # no record here: nothing of it runs on this machine's backends
        click.echo("not running: nothing to follow")
        return 0
    handle = ExperimentHandle(get_backend(record.backend), record)
    shown = handle.status().status  # the outcome once it ended
    if shown not in ACTIVE_STATUSES:
        click.echo(f"not running ({shown}): nothing to follow")
        return 0 if shown == "finished" else 1
    try:
        code = monitor(handle, run, out=sys.stdout, total=run.load_config().run.steps)
    except KeyboardInterrupt:
        click.echo(f"stopped following; the run goes on (surreal status -f {path})")
        return 130
    click.echo(f"the run ended: {'finished' if code == 0 else 'failed'}")
    return code


main.add_command(export_command)
main.add_command(plot_command)


@main.command(hidden=True)
@click.argument("role")
@click.argument("run_dir")
@click.option("--index", default=0, type=int, help="Which one of its role (actor-3: 3).")
def component(role: str, run_dir: str, index: int) -> None:
    """Run one component process (started by `surreal launch`)."""
    run_component(role, run_dir, index)
