"""One command-line style for cloudwise, symphony and surreal (all three build on click).

- `--help` shows every option's default (`show_default` in `CONTEXT_SETTINGS`).
- A usage error (a bad argument or option, an invalid spec or name given on the command line)
  prints one line, `Error: WHAT (see `PROG CMD --help`)`, and exits 2; nothing is started.
- A failure while doing the work (terraform failed, a process failed) exits 1.
"""

from __future__ import annotations

from typing import Any

import click

CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"], "show_default": True}
USAGE_EXIT = 2


class InputError(click.ClickException):
    """A problem with what the user gave: `Error: ...` on one line, exit status 2."""

    exit_code = USAGE_EXIT


def one_line(err: click.UsageError) -> InputError:
    """click's multi-line usage error (usage, hint, message) as one line naming --help."""
    hint = f" (see `{err.ctx.command_path} --help`)" if err.ctx is not None else ""
    return InputError(" ".join(err.format_message().split()) + hint)


class StyledGroup(click.Group):
    """A click group whose usage errors (of itself and every subcommand) are one line, exit 2."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as err:
            raise one_line(err) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as err:
            raise one_line(err) from None
