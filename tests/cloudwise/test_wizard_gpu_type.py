"""`cloudwise init`'s GPU type: checked at its question, in flags before any question, and every
option's default in --help (issue 34, item 3)."""

from __future__ import annotations

import subprocess
import sys

import pexpect
import pytest

from cloudwise import ClusterSpec
from cloudwise.spec import GPU_TYPES, KUBERNETES_VERSION
from tests.cli_errors import assert_one_line_error

pytestmark = pytest.mark.timeout(120)


def answer(child: pexpect.spawn, prompt: str, reply: str) -> None:
    child.expect_exact(prompt)
    child.sendline(reply)


def cloudwise(*args: str) -> subprocess.CompletedProcess:
    """`python -m cloudwise ARGS` with nothing on stdin (a question would end it)."""
    return subprocess.run(
        [sys.executable, "-m", "cloudwise", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_wizard_asks_the_gpu_type_again_at_once_until_it_is_known(tmp_path):
    child = pexpect.spawn(
        sys.executable,
        ["-m", "cloudwise", "-C", str(tmp_path), "init"],
        encoding="utf-8",
        timeout=30,
        dimensions=(40, 200),
    )
    answer(child, "Cloud provider (gcp, aws):", "aws")
    answer(child, "AWS account id (optional, press Enter to skip) []:", "")
    answer(child, "Region [us-west-2]:", "")
    answer(child, "Cluster name [surreal]:", "")
    answer(child, "Kubernetes version [1.35]:", "")
    answer(child, "[surreal]:", "custom")
    answer(child, "Pool name", "learner")
    answer(child, "GPUs per node [0]:", "1")
    answer(child, "vCPUs per node [8]:", "")
    answer(child, "Memory per node, GB (0 = any) [0.0]:", "")
    child.expect_exact("GPU type [v100]:")
    for reply, said in [
        ("banana", "'banana' is not a GPU type; choose one of: " + ", ".join(GPU_TYPES)),
        ("v10", "'v10' is not a GPU type (did you mean 'v100'?)"),
        ("k80", "K80 GPUs are retired"),
    ]:
        child.sendline(reply)
        child.expect_exact(said)  # at once, no other question first
        assert "Spot" not in child.before, child.before
        child.expect_exact("GPU type [v100]:")  # and asked again
        assert "Spot" not in child.before, child.before
    child.sendline("T4")  # any case
    answer(child, "Spot/preemptible nodes? [y/N]:", "")
    answer(child, "Minimum nodes (0 = scale to zero) [0]:", "")
    answer(child, "Maximum nodes [4]:", "")
    answer(child, "Pool name", "")
    child.expect_exact("Next steps:")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    (pool,) = ClusterSpec.load(tmp_path).pools
    assert (pool.name, pool.gpu, pool.gpu_type) == ("learner", 1, "t4")


@pytest.mark.parametrize("no_input", [True, False])
def test_a_bad_gpu_type_in_a_flag_is_one_line_before_any_question(no_input, tmp_path):
    flags = ["--no-input"] if no_input else []
    pool = "name=learner,cpu=8,gpu=1,gpu_type=banana"
    result = cloudwise("-C", str(tmp_path), "init", "--provider", "aws", *flags, "--pool", pool)
    assert_one_line_error(result, "pool 'learner'", "unknown gpu_type 'banana'", "known: p100")
    assert result.stdout == ""  # no question was asked
    assert list(tmp_path.iterdir()) == []


def test_init_help_shows_every_options_default():
    result = cloudwise("init", "--help")
    assert result.returncode == 0, result.stderr
    options, entries = result.stdout.split("Options:", 1)[1].splitlines(), []
    for line in options:
        if line.startswith("  -"):
            entries.append(line)
        elif line.strip() and entries:
            entries[-1] += " " + line.strip()
    shown = {entry.split()[0].rstrip(","): " ".join(entry.split()) for entry in entries}
    assert set(shown) >= {"--provider", "--region", "--name", "--preset", "--pool", "--no-input"}
    for option, text in shown.items():
        if option != "-h":
            assert "[default: " in text, text
    assert "(surreal)" in shown["--name"]
    assert f"({KUBERNETES_VERSION})" in shown["--kubernetes-version"]
    assert "us-west1 on gcp" in shown["--region"] and "on aws" in shown["--region"]
