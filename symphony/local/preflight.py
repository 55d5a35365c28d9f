"""Checks before a local launch: every command can be found, every working directory exists."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from symphony.errors import SpecError
from symphony.spec import Experiment


def check_commands(experiment: Experiment, base_dir: str | None = None) -> None:
    """Raise SpecError naming the first process whose program or working directory is missing.

    Shell-string commands are run by /bin/sh, so only their working directory is checked.
    """
    base = Path(base_dir or os.getcwd())
    for proc in experiment.processes():
        cwd = base / proc.cwd if proc.cwd else base
        if not cwd.is_dir():
            raise SpecError(
                f"process {proc.name!r}: working directory {str(cwd)!r} does not exist; "
                f"create it or fix cwd="
            )
        if isinstance(proc.command, str):
            continue
        program = proc.command[0]
        if "/" in program:
            found = (cwd / program).is_file() and os.access(cwd / program, os.X_OK)
        else:
            found = (
                shutil.which(program, path=proc.env.get("PATH", os.environ.get("PATH"))) is not None
            )
        if not found:
            raise SpecError(
                f"process {proc.name!r}: program {program!r} is not found or not executable "
                f"(looked {'in ' + str(cwd) if '/' in program else 'on PATH'}); install it or "
                f"fix the command"
            )
