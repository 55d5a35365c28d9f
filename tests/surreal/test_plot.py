"""`surreal plot`: the training and eval returns of several runs, against steps and wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from surreal.launch import experiment as launching
from surreal.monitoring.plot import pyplot, returns_figure
from surreal.testing import surreal_cli

pytestmark = pytest.mark.timeout(120)


def fake_run(tmp_path: Path, trial: str, slope: float, seconds_per_step: float) -> Path:
    """A run folder whose metrics.jsonl holds episodes and evaluations of a learning run."""
    plan = launching.plan("ppo", env="gym:CartPole-v1", folder=str(tmp_path / "runs"), trial=trial)
    launching.create_run(plan)
    start, lines = 1_000_000.0, []
    for step in range(0, 10_000, 500):
        when = start + step * seconds_per_step
        for name in ("charts/episodic_return", "charts/eval_return"):
            record = {"step": step, "name": name, "value": slope * step, "time": when}
            lines.append(json.dumps(record))
    (plan.run_dir.path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return plan.run_dir.path


def test_both_runs_are_drawn_against_steps_and_against_wall_time(tmp_path):
    fast = fake_run(tmp_path, "t1", slope=0.05, seconds_per_step=0.01)
    slow = fake_run(tmp_path, "t2", slope=0.02, seconds_per_step=0.03)
    fig, drawn = returns_figure([fast, slow], ["fast", "slow"])
    try:
        assert drawn == ["fast", "slow"]
        axes = fig.axes
        assert [ax.get_xlabel() for ax in axes] == [
            "global step (env steps)",
            "wall time (minutes)",
        ] * 2
        for ax in axes:
            assert [line.get_label() for line in ax.lines] == ["fast", "slow"]
        eval_time = axes[3].lines[1]  # eval return of `slow` against wall time
        assert list(eval_time.get_ydata()) == [0.02 * s for s in range(0, 10_000, 500)]
        assert eval_time.get_xdata()[-1] == pytest.approx(9_500 * 0.03 / 60)
        train_steps = axes[0].lines[0]  # training return: a running mean of SMOOTH episodes
        assert train_steps.get_ydata()[1] == pytest.approx(0.05 * 500 / 2)
    finally:
        pyplot().close(fig)


def test_surreal_plot_writes_one_png_of_two_runs(tmp_path):
    fake_run(tmp_path, "t1", slope=0.05, seconds_per_step=0.01)
    fake_run(tmp_path, "t2", slope=0.02, seconds_per_step=0.03)
    runs = ["runs/ppo-cartpole-v1/t1", "runs/ppo-cartpole-v1/t2"]
    out = surreal_cli(["plot", *runs, "-o", "curves.png"], tmp_path, tmp_path / "home", 60)
    assert out.returncode == 0, out.stderr
    assert "wrote curves.png: training return, eval return of 2 run(s)" in out.stdout
    assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_surreal_plot_of_a_run_without_metrics_is_a_usage_error(tmp_path):
    plan = launching.plan("ppo", env="gym:CartPole-v1", folder=str(tmp_path / "runs"))
    launching.create_run(plan)
    out = surreal_cli(["plot", str(plan.run_dir.path)], tmp_path, tmp_path / "home", 60)
    assert out.returncode == 2 and "no metrics.jsonl" in out.stderr
    assert not (tmp_path / "curves.png").exists()
