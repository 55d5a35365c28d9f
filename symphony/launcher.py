"""`symphony.launch`: validate, record and start an experiment; returns a handle to manage it."""

from __future__ import annotations

import itertools
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, TextIO

import yaml

from symphony.backends import get_backend
from symphony.backends.base import ALIVE_STATES, Backend, ExperimentStatus
from symphony.errors import ExperimentNotFound, LaunchRefused
from symphony.ownership import check_experiment_name, current_owner, same_owner
from symphony.records import ExperimentRecord, Records
from symphony.spec import Experiment, check_name

NAME_LIMIT = 63
"""The longest experiment name `free_name` makes (a Kubernetes namespace's limit)."""


class ExperimentHandle:
    """A launched experiment: status, logs, stop and wait, through its backend."""

    def __init__(self, backend: Backend, record: ExperimentRecord) -> None:
        self.backend = backend
        self.record = record

    @property
    def name(self) -> str:
        """The experiment name."""
        return self.record.name

    def status(self) -> ExperimentStatus:
        """The live status (`Backend.describe`; once it ended, the outcome `stop` recorded)."""
        status = self.backend.describe(self.record)
        status.status = self.record.ended_status(status.status)
        return status

    def logs(self, process: str, tail: int | None = None) -> str:
        """Everything `process` printed so far (or its last `tail` lines)."""
        return "".join(self.backend.logs(self.record, process, tail=tail))

    def follow(self, process: str) -> Iterator[str]:
        """Yield `process`'s lines as they come, until it ends."""
        return self.backend.logs(self.record, process, follow=True)

    def wait(self, timeout: float | None = None, poll_s: float = 0.1) -> ExperimentStatus:
        """Poll until no process is alive (or `timeout` seconds passed); return the last status."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if not any(p.state in ALIVE_STATES for p in status.processes):
                return status
            if deadline is not None and time.monotonic() > deadline:
                return status
            time.sleep(poll_s)

    def stop(self, force: bool = False, outcome: str | None = None) -> ExperimentStatus | None:
        """Stop every process (grace period, then kill); the record and logs stay for inspection.

        `outcome` says how the experiment ended when the caller ends it on purpose ("finished":
        its work is done and the rest was stopped; "failed"; "stopped": interrupted); it is
        kept in the record and shown as its status from then on (`ExperimentRecord.outcome`).

        Returns the final status (None if the backend cannot describe it any more);
        `symphony list --all` still shows the experiment, and
        `delete()` (or `symphony delete`) removes it.
        """
        self.backend.delete(self.record, force=force)
        kept = self.record.path is not None and self.record.path.exists()
        if kept:
            ended = self._stored().ended  # its supervisor's word, when every process had ended
            self.record.update(
                ended=ended or time.time(), **({"outcome": outcome} if outcome else {})
            )
        try:
            status = self.status()
        except Exception:  # noqa: BLE001 - stopped; some backends cannot describe what is gone
            return None
        if kept:
            self.record.update(status=status.status)
        return status

    def set_summary(self, summary: dict[str, Any]) -> None:
        """Keep what the experiment achieved in its record (`ExperimentRecord.summary`), e.g.
        `{"eval": "475.0"}`: `symphony list --all` shows it. Values are shown as given."""
        if self.record.path is not None and self.record.path.exists():
            self.record.update(summary={str(k): str(v) for k, v in summary.items()})

    def _stored(self) -> ExperimentRecord:
        """The record as stored now (what the supervisor wrote since), else this copy."""
        try:
            return ExperimentRecord.load(self.record.path)
        except (OSError, TypeError, yaml.YAMLError):
            return self.record

    def delete(self, force: bool = False) -> None:
        """Stop every process and remove the record with its logs (`symphony delete`)."""
        self.backend.delete(self.record, force=force)
        self.backend.records.remove(self.record.name)

    def __enter__(self) -> ExperimentHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def launch(
    experiment: Experiment,
    backend: str = "local",
    *,
    name: str | None = None,
    detach: bool = True,
    records: Records | None = None,
    owner: str | None = None,
    launch_command: list[str] | None = None,
    output: TextIO | None = None,
    note: str | None = None,
    **options: Any,
) -> ExperimentHandle:
    """Validate `experiment`, record it and start it on `backend`.

    Args:
        experiment: what to run.
        backend: a registered backend name (see `symphony.backends.BACKENDS`).
        name: run under this name instead of `experiment.name`.
        detach: return once started (True), or stay attached until it ends or Ctrl-C (False).
        records: the record store (default: the state directory).
        owner: recorded owner (default: the current user).
        launch_command: the command line recorded with the experiment (default: sys.argv).
        output: attached only: print every process's output here as it comes, each line
            prefixed by the process name (`actor-0 | ...`, as docker compose does).
        note: a line written into every process's log before it starts, after the lines of
            the earlier launches of this name (`free_name`), e.g. `--- resumed at step N ---`.
        **options: backend options (e.g. tmux `socket=`).

    Returns:
        An ExperimentHandle (for an attached launch, the experiment has ended already).
    """
    if name:
        experiment.name = check_name(name, "experiment name")
    check_experiment_name(experiment.name)
    experiment.validate()
    impl = get_backend(backend, records=records, **options)
    record = impl.records.create(
        experiment,
        backend,
        owner=owner,
        launch_command=launch_command or list(sys.argv),
        note=note,
    )
    streamer = None
    if output is not None and not detach:
        from symphony.attached import OutputStreamer

        streamer = OutputStreamer(impl, record, output).start()
    try:
        impl.launch(experiment, record, detach=detach)
    except LaunchRefused:
        _drop(impl, record)  # refused before creating anything: only our record goes
        raise
    except BaseException:
        _discard(impl, record)  # a launch that failed (or was interrupted early) leaves nothing
        raise
    finally:
        if streamer is not None:
            streamer.stop()
    return ExperimentHandle(impl, record)


def _discard(impl: Backend, record: ExperimentRecord) -> None:
    """A launch that failed leaves nothing behind: stop what it started, drop its record.

    Backends write what they create into `record.data` before creating it, and `delete` of a
    record acts on that alone, so this never reaches anything another launch created.
    """
    try:
        impl.delete(record, force=True)
    finally:
        _drop(impl, record)


def _drop(impl: Backend, record: ExperimentRecord) -> None:
    """Remove the record of a launch that failed; the earlier launches' logs it took over
    (`Records.retire`) are retired again for the next launch, with this one's lines."""
    if record.data.get("earlier_logs"):
        impl.records.retire(record.name)
    else:
        impl.records.remove(record.name)


def free_name(
    name: str,
    same: Callable[[ExperimentRecord], bool] = lambda record: False,
    records: Records | None = None,
) -> str:
    """A name to launch `name` under, now that records of ended experiments stay.

    `name` when no record holds it. When one does and `same(record)` says it is an earlier
    launch of this very experiment (a run that is launched again to continue it), launched by
    this user: if it has ended, its record is retired and `name` returned (the new launch takes
    its place and its logs: `Records.retire`); if it still runs, `name` is returned all the same, so that the launch is refused
    with the usual "exists" error. Any other holder (another experiment, another owner's, a
    record that cannot be read) keeps its name: the first free `name-2`, `name-3`, ... is used.
    """
    records = records or Records()
    for n in itertools.count(1):
        suffix = "" if n == 1 else f"-{n}"
        candidate = name[: NAME_LIMIT - len(suffix)].rstrip("-") + suffix
        try:
            record = records.load(candidate)
        except ExperimentNotFound:
            return candidate
        except (OSError, yaml.YAMLError, TypeError):
            continue  # half-written or broken: not ours to touch
        if not (same(record) and same_owner(record.owner, current_owner())):
            continue
        if _ended(record, records):
            records.retire(candidate)
        return candidate
    raise AssertionError("unreachable")


def _ended(record: ExperimentRecord, records: Records) -> bool:
    """Whether no process of `record`'s experiment is alive: its launcher stopped it and said
    how it ended (`outcome`), or the backend (with its default options) sees none alive; False
    when neither can tell."""
    if record.outcome:
        return True
    try:
        status = get_backend(record.backend, records=records).describe(record)
    except Exception:  # noqa: BLE001 - a backend that cannot describe it: treat it as alive
        return False
    return not any(p.state in ALIVE_STATES for p in status.processes)
