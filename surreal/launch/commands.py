"""`surreal export` and `surreal plot`: what a user takes out of a finished run (the `surreal`
group in `surreal/cli.py` registers them)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from cloudwise.clistyle import InputError
from surreal.monitoring.plot import RETURNS, plot_runs
from surreal.runtime.runfolder.rundir import resolve_run
from surreal.runtime.runfolder.storage_sync import reading

_EXPORT_EXTRA = "pip install 'surreal-stack[export]' (onnx, onnxruntime)"


@click.command("export")
@click.argument("run_dir", type=click.Path())
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["torchscript", "onnx"]),
    default="torchscript",
    help="torchscript: run it with torch alone (torch.jit.load); onnx: with onnxruntime.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False),
    show_default="EXPERIMENT-TRIAL.pt (.onnx) here",
    help="The file to write; its model card goes beside it (the same name, .md).",
)
@click.option(
    "--checkpoint",
    type=click.Choice(["latest", "best"]),
    default="latest",
    help="latest: the checkpoint `surreal eval` plays; best: the parameters of the run's best "
    "evaluation (checkpoints/best.pt).",
)
def export_command(run_dir: str, fmt: str, output: str | None, checkpoint: str) -> None:
    """Write RUN_DIR's policy as one file that maps a batch of observations to the greedy
    actions `surreal eval` takes (observation normalization inside), and a model card beside it.

    The file is loaded back and checked against the policy before this returns. ppo-vision's
    file takes and returns the LSTM state too (docs/export.md).
    """
    from surreal.launch.export import export_run  # torch: `surreal --help` stays light

    try:
        exported = export_run(run_dir, fmt, output, checkpoint)
    except ModuleNotFoundError as err:
        raise InputError(f"--format {fmt} needs {err.name}: {_EXPORT_EXTRA}") from err
    except (FileNotFoundError, LookupError, ValueError) as err:
        raise InputError(str(err)) from err
    shapes = ", ".join(
        f"{name} {dtype}[{', '.join(map(str, shape))}]"
        for name, (dtype, shape) in {**exported.inputs, **exported.outputs}.items()
    )
    click.echo(f"wrote {exported.file} ({fmt}, step {exported.step:,}): {shapes}")
    click.echo(f"model card: {exported.card}")


def _metrics_of(run_dir: str, stack: contextlib.ExitStack) -> Path:
    """The local folder of the run at `run_dir` that holds its metrics.jsonl."""
    run = resolve_run(stack.enter_context(reading(run_dir)))
    if not run.metrics_file.is_file():
        raise FileNotFoundError(f"{run_dir}: no metrics.jsonl (has the run started?)")
    return Path(run.path)


@click.command("plot")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path())
@click.option(
    "-o",
    "--output",
    default="curves.png",
    type=click.Path(dir_okay=False),
    help="The PNG to write.",
)
def plot_command(run_dirs: tuple[str, ...], output: str) -> None:
    """Plot the training and eval returns of one or more runs (overlaid) against env steps and
    against wall time, from each RUN_DIR's metrics.jsonl, into one PNG."""
    if not Path(output).absolute().parent.is_dir():
        raise InputError(f"-o {output}: {Path(output).absolute().parent} is not a folder")
    try:
        with contextlib.ExitStack() as stack:  # a run in an object store: a local copy each
            runs = [_metrics_of(run_dir, stack) for run_dir in run_dirs]
            drawn = plot_runs(runs, Path(output), list(run_dirs))
    except ModuleNotFoundError as err:
        raise InputError("plotting needs matplotlib: pip install 'surreal-stack[rl]'") from err
    except (FileNotFoundError, LookupError, ValueError) as err:
        raise InputError(str(err)) from err
    missing = sorted(set(run_dirs) - set(drawn))
    click.echo(f"wrote {output}: {', '.join(t for t, _ in RETURNS)} of {len(drawn)} run(s)")
    if missing:
        click.echo(f"no returns recorded yet: {', '.join(missing)}")
