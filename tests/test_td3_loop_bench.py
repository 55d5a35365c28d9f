"""bench/td3_loop.py at its quick size: one HalfCheetah seed of surreal's single-process TD3 loop.

What a user relies on: the run takes one update per env step after the random warm-up, its
evaluations and final 10-episode evaluation land in the seed's file as they come, and the table
(printed and in td3_loop.md) reads them back, `--report` alone included. No return is asserted:
1,200 steps learn nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from symphony.testing import scaled
from tests import benches

pytest.importorskip("mujoco")

_bench = benches.load("td3_loop")


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_quick_loop_writes_its_evaluations_and_the_table_reads_them(tmp_path):
    done, lines = benches.run_quick("td3_loop", tmp_path, timeout=scaled(280))
    rows = [json.loads(line) for line in (tmp_path / "s1.jsonl").read_text().splitlines()]
    assert [r["global_step"] for r in rows if "charts/eval_return" in r] == [600, 1200]
    final = rows[-1]
    # the 1,000 random steps fill the replay; from the 1,000th transition one update per step
    assert final["episodes"] == _bench.FINAL_EPISODES and final["env_steps"] == 1200
    assert final["updates"] == 201 and "losses/qf_loss" in rows[-2]
    table = [benches.cells(line) for line in lines if line.startswith("| 1 ")]
    assert len(table) == 1 and table[0][1] == "1,200", lines
    assert table[0][3] == f"{final['final_eval']:,.0f}" and table[0][4] == "-"  # not 300k
    start = next(i for i, line in enumerate(lines) if line.startswith("surreal's single-process"))
    shown = lines[start : start + 5]
    assert (tmp_path / "td3_loop.md").read_text().splitlines() == shown
    again = subprocess.run(
        [sys.executable, str(benches.BENCH / "td3_loop.py"), "--report", "--no-plot"]
        + ["--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=scaled(60),
    )
    assert again.returncode == 0 and again.stdout.splitlines() == shown, again.stderr
