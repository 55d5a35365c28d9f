"""The terraform runner, for real, on terraform's built-in terraform_data (no provider download)."""

import subprocess
import sys
import textwrap

import pytest

from cloudwise.errors import TerraformError
from cloudwise.terraform import TerraformRunner
from symphony.testing import scaled

pytestmark = pytest.mark.timeout(180)

CONFIG = textwrap.dedent("""\
    resource "terraform_data" "pool" {
      input = "actors-8"
    }

    output "pool" {
      value = terraform_data.pool.output
    }
""")

SCRIPT = textwrap.dedent("""\
    import sys
    from cloudwise.terraform import TerraformRunner
    runner = TerraformRunner(sys.argv[1])
    runner.init()
    print("changes:", runner.plan(), flush=True)
    runner.apply()
    print("outputs:", runner.output(), flush=True)
    print("changes after apply:", runner.plan(), flush=True)
    runner.destroy()
    print("outputs after destroy:", runner.output(), flush=True)
""")


def test_init_plan_apply_output_destroy_with_output_streamed(terraform_bin, tmp_path):
    (tmp_path / "main.tf").write_text(CONFIG)
    # A child process with a real stdout: terraform writes to it directly, as it would to a terminal.
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(170),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "Terraform has been successfully initialized" in out
    assert "changes: True" in out
    assert "Apply complete! Resources: 1 added" in out
    assert "outputs: {'pool': 'actors-8'}" in out
    assert "changes after apply: False" in out
    assert "Destroy complete! Resources: 1 destroyed" in out
    assert "outputs after destroy: {}" in out
    assert out.index("Apply complete") < out.index("outputs:")  # streamed as it happened, in order


def test_output_is_echoed_when_stdout_is_not_a_file(terraform_bin, tmp_path, capsys):
    (tmp_path / "main.tf").write_text(CONFIG)
    runner = TerraformRunner(tmp_path)
    runner.init()
    assert runner.plan() is True
    assert "terraform_data.pool will be created" in capsys.readouterr().out


def test_errors_name_the_command_and_show_terraform_error(terraform_bin, tmp_path, capsys):
    (tmp_path / "main.tf").write_text('resource "terraform_data" "x" {\n  nonsense = 1\n}\n')
    runner = TerraformRunner(tmp_path)
    runner.init()
    with pytest.raises(TerraformError, match="terraform plan failed") as err:
        runner.plan()
    assert "nonsense" in str(err.value) + capsys.readouterr().err


def test_missing_terraform_or_folder_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(TerraformError, match="install terraform"):
        TerraformRunner(tmp_path)
    with pytest.raises(TerraformError, match="cloudwise init"):
        TerraformRunner(tmp_path / "nope", binary="/bin/true")


def test_cloudwise_output_prints_applied_outputs(terraform_bin, tmp_path):
    from click.testing import CliRunner

    from cloudwise.cli import main

    (tmp_path / "main.tf").write_text(CONFIG)
    runner = TerraformRunner(tmp_path)
    runner.init()
    cli = CliRunner()
    empty = cli.invoke(main, ["-C", str(tmp_path), "output", "pool"])
    assert empty.exit_code == 1 and "apply first" in empty.output
    runner.apply()
    assert cli.invoke(main, ["-C", str(tmp_path), "output"]).output == "pool = actors-8\n"
    assert cli.invoke(main, ["-C", str(tmp_path), "output", "pool"]).output == "actors-8\n"
    assert (
        '"pool": "actors-8"' in cli.invoke(main, ["-C", str(tmp_path), "output", "--json"]).output
    )
    runner.destroy()
