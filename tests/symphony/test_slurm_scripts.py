"""scripts/slurm-up.sh and slurm-down.sh with two clusters on one host: ports and munge stay apart."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from symphony.testing import scaled
from tests.symphony.slurm_cluster import DOWN, UP, SlurmCluster, require_slurm

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(200)]


def _script(path: Path, state: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("SLURM_CTLD_PORT", "SLURM_CONF")}
    return subprocess.run(
        ["bash", str(path), str(state)],
        env={**clean, "SLURM_NODES": "1", **env},
        capture_output=True,
        text=True,
        timeout=scaled(120),
    )


def _sinfo(conf: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"],
        env={**os.environ, "SLURM_CONF": conf},
        capture_output=True,
        text=True,
        timeout=30,
    )


def _munged_alive(state: Path) -> bool:
    pid = (state / "munge" / "munged.pid").read_text().strip()
    return Path(f"/proc/{pid}").exists()


def test_two_clusters_on_one_host_keep_their_ports_and_munge_apart(tmp_path):
    require_slurm()
    first = SlurmCluster(tmp_path / "first", nodes=1).start()
    second_state = tmp_path / "second"
    try:
        port = first.script_env["SLURM_CTLD_PORT"]
        taken = _script(UP, second_state, SLURM_CTLD_PORT=port)
        assert taken.returncode != 0 and "export" not in taken.stdout
        assert f"port {port}" in taken.stderr and "in use" in taken.stderr

        started = _script(UP, second_state)  # no port given: it picks free ones
        assert started.returncode == 0, started.stderr
        conf = started.stdout.strip().split("=", 1)[1]
        text = Path(conf).read_text()
        assert f"SlurmctldPort={port}\n" not in text
        assert f"AuthInfo=socket={second_state}/munge/munge.socket" in text
        assert _sinfo(conf).stdout.split() == ["n1", "idle"]
        assert _munged_alive(first.state_dir) and _munged_alive(second_state)

        stopped = _script(DOWN, second_state)
        assert stopped.returncode == 0, stopped.stderr
        assert _munged_alive(first.state_dir)  # the other cluster's munged is untouched
        assert _sinfo(first.env["SLURM_CONF"]).stdout.split() == ["n1", "idle"]
    finally:
        _script(DOWN, second_state)
        first.stop()
    assert not first.state_dir.exists() and not second_state.exists()
