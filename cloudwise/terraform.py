"""The one module that runs terraform (through python-terraform), streaming its output to the user."""

from __future__ import annotations

import io
import shutil
import sys
from pathlib import Path
from typing import Any

from cloudwise.errors import TerraformError

INSTALL_HINT = "install terraform >= 1.5 (https://developer.hashicorp.com/terraform/install) and put it on PATH"
MIRROR_HINT = (
    "if this machine cannot reach the terraform registry, install the providers from a local "
    "mirror: `cloudwise --plugin-dir DIR plan` (or CLOUDWISE_PLUGIN_DIR=DIR), DIR holding "
    "registry.terraform.io/hashicorp/<name>/<version>/<os_arch>/ (fill it elsewhere with "
    "`terraform providers mirror DIR`; see docs/cloudwise.md)"
)


def _can_stream() -> bool:
    """Whether sys.stdout is a real file descriptor terraform can write to directly."""
    try:
        sys.stdout.fileno()
        sys.stderr.fileno()
    except (AttributeError, io.UnsupportedOperation, ValueError):
        return False
    return True


class TerraformRunner:
    """Run `terraform init/plan/apply/destroy/output` in one directory.

    Output streams straight to the user's terminal when stdout is a real file; otherwise (inside
    a notebook or click's test runner) it is captured and echoed when each command ends.

    Args:
        directory: the folder holding the rendered `.tf` files (and the terraform state).
        binary: the terraform executable; default: `terraform` on PATH.
        plugin_dir: a provider mirror; `init` installs providers from it alone (`-plugin-dir`).
    """

    def __init__(
        self, directory: str | Path, binary: str | None = None, plugin_dir: str | Path | None = None
    ):
        from python_terraform import Terraform

        self.directory = Path(directory)
        self.plugin_dir = Path(plugin_dir).resolve() if plugin_dir else None
        found = binary or shutil.which("terraform")
        if not found:
            raise TerraformError(f"terraform is not on PATH; {INSTALL_HINT}")
        if not self.directory.is_dir():
            raise TerraformError(f"{self.directory} is not a directory; run `cloudwise init` first")
        self._tf = Terraform(working_dir=str(self.directory), terraform_bin_path=found)

    def _run(self, what: str, call: Any, hint: str = "", **options: Any) -> tuple[int, str]:
        stream = _can_stream()
        if stream:
            sys.stdout.flush()
            sys.stderr.flush()
        code, out, err = call(capture_output=not stream, raise_on_error=False, **options)
        if not stream:
            sys.stdout.write(out or "")
            sys.stderr.write(err or "")
        if code not in (0, 2) or (code == 2 and what != "plan"):
            tail = (err or "").strip().splitlines()[-8:]
            detail = ("\n" + "\n".join(tail)) if tail else " (its error is printed above)"
            raise TerraformError(
                f"terraform {what} failed in {self.directory} with exit code {code}{detail}"
                + (f"\n{hint}" if hint else "")
            )
        return code, out or ""

    def init(self) -> None:
        """`terraform init`: install providers, from `plugin_dir` alone when it is set (else from
        the registry, or a mirror the terraform CLI config names); a failure says how to use a mirror."""
        if self.plugin_dir is None:
            self._run("init", self._tf.init, hint=MIRROR_HINT, input=False)
            return
        hint = (
            f"the mirror {self.plugin_dir} lacks a provider this configuration needs (see the "
            "error above); add it there with `terraform providers mirror DIR`"
        )
        self._run("init", self._tf.init, hint=hint, input=False, plugin_dir=str(self.plugin_dir))

    def validate(self) -> None:
        """`terraform validate`: check the configuration against the installed providers' schemas."""
        self._run("validate", self._tf.validate_cmd, no_color=_flag())

    def plan(self) -> bool:
        """`terraform plan`: show what apply would change; returns True when something would."""
        code, _ = self._run("plan", self._tf.plan, input=False)
        return code == 2

    def apply(self) -> None:
        """`terraform apply` without the approval prompt (the CLI asks first)."""
        # python-terraform 0.10.1: without skip_plan, apply stops at terraform's approval prompt.
        self._run("apply", self._tf.apply, skip_plan=True)

    def destroy(self) -> None:
        """`terraform destroy` without the approval prompt (the CLI asks first)."""
        # python-terraform 0.10.1 passes `-force` by default, which terraform >= 0.15 rejects.
        from python_terraform import IsNotFlagged

        self._run("destroy", self._tf.destroy, force=IsNotFlagged, auto_approve=True)

    def output(self) -> dict[str, Any]:
        """`terraform output -json` as {name: value}; empty when nothing was applied yet."""
        code, out, err = self._tf.output_cmd(json=_flag(), no_color=_flag(), capture_output=True)
        if code != 0:
            raise TerraformError(f"terraform output failed in {self.directory}: {err.strip()}")
        import json

        return {name: entry["value"] for name, entry in json.loads(out or "{}").items()}


def _flag() -> Any:
    from python_terraform import IsFlagged

    return IsFlagged
