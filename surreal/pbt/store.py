"""A population's files: member folders `RUN/m<i>/` (each a whole run folder) and the directives
the manager leaves there for a member's learner.

    RUN/pbt.json              the PBTConfig            RUN/pbt.jsonl    every decision, one a line
    RUN/pbt_state.json        the manager's state      RUN/best.json    which member's checkpoint
    RUN/checkpoints/latest.pt the best member's checkpoint (what `surreal eval RUN` plays)
    RUN/m<i>/member.json      {"name", "index", "interval"}: marks the folder as a member
    RUN/m<i>/pbt/directive.json  {"id", "round", "donor", "checkpoint", "hyperparameters"}
    RUN/m<i>/pbt/applied.json    {"id", "step"}: the learner took the directive at that step
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from surreal.api import config as config_io
from surreal.pbt.exploit import Decision
from surreal.runtime.runfolder.rundir import RunDir, read_json, write_json

PBT_FILE, STATE_FILE, LOG_FILE, BEST_FILE = "pbt.json", "pbt_state.json", "pbt.jsonl", "best.json"


def member_names(n: int) -> list[str]:
    """`m0` ... `m{n-1}`: the members' folder names and process-name prefixes."""
    return [f"m{i}" for i in range(n)]


def is_population(run_path: Path) -> bool:
    """Whether `run_path` holds a population (its `pbt.json`)."""
    return (Path(run_path) / PBT_FILE).is_file()


@dataclass
class MemberView:
    """What the manager knows of a member, read from its folder."""

    name: str
    step: int = 0
    eval_return: float | None = None
    eval_step: int = -1
    best_eval_return: float | None = None
    updated: float = 0.0
    finished: bool = False
    applied_step: int = -1
    applied_id: int = 0
    pending: bool = False
    hyperparameters: dict[str, float] = field(default_factory=dict)


def read_member(run_path: Path, name: str, keys: list[str]) -> MemberView:
    """A member's progress (`status.json`), last directive taken and current `keys` values."""
    path = Path(run_path) / name
    status = read_json(path / "status.json", {}) or {}
    applied = read_json(path / "pbt" / "applied.json", {}) or {}
    directive = read_json(path / "pbt" / "directive.json", {}) or {}
    algo = (read_json(path / "config.json", {}) or {}).get("algo", {})
    return MemberView(
        name,
        step=int(status.get("global_step", 0)),
        eval_return=status.get("charts/eval_return"),
        eval_step=int(status.get("eval_step", -1)),
        best_eval_return=status.get("best_eval_return"),
        updated=float(status.get("updated", 0.0)),
        finished=bool(status.get("finished")),
        applied_step=int(applied.get("step", -1)),
        applied_id=int(applied.get("id", 0)),
        pending=int(directive.get("id", 0)) > int(applied.get("id", 0)),
        hyperparameters={k: algo[k.split(".", 1)[1]] for k in keys if k.split(".", 1)[1] in algo},
    )


def issue(run_path: Path, decision: Decision, directive_id: int, round_: int) -> None:
    """Leave `decision` for the recipient's learner: a copy of the donor's checkpoint, the new
    hyperparameters in the recipient's `config.json` (what a restarted process reads) and
    `pbt/directive.json` (what the running learner polls), each written atomically."""
    run_path = Path(run_path)
    target = run_path / decision.recipient
    (target / "pbt").mkdir(exist_ok=True)
    incoming = f"pbt/incoming-{directive_id}.pt"
    _atomic_copy(run_path / decision.donor / "checkpoints" / "latest.pt", target / incoming)
    for old in (target / "pbt").glob("incoming-*.pt"):
        if old.name != Path(incoming).name:
            old.unlink(missing_ok=True)
    fields = {key.split(".", 1)[1]: value for key, value in decision.new.items()}
    set_algo_values(RunDir(target), fields)
    write_json(
        target / "pbt" / "directive.json",
        {
            "id": directive_id,
            "round": round_,
            "donor": decision.donor,
            "checkpoint": incoming,
            "hyperparameters": fields,
            "time": time.time(),
        },
    )


def set_algo_values(run: RunDir, fields: dict[str, Any]) -> None:
    """Write `algo.<field>` values into a member's `config.json` (atomically)."""
    config = run.load_config()
    for name, value in fields.items():
        setattr(config.algo, name, value)
    tmp = run.config_file.with_name(f".config.json.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(config_io.to_dict(config), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, run.config_file)


def keep_best(run_path: Path, names: list[str]) -> dict[str, Any] | None:
    """Copy the checkpoint of the member with the highest best eval return to
    `RUN/checkpoints/latest.pt` (and say which in `RUN/best.json`) when that is news: another
    member, a better return, or a newer checkpoint. Returns the new `best.json`, or None."""
    run_path = Path(run_path)
    views = [(read_json(run_path / n / "status.json", {}) or {}, n) for n in names]
    source = [
        (s["best_eval_return"], n)
        for s, n in views
        if s.get("best_eval_return") is not None
        and (run_path / n / "checkpoints" / "latest.pt").is_file()
    ]
    if not source:
        return None
    best_return, name = max(source, key=lambda rn: rn[0])  # ties: the first member
    checkpoint = run_path / name / "checkpoints" / "latest.pt"
    mtime = checkpoint.stat().st_mtime
    known = read_json(run_path / BEST_FILE, {}) or {}
    if (known.get("member"), known.get("eval_return"), known.get("checkpoint_mtime")) == (
        name,
        best_return,
        mtime,
    ):
        return None
    _atomic_copy(checkpoint, run_path / "checkpoints" / "latest.pt")
    best = {
        "member": name,
        "eval_return": best_return,
        "checkpoint_mtime": mtime,
        "hyperparameters": (read_json(run_path / name / "config.json", {}) or {}).get("algo"),
        "time": time.time(),
    }
    write_json(run_path / BEST_FILE, best)
    return best


def append_log(run_path: Path, record: dict[str, Any]) -> None:
    """One JSON line in `RUN/pbt.jsonl`."""
    with (Path(run_path) / LOG_FILE).open("a") as out:
        out.write(json.dumps(record, sort_keys=True, default=float) + "\n")


def read_log(run_path: Path) -> list[dict[str, Any]]:
    """Every record of `RUN/pbt.jsonl` (none when it does not exist yet)."""
    try:
        lines = (Path(run_path) / LOG_FILE).read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def _atomic_copy(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
