"""`surreal status RUN` of a population: one table row per member, the last decisions, the best."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import surreal.pbt.store as store
from surreal.pbt.config import from_dict
from surreal.runtime.runfolder.rundir import read_json
from symphony.backends import get_backend
from symphony.records import Records


def _num(value: Any, fmt: str) -> str:
    return "-" if value is None else fmt.format(value)


def member_rows(run_path: Path, states: dict[str, str] | None = None) -> list[list[str]]:
    """[member, steps, eval, best eval, <searched settings>..., copies in, learner state (when
    `states` has any)]."""
    run_path = Path(run_path)
    pbt = from_dict(read_json(run_path / store.PBT_FILE))
    keys = [hp.key for hp in pbt.hyperparameters()]
    copies: dict[str, int] = {}
    for record in store.read_log(run_path):
        if record.get("event") == "copy":
            copies[record["recipient"]] = copies.get(record["recipient"], 0) + 1
    rows = [
        ["member", "steps", "eval", "best eval", *keys, "copies in"]
        + (["learner"] if states else [])
    ]
    for name in store.member_names(pbt.members):
        view = store.read_member(run_path, name, keys)
        rows.append(
            [
                name,
                f"{view.step:,}",
                _num(view.eval_return, "{:.1f}"),
                _num(view.best_eval_return, "{:.1f}"),
                *(_num(view.hyperparameters.get(k), "{:.3g}") for k in keys),
                str(copies.get(name, 0)),
            ]
            + ([states.get(name, "-")] if states else [])
        )
    return rows


def table(rows: list[list[str]], indent: str = "  ") -> str:
    """Rows as aligned text columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        indent + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def population_status(run_path: Path, states: dict[str, str] | None = None) -> str:
    """The population's state: header, member table, best member, last decisions.

    `states`: member -> its learner's process state (None: read from symphony's record)."""
    run_path = Path(run_path)
    info = read_json(run_path / "run.json", {}) or {}
    pbt = from_dict(read_json(run_path / store.PBT_FILE))
    manager = read_json(run_path / store.STATE_FILE, {}) or {}
    if states is None:
        states = learner_states(info.get("experiment"))
    lines = [
        f"population {run_path}: {info.get('algo')}, {pbt.members} members, round "
        f"{manager.get('round', 0)} (every {pbt.interval:,} steps, fraction {pbt.fraction})",
        table(member_rows(run_path, states)),
    ]
    best = read_json(run_path / store.BEST_FILE)
    if best:
        lines.append(
            f"  best       {best['member']} (eval {best['eval_return']:.1f}): "
            f"{run_path / 'checkpoints' / 'latest.pt'} (surreal eval {run_path})"
        )
    copies = [r for r in store.read_log(run_path) if r.get("event") == "copy"]
    for record in copies[-3:]:
        lines.append(
            f"  round {record['round']}: {record['donor']} -> {record['recipient']} "
            f"({record['donor_score']:.1f} > {record['recipient_score']:.1f}), "
            f"{record['old']} -> {record['new']}"
        )
    lines.append(f"  log        {run_path / store.LOG_FILE} ({len(copies)} copies)")
    return "\n".join(lines)


def learner_states(experiment: str | None) -> dict[str, str]:
    """member -> state of its learner process, from symphony's record (empty when not running)."""
    try:
        record = Records().load(experiment)
        processes = get_backend(record.backend).describe(record).processes
    except Exception:  # no record: the population is not running
        return {}
    return {
        p.name.removesuffix("-learner"): p.state
        + (f" ({p.restarts} restarts)" if p.restarts else "")
        for p in processes
        if p.name.endswith("-learner")
    }
