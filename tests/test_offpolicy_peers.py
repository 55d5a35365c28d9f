"""bench/offpolicy_peers.py and the CleanRL peer files it runs: a long run stops with a checkpoint
and goes on where it stopped, and a sitting puts both systems in one table."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from symphony.testing import scaled

pytest.importorskip("torch")
pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[1]
PEERS = ROOT / "bench" / "peers"


def _records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.mark.timeout(300)
@pytest.mark.integration  # ~20 s each: torch and MuJoCo in two processes
@pytest.mark.parametrize("algo", ["td3", "sac"])
def test_a_cleanrl_file_stopped_by_sigint_saves_and_resumes_where_it_stopped(tmp_path, algo):
    ckpt = tmp_path / "state.pt"
    args = [sys.executable, str(PEERS / f"cleanrl_{algo}.py"), "--total-timesteps", "900"]
    args += ["--learning-starts", "300", "--checkpoint", str(ckpt), "--seconds", "600"]
    args += ["--eval-episodes", "2", "--checkpoint-every", "100000"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    seen = []
    for line in proc.stdout:  # stop it once it is learning (its first line past 300 steps)
        seen.append(json.loads(line))
        if seen[-1].get("step", 0) > 400 and "event" not in seen[-1]:
            proc.send_signal(signal.SIGINT)
            break
    rest, _ = proc.communicate(timeout=scaled(120))
    assert proc.returncode == 0
    ends = _records(rest)
    stopped = [r for r in ends if r.get("event") == "stopped"]
    assert stopped and any(r.get("event") == "saved" for r in ends), ends
    at = stopped[0]["step"]
    assert 400 < at < 900 and not any("eval" in r for r in ends)  # stopped, not finished
    with_replay = ckpt.with_name(ckpt.name + ".npz")
    assert ckpt.is_file() and with_replay.is_file()
    again = subprocess.run(args, capture_output=True, text=True, env=env, timeout=scaled(240))
    assert again.returncode == 0, again.stderr[-2000:]
    records = _records(again.stdout)
    assert records[0] == {"t": records[0]["t"], "step": at, "event": "resumed"}
    assert max(r.get("step", 0) for r in records) == 900
    (result,) = [r for r in records if "eval" in r]
    assert result["episodes"] == 2 and result["eval"] == result["eval"]  # a number, not NaN


@pytest.mark.timeout(900)
@pytest.mark.integration
def test_a_sitting_runs_surreal_and_cleanrl_side_by_side_and_reports_both(tmp_path):
    env = dict(os.environ, SYMPHONY_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    cmd = [sys.executable, str(ROOT / "bench" / "offpolicy_peers.py"), "--algo", "td3"]
    cmd += ["--steps", "1500", "--folder", str(tmp_path / "runs"), "--out", str(tmp_path)]
    cmd += ["--set", "algo.replay_start=500", "--eval-episodes", "2"]
    first = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(600)
    )
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    rows = _rows(tmp_path)
    assert set(rows) == {("surreal", "1,500"), ("cleanrl", "1,500")}, rows
    for (system, _), cells in rows.items():
        assert int(cells[5].replace(",", "")) >= 1500, (system, cells)  # the budget, both
        float(cells[6].replace(",", ""))  # a greedy evaluation at the end ("-" before one)
        assert cells[9] == "1", cells  # one sitting
    sittings_file = tmp_path / "runs" / "sittings.jsonl"
    sittings = [json.loads(x) for x in sittings_file.read_text().splitlines()]
    assert {s["system"] for s in sittings} == {"surreal", "cleanrl"}
    assert all(s["code"] == 0 and s["end"] > s["start"] and s["load"] for s in sittings)
    assert (tmp_path / "offpolicy_peers_td3_HalfCheetah-v5_s1.png").is_file()  # one per seed
    (summary,) = [
        x
        for x in (tmp_path / "offpolicy_peers.md").read_text().splitlines()
        if x.startswith("| td3 | HalfCheetah-v5 | 1,500 | 1 |")
    ]
    assert summary.endswith("x |"), summary  # the mean over seeds of both, and their ratio
    # --eval-episodes: both systems' evaluation at the end, and the table says so
    assert "greedy eval at the end (2 episodes)" in (tmp_path / "offpolicy_peers.md").read_text()
    surreal_eval = tmp_path / "runs" / "td3-halfcheetah-v5" / "s1" / "final_eval.json"
    assert json.loads(surreal_eval.read_text())["episodes"] == 2
    # both finished: the same command starts neither again and adds no sitting
    again = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(300)
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.count("finished before, kept") == 2
    assert len(sittings_file.read_text().splitlines()) == len(sittings)
    # a larger budget goes on from the end of the first (300k, then 1M): a row for each budget
    cmd[cmd.index("1500")] = "2000"
    longer = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(600)
    )
    assert longer.returncode == 0, longer.stdout[-2000:] + longer.stderr[-2000:]
    rows = _rows(tmp_path)
    assert set(rows) == {(s, b) for s in ("surreal", "cleanrl") for b in ("1,500", "2,000")}
    for system in ("surreal", "cleanrl"):
        first, second = rows[system, "1,500"], rows[system, "2,000"]
        assert int(second[5].replace(",", "")) >= 2000 and second[9] == "2", second
        assert float(second[8]) > float(first[8])  # wall time sums both sittings
    peer = (tmp_path / "runs" / "cleanrl-td3-halfcheetah-v5" / "s1" / "progress.jsonl").read_text()
    assert '"step": 1500, "event": "resumed"' in peer


def _rows(tmp_path: Path) -> dict[tuple[str, str], list[str]]:
    """The report's td3 rows by (system, budget)."""
    rows = {}
    for line in (tmp_path / "offpolicy_peers.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[:3] == ["td3", "HalfCheetah-v5", "1"]:
            rows[cells[3], cells[4]] = cells
    return rows
