"""bench/learner_step.py at one round: eager vs compiled learner steps (PPO MLP, TD3, PPO
conv+LSTM), as a user runs it.

No timing is asserted (the numbers and the PASS/FAIL of the goal belong to the benchmark); what
is checked is that the harness works: it exits 0, its header states the machine and the single
torch thread, every row is printed with its columns, the compiled step stayed compiled, and the
JSON holds one sample per mode and row.
"""

from __future__ import annotations

import json

import pytest

from symphony.testing import scaled
from tests import benches

_bench = benches.load("learner_step")
ROWS = _bench.ROWS  # the rows the bench is to print


@pytest.mark.integration
@pytest.mark.timeout(420)  # cold-ish compiles on the loaded 2-core machine
def test_the_quick_bench_prints_an_eager_and_compiled_row_per_step(tmp_path):
    done, lines = benches.run_quick("learner_step", tmp_path, timeout=scaled(400))
    assert lines[0].startswith("cores ") and "load average before" in lines[0], lines[0]
    assert "1 torch thread" in lines[0] and "rounds 1" in lines[0], lines[0]
    header = next(line for line in lines if line.startswith("| step |"))
    columns = [cell.strip() for cell in header.strip("|").split("|")]
    assert columns[1:4] == ["eager samples/CPU-s", "compiled samples/CPU-s", "compiled / eager"]
    assert columns[-1] == f"goal >= {_bench.GOAL}x"
    rows = {name: line for line in lines for name in ROWS if line.startswith(f"| {name} |")}
    assert list(rows) == list(ROWS), done.stdout
    for name, line in rows.items():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(columns), line
        assert cells[3].endswith("x") and float(cells[3][:-1]) > 0, line
        goal = cells[-1]
        assert goal in ("PASS", "FAIL") if name == _bench.GOAL_ROW else goal == "-", line
    assert (tmp_path / "learner_step.md").read_text().splitlines() == lines

    raw = json.loads((tmp_path / "learner_step.json").read_text())
    assert raw["rounds"] == 1 and raw["goal"] == _bench.GOAL
    assert [row["step"] for row in raw["rows"]] == list(ROWS)
    for row in raw["rows"]:
        assert len(row["eager"]) == 1 and len(row["compiled"]) == 1, row
        assert row["still_compiled"] is True, row
        assert row["first_s_compiled"] > 0 and row["first_s_eager"] > 0, row
    assert not (tmp_path / "learner_step.png").exists()  # --no-plot
