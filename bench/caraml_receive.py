"""caraml's receive path against raw pyzmq: CPU and rate of receiving large arrays over ipc.

One sender process streams uint8 arrays to this process, alternating rounds between a caraml
``Puller.pull`` and raw pyzmq ``recv(copy=False)`` + ``np.frombuffer`` (``caraml.testing.
receive_cost``). CPU is ``time.process_time`` of this process (every thread: libzmq's I/O thread
does the copying), per message; ratios are paired per round, then the median and range.

    .venv/bin/python bench/caraml_receive.py [--rounds 7] [--sizes 1,16]   (sizes in MiB)

Also run as a cell of ``bench/caraml_bench.py`` (``--only receive``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from caraml.testing import receive_cost  # noqa: E402


def _mid(xs: list[float]) -> str:
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def receive_rows(sizes_mib: list[int], rounds: int) -> list[dict]:
    """One row per size: CPU us per message and MB/s of both paths, paired ratios."""
    rows = []
    for mib in sizes_mib:
        size = mib << 20
        count = max(4, 64 // mib)
        load0 = os.getloadavg()[0]
        cost = receive_cost(size, count=count, rounds=rounds)
        c, r = cost["caraml"], cost["raw"]
        rows.append(
            {
                "size_mib": mib,
                "messages_per_round": count,
                "caraml_cpu_us": statistics.median(c["cpu"]) * 1e6,
                "raw_cpu_us": statistics.median(r["cpu"]) * 1e6,
                "cpu_ratio": [a / b for a, b in zip(c["cpu"], r["cpu"], strict=True)],
                "caraml_mb_s": statistics.median(size / w / 1e6 for w in c["wall"]),
                "raw_mb_s": statistics.median(size / w / 1e6 for w in r["wall"]),
                "rate_ratio": [b / a for a, b in zip(c["wall"], r["wall"], strict=True)],
                "load": (load0, os.getloadavg()[0]),
            }
        )
    return rows


def receive_table(rows: list[dict], rounds: int) -> str:
    """The table: CPU per message (goal <= 1.5x raw) and rate (goal >= 0.9 of raw at 16 MiB)."""
    lines = [
        f"receive path over ipc, {rounds} alternating rounds (median, min-max of paired ratios)",
        f"{'size':>6} {'caraml CPU us':>13} {'raw CPU us':>10} {'CPU caraml/raw':>20} "
        f"{'caraml MB/s':>11} {'raw MB/s':>9} {'rate caraml/raw':>20} {'load':>9}",
    ]
    for row in rows:
        lines.append(
            f"{row['size_mib']:>4}MiB {row['caraml_cpu_us']:>13,.0f} {row['raw_cpu_us']:>10,.0f} "
            f"{_mid(row['cpu_ratio']):>20} {row['caraml_mb_s']:>11,.0f} {row['raw_mb_s']:>9,.0f} "
            f"{_mid(row['rate_ratio']):>20} {row['load'][0]:>4.1f}-{row['load'][1]:<4.1f}"
        )
    lines.append("goals: CPU caraml/raw <= 1.5; rate caraml/raw >= 0.9 at 16 MiB")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--sizes", default="1,16", help="array sizes in MiB, comma-separated")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(receive_table(receive_rows(sizes, args.rounds), args.rounds))


if __name__ == "__main__":
    main()
