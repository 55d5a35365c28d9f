"""A damaged run file is named in the one-line error of eval, status and --resume, and Ctrl-C at
any moment of `surreal launch` ends in one line, not a traceback (issue 50)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from surreal.runtime.runfolder.rundir import RunFileError, load_json
from surreal.testing import surreal_cli
from symphony.testing import scaled
from tests.surreal.helpers import ctrl_c, processes_of, start_launch, wait_until

pytestmark = pytest.mark.timeout(180)

RUN = ["ppo", "--env", "gym:CartPole-v1", "--actors", "1", "--quiet"]


def _truncate(path: Path) -> None:
    text = path.read_text()
    path.write_text(text[: len(text) // 2])


def test_a_truncated_run_file_is_one_error_naming_it(tmp_path):
    path = tmp_path / "status.json"
    path.write_text('{"global_step": 12, "total')
    with pytest.raises(RunFileError) as err:
        load_json(path)
    assert str(path) in str(err.value) and "not valid JSON" in str(err.value)
    assert load_json(tmp_path / "none.json", {}) == {}


@pytest.mark.integration
def test_eval_status_and_resume_name_the_truncated_file(tmp_path):
    home, run = tmp_path / "home", tmp_path / "runs" / "cut" / "a"
    made = surreal_cli(
        ["launch", *RUN, "--steps", "1000", "--name", "cut", "--trial", "a"], tmp_path, home
    )
    assert made.returncode == 0, made.stdout + made.stderr
    commands = {
        "eval": ["eval", str(run), "--episodes", "1"],
        "status": ["status", str(run)],
        "resume": ["launch", "--resume", str(run), "--steps", "3000"],
    }
    for name, readers in (
        ("config.json", ("eval", "status", "resume")),
        ("run.json", ("eval",)),
        ("status.json", ("status",)),
    ):
        whole = (run / name).read_text()
        _truncate(run / name)
        for reader in readers:
            result = surreal_cli(commands[reader], tmp_path, home)
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2 and len(lines) == 1, (name, reader, result.stderr)
            assert lines[0].startswith(f"Error: {run / name} is not valid JSON"), lines[0]
        (run / name).write_text(whole)


def _torch_loaded(pid: int) -> bool:
    """Whether process `pid` has mapped libtorch (the launch check imports torch)."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.integration
@pytest.mark.parametrize("moment", ["launch-check", "starting-processes"])
def test_ctrl_c_right_after_launch_ends_in_one_line(tmp_path, moment):
    """Ctrl-C while the launch check imports torch, and while the run's processes start: one
    line (`interrupted: ...`), exit 130, no traceback and no process of the run left."""
    home, run = tmp_path / "home", tmp_path / "runs" / "int" / "a"
    proc = start_launch(
        [*RUN, "--steps", "100000", "--name", "int", "--trial", "a"], tmp_path, home
    )
    try:
        if moment == "launch-check":
            wait_until(lambda: _torch_loaded(proc.pid), 60, "torch in the launcher", proc)
        else:
            wait_until(lambda: (run / "experiment.yaml").is_file(), 60, "the run's start", proc)
        ctrl_c(proc)
        out, _ = proc.communicate(timeout=scaled(120))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
    assert proc.returncode == 130, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert len([line for line in out.splitlines() if line.startswith("interrupted")]) == 1, out
    if moment == "launch-check":
        assert out.strip() == "interrupted: the run was not started (nothing runs)", out
    wait_until(lambda: not processes_of(run), 60, "every process of the run to end")
