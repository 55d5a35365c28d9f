"""bench/scale.py at CI size: the real PPO servers under 4 and 32 stand-in actors, end to end.

No timing is asserted (the numbers belong to the benchmark); what is checked is that the harness
works: segments reached the buffer, the learner updated, parameter fetches were answered, metrics
rows arrived, nothing failed, and the table was printed.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.testing import scaled

pytest.importorskip("torch")
pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[1]
SCALE = ROOT / "bench" / "scale.py"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_quick_sweep_moves_segments_updates_and_parameters_and_prints_its_table(tmp_path):
    env = dict(os.environ, SYMPHONY_HOME=str(tmp_path / "home"))
    done = subprocess.run(
        [
            sys.executable,
            str(SCALE),
            "--quick",
            "--sections",
            "ppo",
            "--no-plot",
            "--out",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=scaled(840),
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    assert "into buffer/s" in out and "fetch p99 ms" in out  # the throughput table
    assert "buffer RSS MiB / fds / cores" in out  # the per-server table
    assert "load average" in out and "checks (phase paced:1)" in out
    for n in (4, 32):
        assert any(line.split()[:2] == [str(n), "paced:1"] for line in out.splitlines())
    results = json.loads((tmp_path / "scale.json").read_text())
    rows = {row["key"]: row for row in results["ppo"]}
    assert sorted(rows) == [4, 32]
    for n, row in rows.items():
        for w in row["windows"]:
            assert w["segments_s"] > 0, (n, w)  # the buffer took segments
            assert w["updates_s"] > 0, (n, w)  # the learner updated
            assert w["fetch_s"] > 0 and math.isfinite(w["p99_ms"]), (n, w)  # fetches answered
            assert w["rows_s"] > 0, (n, w)  # the metrics sink got reports
            assert w["errors"] == 0 and w["invalid"] == 0, (n, w)
            assert set(w["rss"]) == {"buffer", "learner", "param-server", "metrics"}
    assert (tmp_path / "scale.md").read_text().count("| paced:1 |") >= 2
