"""bench/errors.py at one round: every bad input through the real CLI, next to `surreal --help`.

No timing is asserted (the seconds belong to the benchmark, its PASS/FAIL column is not read
here); what is checked is that the harness works: it exits 0, prints a row per input, each run
gave its one-line outcome (1/1), and the JSON holds one sample per row.
"""

from __future__ import annotations

import json

import pytest

from symphony.testing import scaled
from tests import benches

_bench = benches.load("errors")
CASES = _bench.CASES  # the rows the bench is to print


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_quick_bench_prints_a_one_line_error_row_per_bad_input(tmp_path):
    done, lines = benches.run_quick("errors", tmp_path, timeout=scaled(280))
    assert lines[0].startswith("cores ") and "load average before" in lines[0], lines[0]
    assert "| exit-2 one-line ok (k/N) |" in done.stdout
    rows = {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}
    for name in CASES:
        assert name in rows, (name, done.stdout)
        cells = [cell.strip() for cell in rows[name].strip("|").split("|")]
        assert cells[4] == "1/1", rows[name]
        assert cells[5] in ("PASS", "FAIL"), rows[name]
    assert "not the expected one-line outcome" not in done.stdout
    assert (tmp_path / "errors.md").read_text().splitlines() == lines

    raw = json.loads((tmp_path / "errors.json").read_text())
    assert raw["rounds"] == 1
    assert [row["input"] for row in raw["rows"]] == list(CASES)
    for row in raw["rows"]:
        assert len(row["samples"]) == 1 and len(row["baseline"]) == 1, row
        assert row["failures"] == [], row
    assert len(raw["baseline"]) == len(CASES)
    assert not (tmp_path / "errors.png").exists()  # --no-plot
