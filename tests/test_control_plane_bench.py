"""bench/control_plane.py at one round: each dry run at 1,024 and at 16, through the real CLIs.

No timing is asserted (the seconds and PASS/FAIL belong to the benchmark); what is checked is
that the harness works and measures what it says: it exits 0 (every dry run made its objects or
scripts), prints a row per dry run with both sizes, the kube rows stay under the size goal with
no Service per actor, and the JSON holds one run of each.
"""

from __future__ import annotations

import json

import pytest

from symphony.testing import scaled
from tests import benches

pytest.importorskip("mujoco")
_bench = benches.load("control_plane")


@pytest.mark.integration
@pytest.mark.timeout(600)
def test_the_quick_bench_runs_every_dry_run_at_both_sizes(tmp_path):
    done, lines = benches.run_quick("control_plane", tmp_path, timeout=scaled(580))
    assert lines[0].startswith("cores ") and "load average before" in lines[0], lines[0]
    header = benches.cells(lines[2])
    assert header[:3] == ["dry run", "s at 1,024", "<= 10 s"], header
    rows = {
        benches.cells(line)[0]: benches.cells(line) for line in lines[4:] if line.startswith("| ")
    }
    assert list(rows) == list(_bench.ROWS)
    for name, row in rows.items():
        assert row[-1] == "2/2" and row[2] in ("PASS", "FAIL"), row
        if name.endswith("kube"):
            assert row[header.index("<= 2 MB")] == "PASS", row
    assert "did not make what they should" not in done.stdout

    raw = json.loads((tmp_path / "control_plane.json").read_text())
    assert raw["rounds"] == 1 and [r["row"] for r in raw["rows"]] == list(_bench.ROWS)
    for row in raw["rows"]:
        (big,), (small,) = row["at_n"], row["at_base"]
        assert big["wrong"] is None and small["wrong"] is None, row
        if row["row"].endswith("kube"):
            assert big["services"] <= small["services"] + 1  # none per actor
            assert big["objects"] > 100 > small["objects"]
