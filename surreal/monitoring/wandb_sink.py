"""Weights & Biases logging from the metrics process (`--set run.wandb=online|offline`).

The metrics process hands every scalar it writes to TensorBoard to `WandbSink` too. The W&B run:
project `run.wandb_project`, group the experiment, name `experiment/trial`, id derived from
them (so `--resume` continues the same W&B run), the run's config logged. Each scalar is logged
with a `global_step` field that W&B uses as its x axis (`define_metric`), so scalars reported
late for an earlier step (evaluations) are kept, not dropped as out of order. Files go to
`RUN/wandb/` (or `$WANDB_DIR`). An error inside wandb disables the sink with one line in the
log; it never stops the metrics process.

`read_summary` reads an offline run's summary straight from its `.wandb` file (no network).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import struct
import sys
from pathlib import Path
from typing import Any

MODES = ("online", "offline", "disabled")


def check(mode: str) -> None:
    """Raise ConfigError (one line, what to do) when `run.wandb` cannot work here."""
    from surreal.config import ConfigError

    if mode not in MODES:
        raise ConfigError(f"run.wandb must be one of {', '.join(MODES)}, got {mode!r}")
    if mode != "disabled" and importlib.util.find_spec("wandb") is None:
        raise ConfigError(
            f"run.wandb={mode} needs wandb: pip install 'surreal-stack[wandb]' "
            "(or --set run.wandb=disabled)"
        )


def run_id(experiment: str, trial: str) -> str:
    """A stable W&B run id for experiment/trial (letters, digits, `-`)."""
    return re.sub(r"[^a-zA-Z0-9-]+", "-", f"{experiment}-{trial}")[:64]


class WandbSink:
    """A W&B run fed with scalars; `commit` sends what was buffered.

    Args:
        run_path: the run folder (FOLDER/EXPERIMENT/TRIAL).
        config: the run's config as a dict (logged as the W&B config).
        mode: online or offline.
        project: the W&B project.
    """

    def __init__(self, run_path: Path, config: dict[str, Any], mode: str, project: str) -> None:
        import wandb

        path = run_path.resolve()
        experiment, trial = path.parent.name, path.name
        folder = Path(os.environ.get("WANDB_DIR") or path)
        folder.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=project,
            group=experiment,
            name=f"{experiment}/{trial}",
            id=run_id(experiment, trial),
            resume="allow",
            config=config,
            mode=mode,
            dir=str(folder),
            settings=wandb.Settings(console="off", silent=True),
        )
        self.run.define_metric("global_step")
        self.run.define_metric("*", step_metric="global_step")
        self.pending: dict[int, dict[str, float]] = {}

    def log(self, name: str, value: float, step: int) -> None:
        """Buffer one scalar at `step`."""
        self.pending.setdefault(int(step), {})[name] = float(value)

    def commit(self) -> None:
        """Send the buffered scalars, one W&B row per step; on error, disable the sink."""
        if self.run is None:
            self.pending.clear()
            return
        pending, self.pending = self.pending, {}
        try:
            for step in sorted(pending):
                self.run.log({**pending[step], "global_step": step})
        except Exception as err:  # wandb's own failures: report once, keep the run going
            print(f"wandb logging disabled: {type(err).__name__}: {err}", file=sys.stderr)
            self.run = None

    def close(self) -> None:
        """Commit and finish the W&B run."""
        self.commit()
        if self.run is not None:
            try:
                self.run.finish()
            except Exception as err:
                print(f"wandb finish failed: {type(err).__name__}: {err}", file=sys.stderr)
            self.run = None


def open_sink(run_path: Path, config: Any) -> WandbSink | None:
    """The sink `run.wandb` asks for (None when disabled or when wandb fails to start)."""
    from surreal import config as config_io

    if config.run.wandb == "disabled":
        return None
    try:
        return WandbSink(
            run_path, config_io.to_dict(config), config.run.wandb, config.run.wandb_project
        )
    except Exception as err:
        print(f"wandb could not start: {type(err).__name__}: {err}", file=sys.stderr)
        return None


_BLOCK = 32768
_HEADER = 7  # ":W&B", magic 0xBEE1, version


def records(path: Path) -> list[bytes]:
    """The records of a `.wandb` file (a LevelDB-style log: 32 KiB blocks, 7-byte record headers)."""
    data = path.read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file")
    out, pos, partial = [], _HEADER, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # block trailer: padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:  # full
            out.append(chunk)
        elif kind == 2:  # first
            partial = chunk
        elif kind == 3:  # middle
            partial += chunk
        elif kind == 4:  # last
            out.append(partial + chunk)
    return out


def read_summary(run_folder: Path) -> dict[str, Any]:
    """The summary of the W&B run files under `run_folder` (e.g. `RUN/wandb/offline-run-*`):
    every summary update of its `.wandb` file applied in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    files = sorted(Path(run_folder).glob("**/*.wandb"))
    if not files:
        raise FileNotFoundError(f"no .wandb file under {run_folder}")
    summary: dict[str, Any] = {}
    for raw in records(files[-1]):
        rec = pb.Record()
        rec.ParseFromString(raw)
        if rec.WhichOneof("record_type") != "summary":
            continue
        for item in rec.summary.update:
            key = item.key or ".".join(item.nested_key)
            summary[key] = json.loads(item.value_json)
    return summary
