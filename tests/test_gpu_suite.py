"""bench/gpu_suite.py --dry-run: issue 47's GPU suite with its whole logic on a CPU ("cuda"
replaced by "cpu", tiny runs and windows), as a user runs it before the GPU machine does.

No timing is asserted (the numbers and goals belong to the GPU run, and the dry run keeps to its
own budget); what is checked is what a reader of the table relies on: it exits 0, its header
states the machine, the torch threads of both columns and the load before and after, and says
that the cuda column ran on the CPU; each of the issue's 5 row groups is there with a cuda and a
cpu column whose cells hold a positive number (a return: any; a count: >= 0) or say why
not, never a failure; and the JSON holds the same rows.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from importlib.util import find_spec

import pytest

from symphony.testing import scaled
from tests import benches

COLUMNS = ["#", "row", "unit", "cuda", "cpu", "cuda / cpu", "goal"]
WHY_NOT = ("not measured: ", "not reached in ")
GROUPS = {
    "1": ("PPO update step", "eager", "compiled", "CUDA graphs", "the best mode"),
    "2": ("run.preset=gpu", "training env steps/s", "greedy eval return", "first eval >= 5,000"),
    "3": ("TD3 update step", "SAC update step", "CUDA graphs", "`surreal launch sac`"),
    "4": ("ppo-vision, robosuite:Lift 84x84 camera", "1 policy worker"),
    "5": ("segments per actor", "restarts"),
}
"""Words each row group's rows say: the issue's rows, named."""
ROBOSUITE = find_spec("robosuite") is not None


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _check(text: str, unit: str) -> None:
    """A cuda or cpu cell: a number fit for its unit, or the reason it has none."""
    assert not text.startswith("failed"), text  # a dry run that fails is a bug
    if text.startswith(WHY_NOT):
        assert len(text) > len("not measured: "), text
        if "robosuite not installed" in text:
            assert not ROBOSUITE, text
        return
    number = float(text.split()[0].replace(",", ""))
    assert math.isfinite(number), text
    if unit in ("restarts", "segments"):  # counts: 0 is a result
        assert number >= 0, text
    elif unit != "return":
        assert number > 0, text


@pytest.mark.integration
@pytest.mark.timeout(300)  # a guard: the dry run ends its phases within its own ~100 s budget
def test_the_dry_run_writes_every_row_group_with_a_cuda_and_a_cpu_column(tmp_path):
    done = subprocess.run(
        [sys.executable, str(benches.BENCH / "gpu_suite.py"), "--dry-run", "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=scaled(280),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = (tmp_path / "gpu_suite.md").read_text().splitlines()
    header = lines[0]
    assert header.startswith("cores ") and "load average before" in header, header
    assert ", after " in header and "python " in header, header
    assert re.search(r"torch threads \d+ \(cuda column\) and 1 \(cpu column\)", header), header
    assert "DRY RUN: the cuda column ran on the CPU" in header, header
    table = [line for line in lines if line.startswith("|")]
    assert _cells(table[0]) == COLUMNS and set(table[1]) <= set("|-: "), table[:2]
    rows = [_cells(line) for line in table[2:]]
    assert sorted({row[0] for row in rows}) == sorted(GROUPS), rows
    for group, words in GROUPS.items():
        said = " ".join(row[1] for row in rows if row[0] == group)
        assert all(word in said for word in words), (group, said)
    for row in rows:
        assert len(row) == len(COLUMNS), row
        for text in row[3:5]:
            _check(text, row[2])
    if not ROBOSUITE:  # the camera rows then say why they have no numbers, in both columns
        assert all("robosuite not installed" in c for r in rows if r[0] == "4" for c in r[3:5])

    raw = json.loads((tmp_path / "gpu_suite.json").read_text())
    assert raw["dry_run"] is True and raw["plan"]["gpu"] == "cpu"
    assert {"cores", "load_before", "load_after", "python"} <= set(raw)
    got = [
        [str(r["group"]), r["row"], r["unit"], r["cuda"]["cell"], r["cpu"]["cell"], r["ratio"]]
        + [r["goal"]]
        for r in raw["rows"]
    ]
    assert got == rows
    for r in raw["rows"]:
        for side in ("cuda", "cpu"):
            value, text = r[side]["value"], r[side]["cell"]
            assert (value is None) == text.startswith(WHY_NOT), r
