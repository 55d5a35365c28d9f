"""Running a bench/ script from a test: its module (for the rows it is to print) and its quick
round (`--quick --no-plot --out TMP`), as a user runs it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str) -> ModuleType:
    """bench/NAME.py as a module (bench/ on sys.path, as when it runs as a script)."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_quick(name: str, out: Path, timeout: float) -> tuple[subprocess.CompletedProcess, list]:
    """`python bench/NAME.py --quick --no-plot --out OUT` in OUT; it and its stdout's lines."""
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{name}.py"), "--quick", "--no-plot", "--out", str(out)],
        cwd=out,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done, done.stdout.splitlines()


def cells(line: str) -> list[str]:
    """The cells of one row of a bench's markdown table, stripped."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]
