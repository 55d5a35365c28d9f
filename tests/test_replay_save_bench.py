"""bench/replay_save.py at one round: 1M HalfCheetah-sized transitions saved and loaded as a
replay shard does it, beside np.save/np.load of the same arrays.

No timing is asserted (the seconds belong to the benchmark); what is checked is that the harness
works: it exits 0 (the part it wrote loaded back whole: 1M transitions, checksum and schema
passed), prints the machine line and a row per operation, and says how large the part is on disk
(the arrays themselves: 168 MB, as large as np.save's files).
"""

from __future__ import annotations

import json

import pytest

from symphony.testing import scaled
from tests import benches


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_quick_bench_saves_and_loads_a_million_transitions(tmp_path):
    done, lines = benches.run_quick("replay_save", tmp_path, timeout=scaled(280))
    assert lines[0].startswith("cores ") and "load average before" in lines[0], lines[0]
    rows = [line for line in lines if line.startswith("| surreal") or line.startswith("| base")]
    assert len(rows) == 5, done.stdout
    raw = json.loads((tmp_path / "replay_save.json").read_text())
    assert raw["rounds"] == 1 and all(len(s) == 1 for s in raw["samples"].values())
    assert 160 < raw["size_mb"]["surreal"] < 1.01 * raw["size_mb"]["plain"]
    assert not list(tmp_path.glob("surreal-replay-save-*"))  # its folder is removed
