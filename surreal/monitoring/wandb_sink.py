"""Weights & Biases logging from the metrics process (`--set run.wandb=online|offline`).

The metrics process hands every scalar it writes to TensorBoard to `WandbSink` too. The W&B run:
project `run.wandb_project`, group the experiment, name `experiment/trial`, id derived from
them (so `--resume` continues the same W&B run), the run's config logged. Each scalar is logged
with a `global_step` field that W&B uses as its x axis (`define_metric`), so scalars reported
late for an earlier step (evaluations) are kept, not dropped as out of order. After every
commit the run's summary holds each scalar's value at its highest step (not the one reported
last), so a metrics process stopped before `finish` still leaves the right summary. Files go to
`RUN/wandb/` (or `$WANDB_DIR`). wandb runs in a thread of its own; an error inside it ends
the logging with one line in the log, never the metrics process.

`read_summary` reads an offline run's summary straight from its `.wandb` file (no network).
"""

from __future__ import annotations

import importlib.util
import json
import os
import queue
import re
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any

from surreal.api import config as config_io
from surreal.api.config import ConfigError

MODES = ("online", "offline", "disabled")


def check(mode: str) -> None:
    """Raise ConfigError (one line, what to do) when `run.wandb` cannot work here."""
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
    """A W&B run fed with scalars from a background thread, so a slow wandb (its start, its
    service under load) never holds up the metrics process; `commit` hands over what was
    buffered.

    Args:
        run_path: the run folder (FOLDER/EXPERIMENT/TRIAL).
        config: the run's config as a dict (logged as the W&B config).
        mode: online or offline.
        project: the W&B project.
    """

    MAX_QUEUED = 10_000
    """Rows waiting for wandb beyond this are dropped (counted in `dropped`)."""

    def __init__(self, run_path: Path, config: dict[str, Any], mode: str, project: str) -> None:
        path = run_path.resolve()
        experiment, trial = path.parent.name, path.name
        folder = Path(os.environ.get("WANDB_DIR") or path)
        folder.mkdir(parents=True, exist_ok=True)
        self.init_args = {
            "project": project,
            "group": experiment,
            "name": f"{experiment}/{trial}",
            "id": run_id(experiment, trial),
            "resume": "allow",
            "config": config,
            "mode": mode,
            "dir": str(folder),
        }
        self.pending: dict[int, dict[str, float]] = {}
        self.latest: dict[str, tuple[int, float]] = {}
        self.queue: queue.Queue = queue.Queue()
        self.dropped = 0
        self.error: str | None = None
        """Why logging stopped early or finishing failed (also printed once), else None."""
        self.thread = threading.Thread(target=self._work, name="wandb-sink", daemon=True)
        self.thread.start()

    def log(self, name: str, value: float, step: int) -> None:
        """Buffer one scalar at `step`."""
        self.pending.setdefault(int(step), {})[name] = float(value)
        if int(step) >= self.latest.get(name, (int(step), 0.0))[0]:
            self.latest[name] = (int(step), float(value))

    def commit(self) -> None:
        """Hand the buffered scalars to the thread, one W&B row per step."""
        pending, self.pending = self.pending, {}
        for step in sorted(pending):
            if self.queue.qsize() >= self.MAX_QUEUED:
                self.dropped += 1
                continue
            self.queue.put(("log", {**pending[step], "global_step": step}))
        if pending:
            self.queue.put(("summary", self.final_values()))

    def final_values(self) -> dict[str, float]:
        """Each scalar's value at the highest step it was reported for, and that step."""
        final: dict[str, float] = {name: value for name, (_, value) in self.latest.items()}
        if self.latest:
            final["global_step"] = max(step for step, _ in self.latest.values())
        return final

    def close(self, timeout_s: float = 25.0) -> None:
        """Commit, let the thread log what is queued and finish the W&B run (at most
        `timeout_s` seconds)."""
        self.commit()
        self.queue.put(None)
        self.thread.join(timeout_s)

    def _work(self) -> None:
        """Start the W&B run, then log rows until the end marker; an error in wandb ends the
        logging with one line on stderr."""
        run = None
        try:
            import wandb

            run = wandb.init(
                **self.init_args,
                settings=wandb.Settings(console="off", silent=True, init_timeout=300),
            )
            run.define_metric("global_step")
            run.define_metric("*", step_metric="global_step")
            while (item := self.queue.get()) is not None:
                kind, row = item
                if kind == "summary":  # after each commit: each scalar at its highest step
                    run.summary.update(row)
                else:
                    run.log(row)
        except Exception as err:  # wandb's own failures: report once, keep the run going
            self.error = f"wandb logging stopped: {type(err).__name__}: {err}"
            print(self.error, file=sys.stderr)
            return
        try:
            run.finish()
        except Exception as err:  # its service already stopped with the run
            self.error = f"wandb finish failed: {type(err).__name__}: {err}"
            print(self.error, file=sys.stderr)


def open_sink(run_path: Path, config: Any) -> WandbSink | None:
    """The sink `run.wandb` asks for (None when disabled)."""
    if config.run.wandb == "disabled":
        return None
    return WandbSink(
        run_path, config_io.to_dict(config), config.run.wandb, config.run.wandb_project
    )


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


def read_summary(run_folder: Path, wait_s: float = 30.0) -> dict[str, Any]:
    """The summary of the W&B run files under `run_folder` (e.g. `RUN/wandb/offline-run-*`):
    every summary update of its `.wandb` file applied in order.

    wandb's service writes the file from its own process and may still be flushing it when
    `finish()` has returned in ours: until the file holds the run's `exit` record, it is read
    again (at most `wait_s` seconds; then what it holds is returned).
    """
    from wandb.proto import wandb_internal_pb2 as pb

    deadline = time.monotonic() + wait_s
    while True:
        files = sorted(Path(run_folder).glob("**/*.wandb"))
        if not files and time.monotonic() > deadline:
            raise FileNotFoundError(f"no .wandb file under {run_folder}")
        summary: dict[str, Any] = {}
        ended = False
        for raw in records(files[-1]) if files else []:
            rec = pb.Record()
            rec.ParseFromString(raw)
            kind = rec.WhichOneof("record_type")
            ended = ended or kind == "exit"
            if kind != "summary":
                continue
            for item in rec.summary.update:
                key = item.key or ".".join(item.nested_key)
                summary[key] = json.loads(item.value_json)
        if ended or (files and time.monotonic() > deadline):
            return summary
        time.sleep(0.1)  # polling a file another process writes, with a deadline
