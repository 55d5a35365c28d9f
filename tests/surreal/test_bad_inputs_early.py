"""Every bad input is one line and exit 2, before anything starts (issue 34, item 3).

Each test runs the real CLI (`python -m surreal ...`) in an empty folder. Where the answer must
come before torch (or boto3) is imported, a stand-in package of that name that fails on import
is put first on PYTHONPATH: a check that answers in time never touches it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.testing import scaled
from tests.cli_errors import assert_one_line_error

pytestmark = pytest.mark.timeout(180)

CARTPOLE = ["launch", "ppo", "--env", "gym:CartPole-v1"]


def _blocked(folder: Path, modules: tuple[str, ...]) -> Path:
    """A folder of packages named `modules`, each failing on import."""
    for name in modules:
        (folder / name).mkdir(parents=True)
        (folder / name / "__init__.py").write_text(
            f"raise RuntimeError('{name} was imported, but the input was to be checked first')\n"
        )
    return folder


def surreal(args: list[str], tmp_path: Path, block: tuple[str, ...] = (), **env: str):
    """`python -m surreal ARGS` in the empty folder tmp_path/work (symphony's state in
    tmp_path/home, no AWS settings but `env`), with `block`'s modules failing on import."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    path = [str(_blocked(tmp_path / "blocked", block))] if block else []
    path += [p for p in [base.get("PYTHONPATH")] if p]
    base.update(
        SYMPHONY_HOME=str(tmp_path / "home"),
        SURREAL_MIRROR_DIR=str(tmp_path / "mirror"),
        AWS_CONFIG_FILE=str(tmp_path / "no-aws-config"),
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "no-aws-credentials"),
        PYTHONPATH=os.pathsep.join(path),
        PYTHONUNBUFFERED="1",
        **env,
    )
    return subprocess.run(
        [sys.executable, "-m", "surreal", *args],
        cwd=work,
        env=base,
        capture_output=True,
        text=True,
        timeout=scaled(170),
    )


def assert_nothing_written(tmp_path: Path) -> None:
    assert list((tmp_path / "work").iterdir()) == []
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("*.json"))
    assert not (tmp_path / "mirror").exists()


@pytest.mark.parametrize("case", ["under /proc", "parent is a file", "folder is a file"])
def test_a_folder_that_cannot_be_written_is_one_line_before_torch(case, tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n")
    folder, why = {
        "under /proc": ("/proc/surreal-runs", "/proc is not writable"),
        "parent is a file": (str(afile / "runs"), f"{afile} is a file, not a folder"),
        "folder is a file": (str(afile), f"{afile} is a file, not a folder"),
    }[case]
    result = surreal([*CARTPOLE, "--folder", folder], tmp_path, block=("torch",))
    assert_one_line_error(result, f"--folder {folder}", why)
    assert_nothing_written(tmp_path)
    assert afile.read_text() == "not a folder\n"
    assert not Path("/proc/surreal-runs").exists()


@pytest.mark.integration
def test_a_dry_run_into_an_object_store_contacts_no_store(tmp_path):
    """No credentials, an endpoint nobody answers on, boto3 itself failing on import: a dry
    run still prints its plan, and says the store was not contacted."""
    result = surreal(
        [*CARTPOLE, "--folder", "s3://bucket/runs", "--dry-run"],
        tmp_path,
        block=("boto3", "botocore"),
        AWS_ENDPOINT_URL="http://127.0.0.1:9",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("# run folder: s3://bucket/runs/ppo-cartpole-v1/t1 (not created"), first
    assert "object store not contacted: --dry-run" in first, first
    assert "name: learner" in result.stdout
    assert_nothing_written(tmp_path)


def test_a_dry_run_still_refuses_an_object_store_url_without_a_bucket(tmp_path):
    result = surreal([*CARTPOLE, "--folder", "s3://", "--dry-run"], tmp_path, block=("torch",))
    assert_one_line_error(result, "s3://", "name a bucket")
    assert_nothing_written(tmp_path)


@pytest.mark.parametrize(
    "video, words",
    [
        ("out.xyz", ["--video out.xyz", "cannot write a .xyz file", ".mp4 or .gif"]),
        ("out", ["--video out", "without a suffix"]),
        ("no-such-folder/out.gif", ["--video no-such-folder/out.gif", "is not a folder"]),
    ],
)
@pytest.mark.parametrize("where", ["local", "s3"])
def test_eval_checks_the_video_file_before_any_episode(video, words, where, tmp_path):
    """A run folder whose files would not even load, torch and boto3 failing on import: the
    video's name is refused before the run is read (so before any episode runs)."""
    run = tmp_path / "work" / "runs" / "ppo-cartpole-v1" / "t1"
    run.mkdir(parents=True)
    for name in ("config.json", "run.json"):
        (run / name).write_text("{}\n")
    ref = "s3://bucket/runs/ppo-cartpole-v1/t1" if where == "s3" else str(run)
    result = surreal(
        ["eval", ref, "--episodes", "1", "--video", video],
        tmp_path,
        block=("torch", "boto3", "botocore"),
    )
    assert_one_line_error(result, *words)
    assert sorted(p.name for p in run.iterdir()) == ["config.json", "run.json"]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["runs"]
