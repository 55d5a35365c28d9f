"""bench/startup.py at one round: one launch with the fork server, one with Popen.

No timing is asserted (the seconds and the PASS/FAIL columns belong to the benchmark); what is
checked is that the harness works: it exits 0 (each launch reached its first batch, stopped with
Ctrl-C and left no process), prints a row per start-up and a row per process with a figure for
each start-up (the fork server's own row only under it), and the JSON holds one launch each.
"""

from __future__ import annotations

import json

import pytest

from symphony.testing import scaled
from tests import benches

pytest.importorskip("gymnasium")

_bench = benches.load("startup")
MODES = list(_bench.MODES)


@pytest.mark.integration
@pytest.mark.timeout(900)
def test_the_quick_bench_prints_both_start_ups_and_every_process(tmp_path):
    done, lines = benches.run_quick("startup", tmp_path, timeout=scaled(880))
    assert lines[0].startswith("cores ") and "load average before" in lines[0], lines[0]
    assert "surreal launch ppo --env gym:CartPole-v1 --actors 2" in lines[0]
    header = benches.cells(lines[2])
    assert header[:3] == ["start-up", "first batch s", "<= 12 s"] and "actor PSS MB" in header
    rows = {benches.cells(line)[0]: benches.cells(line) for line in lines if line.startswith("| ")}
    for mode in MODES:
        row = rows[mode]
        assert len(row) == len(header) and row[-1] == "1/1", row
        assert row[2] in ("PASS", "FAIL") and row[header.index("<= 120 MB")] in ("PASS", "FAIL")
    for process in ("launcher", "supervisor", "metrics", "buffer", "param-server", "learner"):
        assert all(cell != "-" for cell in rows[process][1:]), rows[process]
    assert rows["actor"][1] != "-" and rows["evaluator"][1] != "-"
    assert rows["fork-server"][1:] == [rows["fork-server"][1], "-"]  # only with the fork server
    assert "failed launches" not in done.stdout
    assert (tmp_path / "startup.md").read_text().splitlines() == lines

    raw = json.loads((tmp_path / "startup.json").read_text())
    assert raw["rounds"] == 1 and sorted(s["mode"] for s in raw["samples"]) == sorted(MODES)
    for sample in raw["samples"]:
        assert sample["wrong"] is None and sample["first_batch_s"] > 0, sample
        names = [p["name"] for p in sample["processes"]]
        assert names.count("actor-0") == names.count("actor-1") == 1, names
    assert not (tmp_path / "startup.png").exists()  # --no-plot
