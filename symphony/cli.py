"""The `symphony` command line."""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable
from typing import Any

import click
import yaml

from cloudwise.clistyle import CONTEXT_SETTINGS, InputError, StyledGroup
from symphony.backends import backend_class, get_backend
from symphony.backends.base import Backend
from symphony.build_cli import build
from symphony.errors import ExperimentNotFound, SpecError, SymphonyError
from symphony.ownership import check_experiment_name, check_owner, same_owner
from symphony.records import (
    ACTIVE_STATUSES,
    ExperimentRecord,
    Records,
    current_owner,
    load_config,
    resolve_prefix,
)
from symphony.spec import check_name


def _errors(func: Callable) -> Callable:
    """Turn symphony's errors into a one-line `Error: ...`: exit status 2 for bad input (a spec,
    a name, a backend or option), 1 for a failure while doing the work."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (SpecError, ExperimentNotFound) as err:
            raise InputError(str(err)) from err
        except SymphonyError as err:
            raise click.ClickException(str(err)) from err

    return wrapper


def _checked_backend(name: str, records: Records, options: dict[str, Any]) -> Backend:
    """The backend `name` with `options`; an unknown name or option is a usage error (exit 2)."""
    try:
        return get_backend(name, records=records, **options)
    except SymphonyError as err:
        raise InputError(str(err)) from err


BACKEND_HELP = (
    "Where to run: local (subprocesses here), tmux (a window per process), compose (docker), "
    "kube (Kubernetes), slurm, or test (threads inside this command, for tests)."
)


@click.group(cls=StyledGroup, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="surreal-stack")
def main() -> None:
    """symphony: launch and manage distributed experiments.

    An experiment is a set of processes that bind and connect to named services; symphony
    starts them on a backend (local, tmux, compose, kube, slurm), hands each its addresses,
    and keeps a record you and your teammates can list, describe, tail and delete.
    Records live in $SYMPHONY_HOME (default ~/.symphony).
    """


def backend_options(name: str, pairs: tuple[str, ...] = ()) -> dict[str, Any]:
    """Options for backend `name`: the config file's `backend_options.<name>`, then -o KEY=VALUE."""
    options = dict((load_config().get("backend_options") or {}).get(name) or {})
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:  # `-o DIR`: where --dry-run writes its files (kube manifests, compose file)
            key, value = "output", pair
        options[key.replace("-", "_")] = _option_value(value)
    return options


def _option_value(text: str) -> Any:
    """A -o value: YAML for {...}/[...], numbers and booleans; anything else stays a string.

    Plain YAML would read `2:00:00` (a Slurm time limit) as the sexagesimal int 7200.
    """
    if text.startswith(("{", "[")):
        return yaml.safe_load(text)
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    if re.fullmatch(r"-?(\d+\.\d*|\.\d+)([eE]-?\d+)?|-?\d+[eE]-?\d+", text):
        return float(text)
    return {"true": True, "false": False, "null": None, "": ""}.get(text.lower(), text)


def _backend(name: str, records: Records) -> Backend:
    return _checked_backend(name, records, backend_options(name))


@main.command()
@click.argument("file")
@click.option(
    "--backend",
    "-b",
    default=None,
    metavar="NAME",
    help=BACKEND_HELP + " Default: the config file's `backend`, else local.",
)
@click.option("--name", "-n", default=None, help="Run under this name instead of the experiment's.")
@click.option(
    "--detach",
    "-d",
    is_flag=True,
    help="Return once started (local: the supervisor stays in the background).",
)
@click.option("--dry-run", is_flag=True, help="Validate and print what would start; start nothing.")
@click.option(
    "--no-logs",
    is_flag=True,
    help="Attached: do not print the processes' output (by default each line is printed "
    "prefixed by its process, e.g. `actor-0 | ...`).",
)
@click.option(
    "--option",
    "-o",
    "options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Backend option, e.g. -o grace_s=2 (local), -o socket=mine (tmux); "
    "a bare -o DIR is where --dry-run writes files (-o output=DIR).",
)
@_errors
def launch(
    file: str,
    backend: str | None,
    name: str | None,
    detach: bool,
    dry_run: bool,
    no_logs: bool,
    options: tuple[str, ...],
) -> None:
    """Launch the experiment built by FILE.

    FILE is a Python file with a `make_experiment()` function (or FILE.py:FUNC), or a YAML spec.
    Attached (the default), every process's output is printed prefixed by its name and Ctrl-C
    stops every process; `--detach` returns at once.
    """
    from symphony.launcher import launch as do_launch
    from symphony.loader import load_experiment

    backend = backend or load_config().get("backend") or "local"
    opts = backend_options(backend, options)
    checked = _checked_backend(backend, Records(), opts)  # (nothing written yet)
    if backend_class(backend).in_process and detach:
        raise click.UsageError(f"the {backend} backend runs inside this command; drop --detach")
    experiment = load_experiment(file)
    if name:
        experiment.name = check_name(name, "--name")
    check_experiment_name(experiment.name)
    experiment.validate()
    if dry_run:
        click.echo(checked.plan(experiment), nl=False)
        return
    where = "in the background" if detach else "attached; Ctrl-C stops it"
    click.echo(f"launching {experiment.name} on {backend} ({where})", err=True)
    handle = do_launch(
        experiment,
        backend,
        detach=detach,
        launch_command=sys.argv,
        output=None if detach or no_logs else sys.stdout,
        **opts,
    )
    if detach:
        click.echo(
            f"{handle.name} is running; `symphony describe {handle.name}`, "
            f"`symphony logs {handle.name} PROCESS`, `symphony delete {handle.name}`"
        )
        return
    code = handle.record.data.get("exit_code", 0)
    click.echo(f"{handle.name} ended: {handle.status().status}", err=True)
    sys.exit(code)


@main.command(name="list")
@click.option("--mine", is_flag=True, help="Only experiments you launched.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also finished, failed and stopped ones, with each one's duration and summary.",
)
@click.option(
    "--backend",
    "-b",
    "extra",
    multiple=True,
    help="Also ask this backend for experiments without a local record (e.g. kube).",
)
@_errors
def list_(mine: bool, show_all: bool, extra: tuple[str, ...]) -> None:
    """List experiments: name, owner, backend, status, age, running/total processes.

    Ended ones (--all) stay until `symphony delete`; a run its launcher ended on purpose shows
    how it ended (finished, failed, stopped). --all adds how long each ran (DURATION: launch
    to end, `-` where no end was recorded) and what its launcher reported of its result
    (SUMMARY, e.g. `eval 475.0` for a surreal run)."""
    records = Records()
    kept = {r.name: r for r in records.all()}
    always = load_config().get("list_backends") or []  # e.g. [kube] for a team's shared cluster
    names = sorted({r.backend for r in kept.values()} | set(extra) | set(always))
    rows = []
    for name in names:
        try:
            rows += get_backend(name, records=records, **backend_options(name)).list()
        except SymphonyError as err:
            click.echo(f"warning: cannot list {name} experiments: {err}", err=True)
    for row in rows:
        if row.name in kept and kept[row.name].backend == row.backend:
            row.status = kept[row.name].ended_status(row.status)
    rows = [
        r
        for r in rows
        if (show_all or r.status in ACTIVE_STATUSES)
        and (not mine or same_owner(r.owner, current_owner()))
    ]
    if not rows:
        click.echo("no experiments" + ("" if show_all else " running (--all shows ended ones)"))
        return
    table = [("NAME", "OWNER", "BACKEND", "STATUS", "AGE", "PROCESSES")]
    table += [
        (r.name, r.owner, r.backend, r.status, _duration(r.age()), f"{r.running}/{r.processes}")
        for r in sorted(rows, key=lambda r: r.created)
    ]
    if show_all:
        _add_results(table, sorted(rows, key=lambda r: r.created), kept)
    _print_table(table)


def _add_results(table: list[tuple[str, ...]], rows: list[Any], kept: dict) -> None:
    """`symphony list --all`'s DURATION and SUMMARY columns, from each row's record, before
    PROCESSES (which stays last: scripts read it as the last word)."""
    table[0] = (*table[0][:-1], "DURATION", "SUMMARY", table[0][-1])
    for i, row in enumerate(rows, start=1):
        record = kept.get(row.name)
        own = record is not None and record.backend == row.backend
        seconds = record.duration(row.status) if own else None
        shown = "-" if seconds is None else _clock(seconds)
        summary = record.summary_text() if own else "-"
        table[i] = (*table[i][:-1], shown, summary, table[i][-1])


def _find(prefix: str, backend: str | None) -> tuple[Backend, ExperimentRecord]:
    """The record (and its backend) that a name prefix selects; see `Records.resolve`."""
    records = Records()
    extra: dict[str, Any] = {}
    if backend:
        extra = {s.name: s for s in _backend(backend, records).list()}
    name = records.resolve(prefix, list(extra))
    if name in extra and name not in {r.name for r in records.all()}:
        summary = extra[name]
        record = ExperimentRecord(
            summary.name, summary.backend, summary.owner, summary.created, summary.status
        )
    else:
        record = records.load(name)
    return _backend(record.backend, records), record


def _process(record: ExperimentRecord, backend: Backend, prefix: str) -> str:
    names = (
        record.experiment().process_names()
        if record.spec
        else [p.name for p in backend.describe(record).processes]
    )
    return resolve_prefix(prefix, names, "process")


@main.command()
@click.argument("experiment")
@click.option("--backend", "-b", default=None, help="Look the name up in this backend too (kube).")
@_errors
def describe(experiment: str, backend: str | None) -> None:
    """Show each process of EXPERIMENT (a unique prefix is enough): state, restarts, pid,
    uptime, and how it last ended (a kill from outside, or a crash with its exit code)."""
    impl, record = _find(experiment, backend)
    status = impl.describe(record)
    status.status = record.ended_status(status.status)
    click.echo(
        f"{status.name}  backend={status.backend}  owner={status.owner}  "
        f"status={status.status}  age={_duration(status.summary().age())}"
    )
    if record.path is not None:
        click.echo(f"spec={record.path / 'spec.yaml'}  git={record.git_revision or '-'}")
    table = [
        ("PROCESS", "GROUP", "STATE", "RESTARTS", "PID/LOCATION", "UPTIME", "EXIT", "LAST END")
    ]
    for p in status.processes:
        uptime = p.uptime()
        table.append(
            (
                p.name,
                p.group or "-",
                p.state,
                str(p.restarts),
                " ".join(filter(None, [str(p.pid or ""), p.location or ""])) or "-",
                _duration(uptime) if uptime is not None else "-",
                "-" if p.exit_code is None else str(p.exit_code),
                p.last_end or "-",
            )
        )
    _print_table(table)
    for key, value in status.details.items():  # e.g. slurm: one line per job with its state and log
        click.echo(f"{key}: {value}")


@main.command()
@click.argument("experiment")
@click.argument("process")
@click.option(
    "--follow", "-f", is_flag=True, help="Keep printing new lines until the process ends."
)
@click.option(
    "--tail", "-n", type=click.IntRange(min=0), default=None, help="Only the last N lines."
)
@click.option("--backend", "-b", default=None, help="Look the name up in this backend too (kube).")
@_errors
def logs(
    experiment: str, process: str, follow: bool, tail: int | None, backend: str | None
) -> None:
    """Print what PROCESS of EXPERIMENT wrote (stdout and stderr); prefixes are accepted."""
    impl, record = _find(experiment, backend)
    name = _process(record, impl, process)
    try:
        for line in impl.logs(record, name, follow=follow, tail=tail):
            click.echo(line, nl=False)
            sys.stdout.flush()
    except KeyboardInterrupt:
        pass


@main.command()
@click.argument("experiments", nargs=-1, required=True)
@click.option(
    "--force",
    is_flag=True,
    help="Kill at once (no grace period); drop a broken record; delete another owner's experiment.",
)
@click.option("--backend", "-b", default=None, help="Look the names up in this backend too (kube).")
@_errors
def delete(experiments: tuple[str, ...], force: bool, backend: str | None) -> None:
    """Stop every process of each EXPERIMENT (SIGTERM, grace, SIGKILL) and remove its record.

    Another user's experiment is refused unless --force.
    """
    found = [_find(prefix, backend) for prefix in experiments]
    for _impl, record in found:  # all checked first: a refusal deletes nothing
        check_owner(record.owner, "delete", record.name, force)
    for impl, record in found:
        try:
            impl.delete(record, force=force)
        except SymphonyError as err:
            if not force:
                raise SymphonyError(
                    f"{err}\n(`symphony delete --force {record.name}` drops the record anyway)"
                ) from err
            click.echo(f"warning: {err}", err=True)
        impl.records.remove(record.name)
        click.echo(f"deleted {record.name}")


@main.command(name="exec", context_settings={"ignore_unknown_options": True})
@click.argument("experiment")
@click.argument("process")
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@click.option("--backend", "-b", default=None, help="Look the name up in this backend too (kube).")
@click.option("--force", is_flag=True, help="Run it even in another owner's experiment.")
@_errors
def exec_(
    experiment: str, process: str, command: tuple[str, ...], backend: str | None, force: bool
) -> None:
    """Run COMMAND beside (or inside) PROCESS with its environment: `symphony exec EXP PROC -- CMD`.

    Another user's experiment is refused unless --force (give it before `--`).
    """
    impl, record = _find(experiment, backend)
    check_owner(record.owner, "exec in", record.name, force)
    sys.exit(impl.exec(record, _process(record, impl, process), list(command)))


main.add_command(build)  # `symphony build`, owned by symphony/build_cli.py


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def _clock(seconds: float) -> str:
    """`4:05` (m:ss), `1:02:05` (h:mm:ss) from an hour on."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _print_table(rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
