"""What the one-table benchmarks (bench/errors.py, bench/startup.py) share: their command line
(`--rounds`, `--quick`, `--out`, `--no-plot`), the machine line that heads each table (cores,
load average before and after, rounds, python) and the three files they write (NAME.md, NAME.json
and, with matplotlib, NAME.png)."""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "out"


def loads(avg: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in avg)


@dataclass
class Run:
    """One benchmark run: its rounds, where it writes, and the machine's load around it."""

    name: str
    rounds: int
    md: Path
    plot: bool
    load_before: tuple[float, float, float] = field(default_factory=os.getloadavg)
    load_after: tuple[float, float, float] | None = None

    def measured(self) -> None:
        """Note the load at the end of the measurement."""
        self.load_after = os.getloadavg()

    def header(self, *extra: str) -> str:
        after = self.load_after or os.getloadavg()
        parts = [
            f"cores {os.cpu_count()}, load average before {loads(self.load_before)}, after "
            f"{loads(after)}, rounds {self.rounds}, python {platform.python_version()}",
            *extra,
        ]
        return ", ".join(parts)

    def publish(self, lines: list[str], raw: dict[str, Any], plot: Callable | None) -> None:
        """Print the table, write NAME.md, NAME.json (the machine's facts and `raw`) and,
        unless --no-plot or without matplotlib, NAME.png drawn by `plot(path)`."""
        print("\n".join(lines))
        self.md.write_text("\n".join(lines) + "\n")
        facts = {
            "cores": os.cpu_count(),
            "load_before": self.load_before,
            "load_after": self.load_after,
            "rounds": self.rounds,
            "python": platform.python_version(),
        }
        self.md.with_suffix(".json").write_text(json.dumps({**facts, **raw}, indent=1) + "\n")
        if plot is not None and self.plot:
            plot(self.md.with_suffix(".png"))


def start(name: str, doc: str) -> Run:
    """Parse the shared command line of bench/NAME.py; the load is read now."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default: 5)")
    parser.add_argument("--quick", action="store_true", help="one round (for the test)")
    parser.add_argument(
        "--out",
        type=Path,
        default=OUT / f"{name}.md",
        help=f"the markdown file, or a folder for {name}.md/.json/.png "
        f"(default: bench/out/{name}.md)",
    )
    parser.add_argument("--no-plot", action="store_true", help=f"no {name}.png")
    args = parser.parse_args()
    md = args.out if args.out.suffix == ".md" else args.out / f"{name}.md"
    md.parent.mkdir(parents=True, exist_ok=True)
    return Run(name, 1 if args.quick else args.rounds, md, not args.no_plot)
