"""Optional per-peer virtual environments, created with uv under bench/out/venvs (gitignored).

Each peer (Sample Factory, RLlib) gets its own venv so its pins never touch the project's.
torch is excluded from the peer's resolution and taken from the project venv through a `.pth`
file placed *after* the venv's own site-packages: the peer runs on the same torch build (same
threads, same kernels) as surreal, and nothing CUDA-sized is downloaded. Packages the peer pins
(e.g. an older gymnasium) are installed in its venv and shadow the project's.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

VENVS = Path(__file__).resolve().parents[1] / "out" / "venvs"
PEERS: dict[str, list[str]] = {
    "sample-factory": ["sample-factory==2.1.1"],
    "rllib": ["ray[rllib]==2.60.0"],
}
EXCLUDED = ["torch", "triton"]


class PeerUnavailable(RuntimeError):
    """The peer's venv could not be created here; the message says why (shown in the table)."""


def uv() -> str:
    """The uv executable beside this interpreter, or on PATH."""
    local = Path(sys.executable).with_name("uv")
    found = str(local) if local.exists() else shutil.which("uv")
    if not found:
        raise PeerUnavailable("uv not found (install it into the project venv: pip install uv)")
    return found


def ensure(peer: str, timeout: float = 900.0) -> Path:
    """The python of `peer`'s venv, creating it (once) with uv; raises PeerUnavailable."""
    root = VENVS / peer
    python = root / "bin" / "python"
    done = root / ".installed"
    if done.exists() and done.read_text() == " ".join(PEERS[peer]):
        return python
    VENVS.mkdir(parents=True, exist_ok=True)
    excludes = VENVS / "excludes.txt"
    excludes.write_text("\n".join(EXCLUDED) + "\n")
    steps = [
        [uv(), "venv", "--quiet", "--python", sys.executable, str(root)],
        [uv(), "pip", "install", "--quiet", "--python", str(python), "--excludes", str(excludes)]
        + PEERS[peer],
    ]
    for cmd in steps:
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PeerUnavailable(f"installing {peer} took over {timeout:.0f} s") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["?"])[-1]
            raise PeerUnavailable(f"uv failed for {peer}: {last[:160]}")
    site = next((root / "lib").glob("python*/site-packages"))
    # after the venv's own packages ("zz" sorts last): the project's torch, mujoco, gymnasium
    (site / "zz_project_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    done.write_text(" ".join(PEERS[peer]))
    return python
