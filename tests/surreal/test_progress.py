"""The progress line `surreal launch` prints: what each field shows."""

from __future__ import annotations

import pytest

from surreal.launch.progress import format_status

pytestmark = pytest.mark.timeout(30)


def _buffer_field(status: dict) -> str:
    return format_status({"global_step": 1000, **status}, 3.0, 10_000).rsplit("| buffer ", 1)[1]


def test_replay_shards_show_the_transitions_they_hold_not_a_fraction_of_their_capacity():
    # DDPG: each shard reports its fill as a fraction of a 1M capacity (0.0015 would print "0")
    status = {
        "buffer/fill": 0.0015,
        "buffer/shard0_size": 1500,
        "buffer/shard1_size": 1200,
        "buffer/shard0_added": 1500,
        "buffer/shard1_added": 1200,
    }
    assert _buffer_field(status) == "2,700"


def test_the_fifo_buffer_shows_its_segment_count_and_a_missing_one_a_dash():
    assert _buffer_field({"buffer/fill": 3.0}) == "3"
    assert _buffer_field({}) == "-"


def test_a_replay_shard_reports_the_size_the_progress_line_sums():
    import numpy as np

    from surreal.runtime.processes.replay_shard import ReplayShard, _report_loop

    shard = ReplayShard(capacity=1_000_000, start=10, index=1)
    n = 8
    shard.add(
        {
            "obs": np.zeros((n, 3), np.float32),
            "next_obs": np.zeros((n, 3), np.float32),
            "act": np.zeros((n, 1), np.float32),
            "rew": np.zeros(n, np.float32),
            "discount": np.ones(n, np.float32),
        }
    )
    reports: list[dict] = []

    class Comp:
        def report(self, step: int, scalars: dict) -> None:
            reports.append(scalars)
            shard.stopped.set()  # one report is enough

    _report_loop(Comp(), shard, every_s=0.01)
    assert reports[0]["buffer/shard1_size"] == n
    assert _buffer_field(reports[0]) == "8"
