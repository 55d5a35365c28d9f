"""A real single-host Slurm cluster for tests, started and stopped with scripts/slurm-{up,down}.sh."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from symphony.testing import scaled

ROOT = Path(__file__).resolve().parents[2]
UP, DOWN = ROOT / "scripts" / "slurm-up.sh", ROOT / "scripts" / "slurm-down.sh"
NEEDED = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel")


def _free_port_run(count: int) -> int:
    """A port p with p..p+count-1 all free on 127.0.0.1 (slurmctld, then one per slurmd)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        if base + count > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no run of free ports found")


class SlurmCluster:
    """One cluster in `state_dir`; `env` holds what clients need (SLURM_CONF)."""

    def __init__(self, state_dir: Path, nodes: int = 2) -> None:
        self.state_dir = state_dir
        self.script_env = {
            **os.environ,
            "SLURM_NODES": str(nodes),
            "SLURM_CTLD_PORT": str(_free_port_run(nodes + 1)),
        }
        self.env: dict[str, str] = {}

    def start(self) -> SlurmCluster:
        out = subprocess.run(
            ["bash", str(UP), str(self.state_dir)],
            env=self.script_env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
        )
        if out.returncode != 0:
            raise RuntimeError(f"slurm-up.sh failed:\n{out.stderr}")
        line = out.stdout.strip().splitlines()[-1]
        assert line.startswith("export SLURM_CONF="), out.stdout
        self.env = {"SLURM_CONF": line.split("=", 1)[1]}
        return self

    def stop(self) -> None:
        subprocess.run(
            ["bash", str(DOWN), str(self.state_dir)],
            env=self.script_env,
            capture_output=True,
            text=True,
            timeout=scaled(120),
            check=True,
        )

    def squeue_ids(self) -> list[str]:
        """Ids of every job the cluster still has queued or running."""
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i"],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        )
        return out.stdout.split()


def require_slurm() -> None:
    """Skip unless the Slurm and munge binaries are installed and we are root."""
    missing = [b for b in NEEDED if shutil.which(b) is None]
    if missing:
        pytest.skip(
            f"Slurm not installed ({missing}); run `bash scripts/install-system-deps.sh` as root"
        )
    if os.geteuid() != 0:
        pytest.skip("the test Slurm cluster needs root (slurmd starts jobs as their owner)")


def module_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A test module's two-node cluster (yield from it in a module-scoped fixture): SLURM_CONF,
    SYMPHONY_HOME and SYMPHONY_CONFIG set while it runs; stopped, its state gone, at the end."""
    require_slurm()
    base = tmp_path_factory.mktemp("slurm")
    cluster = SlurmCluster(base / "cluster").start()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", cluster.env["SLURM_CONF"])
        mp.setenv("SYMPHONY_HOME", str(base / "home"))
        mp.setenv("SYMPHONY_CONFIG", str(base / "no-config.yaml"))
        try:
            yield cluster
        finally:
            cluster.stop()
    assert not Path(cluster.env["SLURM_CONF"]).exists(), "slurm-down.sh left its state behind"
