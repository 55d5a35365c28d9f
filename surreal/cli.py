"""The `surreal` command line: launch, eval, status."""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path

import click

from cloudwise.clistyle import CONTEXT_SETTINGS, InputError, StyledGroup
from surreal.config import EnvConfig, RunConfig

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
    show_default=f"{EnvConfig.id}; with --resume, the run's",
    help="Environment, e.g. gym:CartPole-v1, gym:HalfCheetah-v5, robosuite:Lift.",
)
@click.option(
    "--actors",
    type=int,
    show_default=f"{RunConfig.actors}; with --resume, the run's",
    help=f"Actor processes (each steps env.num_envs = {EnvConfig.num_envs} environments).",
)
@click.option(
    "--backend",
    default="local",
    metavar="NAME",
    help="symphony backend: local, tmux, compose, kube, slurm.",
)
@click.option(
    "--steps",
    type=int,
    show_default=f"{RunConfig.steps}; with --resume, the run's",
    help="Environment steps the learner consumes before it stops.",
)
@click.option("--folder", default="runs", help="Where runs are written.")
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
    "--dry-run",
    is_flag=True,
    help="Print the config and the processes; start nothing, write nothing.",
)
@click.option(
    "--quiet",
    is_flag=True,
    help="Plain progress lines, at most one per 30 s, instead of the live panel on a terminal.",
)
def launch(
    algo, env_id, actors, backend, steps, folder, name, trial, overrides, resume, dry_run, quiet
) -> None:
    """Train ALGO (ppo, ppo-vision, ddpg, td3, es, or path/to/file.py:MyLearner) with actors, a
    buffer, a learner, a parameter server, an evaluator and a metrics sink, each its own process.

    Before anything starts, the algorithm runs once on synthetic data in this process (the
    launch check); a failure is reported with its file:line and nothing is written.

    Writes FOLDER/EXPERIMENT/TRIAL (config.json, metrics.jsonl, TensorBoard events, checkpoints)
    and shows progress until the step budget is used (a live panel on a terminal, plain lines
    otherwise); Ctrl-C stops every process (a checkpoint
    is written first).
    """
    from surreal import config as config_io
    from surreal import launch as launching

    _quiet_third_party()
    try:
        plan = launching.plan(
            algo,
            env=env_id,
            actors=actors,
            steps=steps,
            overrides=overrides,
            folder=folder,
            name=name,
            trial=trial,
            resume=resume,
        )
        plan.backend = backend  # e.g. Curve keys on multi-node backends (surreal.curve)
        launching.preflight(plan)  # the algorithm's code on synthetic data, before anything starts
    except (LookupError, ValueError, FileExistsError, FileNotFoundError) as err:
        raise _UserError(str(err)) from err
    except ModuleNotFoundError as err:
        raise _missing_extra(err) from err
    if dry_run:
        import json

        click.echo(f"# run folder: {plan.run_dir.path} (not created: --dry-run)")
        click.echo(f"# {_family_line(plan)}")
        click.echo(json.dumps(config_io.to_dict(plan.config), indent=2, sort_keys=True))
        click.echo(launching.build_experiment(plan).to_yaml())
        return
    sys.exit(_run(plan, backend, quiet))


def _family_line(plan) -> str:
    """`task family: classic (algo.norm_obs=False; ...)`: the defaults `surreal launch` chose."""
    from surreal.algos.families import describe, family_defaults

    return describe(*family_defaults(plan.config))


def _run(plan, backend: str, quiet: bool) -> int:
    import symphony
    from surreal import config_check, curve
    from surreal import launch as launching
    from surreal.progress import format_status, monitor
    from surreal.rundir import read_json

    try:
        config_check.check_backend(backend)  # before the run folder is written
    except ValueError as err:
        raise _UserError(str(err)) from err
    launching.create_run(plan)
    out = sys.stdout
    click.echo(
        f"run folder: {plan.run_dir.path}  (experiment {plan.experiment_name}, "
        f"{plan.config.run.actors} actors x {plan.config.env.num_envs} envs, backend {backend})"
    )
    if not plan.resume:
        click.echo(_family_line(plan))
    started = time.monotonic()
    try:
        handle = symphony.launch(
            launching.build_experiment(plan), backend, **curve.launch_options(plan)
        )
    except symphony.SymphonyError as err:
        raise _UserError(str(err)) from err
    code, summarized = 130, False

    def summary() -> None:
        status = read_json(plan.run_dir.status_file, {}) or {}
        click.echo(format_status(status, time.monotonic() - started, plan.config.run.steps))

    signal.signal(signal.SIGTERM, _raise_interrupt)  # `kill` and `timeout` stop the run like Ctrl-C
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
        _stop_and_keep_logs(handle, plan.run_dir.path / "logs")
        if not summarized:  # interrupted: the learner's last checkpoint is in the status now
            summary()
        click.echo(
            f"done: {plan.run_dir.path} (surreal eval {plan.run_dir.path}; "
            f"tensorboard --logdir {plan.run_dir.tensorboard})"
        )
    return code


def _stop_and_keep_logs(handle, logs: Path) -> None:
    """Stop every process, append their logs to RUN_DIR/logs/, then drop symphony's record."""
    handle.backend.delete(handle.record)
    logs.mkdir(exist_ok=True)
    for process, source in (handle.record.logs or {}).items():
        try:
            text = Path(source).read_text(errors="replace")
        except FileNotFoundError:
            continue
        with (logs / f"{process}.log").open("a") as out:
            out.write(text)
    deadline = time.monotonic() + 10.0
    while True:  # the supervisor may write its final state just after being told to stop
        handle.backend.records.remove(handle.record.name)
        if not (handle.backend.records.folder / handle.record.name).exists():
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)


def _raise_interrupt(*_: object) -> None:
    raise KeyboardInterrupt


@main.command("eval")
@click.argument("run_dir", type=click.Path())
@click.option("--episodes", default=10, show_default=True, help="Greedy episodes to run.")
@click.option("--video", type=click.Path(), help="Also record the first episode to this .mp4/.gif.")
def eval_command(run_dir: str, episodes: int, video: str | None) -> None:
    """Load RUN_DIR's checkpoint and report the mean greedy return over --episodes episodes."""
    _quiet_third_party()
    if video:
        _private_runtime_dir()
    from surreal.evaluate import evaluate_run

    try:
        result = evaluate_run(Path(run_dir), episodes, video)
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
    import logging

    logging.getLogger("robosuite_logs").disabled = True


def _private_runtime_dir() -> None:
    """Give the renderer (SDL, for gymnasium's frames) the XDG_RUNTIME_DIR it wants.

    Without one it prints "error: XDG_RUNTIME_DIR is invalid or not set" although recording
    works; a private temporary folder (mode 0700, removed at exit) keeps that noise away.
    """
    import atexit
    import os
    import shutil
    import tempfile

    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and os.path.isdir(current) and os.access(current, os.W_OK):
        return
    folder = tempfile.mkdtemp(prefix="surreal-xdg-")  # created with mode 0700
    os.environ["XDG_RUNTIME_DIR"] = folder
    atexit.register(shutil.rmtree, folder, ignore_errors=True)


@main.command()
@click.argument("run_dir", type=click.Path())
def status(run_dir: str) -> None:
    """Show RUN_DIR's progress (steps, returns, checkpoint) and whether its processes are alive."""
    from surreal.evaluate import run_status

    try:
        click.echo(run_status(Path(run_dir)))
    except (FileNotFoundError, LookupError) as err:
        raise _UserError(str(err)) from err


@main.command(hidden=True)
@click.argument("role")
@click.argument("run_dir")
@click.option("--index", default=0, type=int, help="Which one of its role (actor-3: 3).")
def component(role: str, run_dir: str, index: int) -> None:
    """Run one component process (started by `surreal launch`)."""
    from surreal.components import run_component

    run_component(role, run_dir, index)
