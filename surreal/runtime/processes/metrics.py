"""Metrics sink: writes TensorBoard events, `metrics.jsonl` and the `status.json` progress shows;
the same scalars go to Weights & Biases (`run.wandb`) and to its Prometheus `/metrics`
(`surreal_run_*`, the run's aggregate; `surreal.monitoring`)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import caraml
from surreal.monitoring import logs
from surreal.monitoring.wandb_sink import open_sink
from surreal.runtime.processes.common import Component
from surreal.runtime.runfolder.rundir import read_json, write_json, write_text
from surreal.runtime.runfolder.storage_sync import track
from surreal.runtime.wire import report_token, schemas
from surreal.runtime.wire.guard import PortGuard
from surreal.runtime.wire.ports import NOTHING, receive


@contextlib.contextmanager
def _hidden(module: str) -> Iterator[None]:
    """Make `import MODULE` fail inside the block unless it is already imported (a None in
    sys.modules): the sink writes plain floats, and torch would add ~1.5 CPU-s and ~140 MB to
    this process."""
    if module in sys.modules:
        yield
        return
    sys.modules[module] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        del sys.modules[module]


def _counted(saved: Any) -> dict[int, int]:
    """status.json's `actor_env_steps` ({"0": steps, ...}) as {index: steps}; junk is none."""
    if not isinstance(saved, dict):
        return {}
    return {
        int(k): v
        for k, v in saved.items()
        if isinstance(k, str) and k.isdigit() and isinstance(v, int) and v >= 0
    }


class MetricsSink:
    """Turns component reports into scalar records (always with the global step) and a status.

    The run's step is its learner's (each report of a learner that says where it began: the
    runtime's learners, DDPG's and ES's): it goes on from the checkpoint the learner started
    from, and when that is behind what the run had reached (a learner that crashed, or a run
    killed and resumed), the rows of `metrics.jsonl` past it are dropped, so the file never
    goes back nor holds a step twice for one scalar. A deleted `metrics.jsonl` is written anew.

    Args:
        run_path: the run folder (`metrics.jsonl`, `status.json`, `tb/`).
        total_steps: the run's step budget (for progress).
        tensorboard: also write TensorBoard events (tensorboardX).
        prom: the process's Prometheus series (`surreal_run_*`), if any.
        wandb: a `WandbSink` that gets every scalar, if any.
        say: where its one-line notices go (the process's log).
    """

    def __init__(
        self,
        run_path: Path,
        total_steps: int,
        tensorboard: bool = True,
        prom: Any = None,
        wandb: Any = None,
        say: Callable[[str], Any] = print,
    ) -> None:
        self.path, self.prom, self.wandb, self.say = run_path, prom, wandb, say
        self.file = run_path / "metrics.jsonl"
        self.jsonl = self.file.open("a")
        self.rows: list[str] = []
        """Rows not yet in the file (written at `flush`)."""
        self.last: dict[str, int] = {}
        """Each scalar's last step in the file: a row behind it is not written."""
        self.writer = self._tensorboard() if tensorboard else None
        for written in (self.file, run_path / "tb"):
            track(written)  # a run in an object store uploads them
        previous = read_json(run_path / "status.json", {}) or {}
        self.status: dict[str, Any] = {
            "global_step": previous.get("global_step", 0),
            "total_steps": total_steps,
            "actor_steps": previous.get("actor_steps", 0),
            "episodes": previous.get("episodes", 0),
            "finished": False,
            "started": time.time(),
        }
        self.high = int(self.status["global_step"])
        """The largest step in the file so far (this run's, before a resume)."""
        self.boots: set[str] = set()
        self.boot = ""
        """The learner process whose step the run's is (its `boot`; earlier ones are stale)."""
        self.recent_returns: deque[float] = deque(maxlen=20)
        self.actor_steps: dict[int, int] = _counted(previous.get("actor_env_steps"))
        """Each actor's env steps as counted into `actor_steps` (kept in status.json, so a
        restarted sink does not count an actor's steps again from its first report)."""
        self.status["actor_env_steps"] = {str(i): n for i, n in self.actor_steps.items()}

    def _tensorboard(self, purge_step: int | None = None) -> Any:
        """A TensorBoard writer on `tb/` (`purge_step`: events from it on are discarded)."""
        with _hidden("torch"):  # tensorboardX imports torch, if it can, for torch tensors only
            from tensorboardX import SummaryWriter

        return SummaryWriter(str(self.path / "tb"), purge_step=purge_step)

    def scalar(self, name: str, value: float, step: int) -> None:
        """Record one scalar at `step` (not when `name` is already recorded further on)."""
        if step < self.last.get(name, 0):
            return
        self.last[name], self.high = step, max(self.high, step)
        row = {"step": step, "name": name, "value": value, "time": round(time.time(), 3)}
        self.rows.append(json.dumps(row) + "\n")
        if self.writer is not None:
            self.writer.add_scalar(name, value, step)
        if self.wandb is not None:
            self.wandb.log(name, value, step)
        if self.prom is not None:
            self.prom.set("surreal_run_scalar", value, scalar=name)

    def handle(self, msg: dict[str, Any]) -> None:
        """Consume one report from a component."""
        source, status = msg.get("source"), self.status
        if msg.get("wait_only"):
            self._wait(msg)
            return
        if source == "learner" and not self._learner(msg):
            return
        step = status["global_step"] if source in ("actor", "buffer") else int(msg["step"])
        for name, value in msg.get("scalars", {}).items():
            if source not in ("actor", "buffer"):  # their per-process numbers: status only
                self.scalar(name, value, step)
            status[name] = value
        if source == "actor":
            self._actor(msg, step)
        if source == "evaluator" and "charts/eval_return" in msg["scalars"]:
            status["eval_step"] = step
            status["best_eval_return"] = max(
                status.get("best_eval_return", float("-inf")), msg["scalars"]["charts/eval_return"]
            )
        if source == "buffer":
            self.scalar("charts/buffer_fill", msg["scalars"].get("buffer/fill", 0.0), step)

    def _wait(self, msg: dict[str, Any]) -> None:
        """A process's waits (`surreal.runtime.wire.waits`) into the status's `waits`, with the time
        they were reported ({} ends its entry)."""
        waits = self.status.setdefault("waits", {})
        if msg["waiting"] and (msg["process"] in waits or len(waits) < 4096):
            waits[msg["process"]] = {**msg["waiting"], "time": round(time.time(), 3)}
        else:
            waits.pop(msg["process"], None)

    def _learner(self, msg: dict[str, Any]) -> bool:
        """The learner's step becomes the run's; False for a report to leave out (a step no
        learner of this run reaches, or a late one of a learner that was replaced)."""
        step, status = int(msg["step"]), self.status
        if step > 2 * status["total_steps"]:
            return False  # not a step this run's learner can report (it stops at total_steps)
        if "start" not in msg:  # a learner of its own that does not say where it began
            status["global_step"] = max(status["global_step"], step)
        elif msg.get("boot", "") == self.boot:
            status["global_step"] = step
        elif msg.get("boot", "") in self.boots:
            return False  # an earlier learner process's report, arrived late
        else:  # a learner (re)started: the run goes on from its checkpoint
            self.boot = msg.get("boot", "")
            self.boots.add(self.boot)
            self._rewind(int(msg["start"]))
            status["global_step"] = step
        status["version"] = msg.get("version")
        status["finished"] = bool(msg.get("finished"))
        status["why"] = msg.get("why") if status["finished"] else None  # "budget used", a goal
        return True

    def _rewind(self, start: int) -> None:
        """The run goes on from `start`: drop what was recorded past it (`metrics.jsonl`'s
        rows, TensorBoard's events), the training that produced it was lost."""
        if start >= self.high:
            return
        self._write_rows()
        kept, dropped = [], 0
        for line in self.file.read_text().splitlines(keepends=True):
            try:
                behind = int(json.loads(line)["step"]) <= start
            except (ValueError, KeyError, TypeError):
                behind = False  # a torn or foreign line
            if behind:
                kept.append(line)
            else:
                dropped += 1
        write_text(self.file, "".join(kept))
        self.jsonl.close()
        self.jsonl = self.file.open("a")
        if self.writer is not None:
            self.writer.close()
            self.writer = self._tensorboard(purge_step=start + 1)
        self.last = {name: min(step, start) for name, step in self.last.items()}
        self.say(
            f"the learner began at step {start:,} (its checkpoint), behind the run's "
            f"{self.high:,}: {dropped:,} rows of {self.file.name} past it were dropped (that "
            "training was lost with the learner that made it)"
        )
        self.high = start

    def _actor(self, msg: dict[str, Any], step: int) -> None:
        index, steps = int(msg["index"]), int(msg.get("env_steps", 0))
        last = self.actor_steps.get(index, 0)
        self.status["actor_steps"] += steps - last if steps >= last else steps  # restarted
        self.actor_steps[index] = steps
        self.status["actor_env_steps"][str(index)] = steps
        for ret, length in zip(
            msg.get("episode_returns", []), msg.get("episode_lengths", []), strict=False
        ):
            self.scalar("charts/episodic_return", ret, step)
            self.scalar("charts/episodic_length", length, step)
            self.recent_returns.append(ret)
            self.status["episodes"] += 1
        if self.recent_returns:
            self.status["episodic_return"] = sum(self.recent_returns) / len(self.recent_returns)
        self.status["policy_version_actor_" + str(index)] = msg.get("version", 0)

    def flush(self) -> None:
        """Write `status.json` and the rows, and flush the logs."""
        self.status["updated"] = time.time()
        write_json(self.path / "status.json", self.status)
        self._write_rows()
        if self.writer is not None:
            self.writer.flush()
        if self.prom is not None:
            self.prom.set("surreal_run_global_step", self.status["global_step"])
            self.prom.set("surreal_run_actor_steps", self.status["actor_steps"])
            self.prom.set("surreal_run_episodes", self.status["episodes"])
        if self.wandb is not None:
            self.wandb.commit()

    def _write_rows(self) -> None:
        """The rows since the last write into `metrics.jsonl` (a new one when it was deleted or
        replaced since: said once in the log)."""
        if not _same_file(self.file, self.jsonl):
            self.jsonl.close()
            self.jsonl = self.file.open("a")
            self.say(f"{self.file} was deleted or replaced: its rows go on in a new one")
        self.jsonl.writelines(self.rows)
        self.rows.clear()
        self.jsonl.flush()

    def close(self) -> None:
        """Flush and close every file."""
        self.flush()
        self.jsonl.close()
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.close()


def _same_file(path: Path, handle: Any) -> bool:
    """Whether the open `handle` is still the file at `path`."""
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(handle.fileno())
    return (there.st_dev, there.st_ino) == (here.st_dev, here.st_ino)


def main(run_dir: str, index: int = 0) -> None:
    """Collect reports until stopped; a message that is not a report is counted and dropped."""
    comp = Component(run_dir, "metrics", index)
    puller = caraml.Puller(comp.address("metrics").bind_tcp, max_size=schemas.REPORT_MAX_BYTES)
    wandb = open_sink(comp.run.path, comp.config)  # starts in its own thread
    sink = MetricsSink(
        comp.run.path, comp.config.run.steps, prom=comp.prom, wandb=wandb, say=comp.log.warning
    )
    token = report_token.read()  # local runs: reports without the run's token are dropped
    guard = PortGuard("metrics")
    drops = logs.DropReport(comp.log, [guard])
    handled = [0]
    comp.log.info(
        "binds metrics %s; writes %s, status.json%s",
        comp.address("metrics").bind_tcp,
        comp.run.path / "metrics.jsonl",
        ", tb/" if sink.writer is not None else "",
    )

    def handle_next(timeout: float) -> bool:
        """Handle the next message; False when nothing arrived within `timeout`."""
        dropped = guard.total_dropped
        message = receive(lambda: puller.pull(timeout=timeout), guard)
        if message is NOTHING:
            return guard.total_dropped > dropped  # False: nothing arrived in time
        checked = guard.check(lambda m: schemas.report(m, token), message)
        comp.prom.port_traffic("metrics", "in")
        if checked is not None:
            guard.guarded("report-failed", lambda: sink.handle(checked))
            handled[0] += 1
        return True

    last_flush = 0.0
    try:
        while not comp.stopping.is_set():
            handle_next(0.25)
            if time.monotonic() - last_flush > 0.5:
                sink.status["invalid_messages"] = guard.total_dropped
                comp.prom.total("surreal_invalid_messages_total", guard.total_dropped)
                sink.flush()
                last_flush = time.monotonic()
            if comp.tick({"reports": handled[0]}, _progress_state(sink.status)):
                drops.check()
        while handle_next(0.2):  # drain what is already queued (the learner's last report)
            pass
    finally:
        drops.check()
        comp.log.info(
            "handled %s reports; the run at step %s, %s actor steps, %s episodes",
            f"{handled[0]:,}",
            f"{sink.status['global_step']:,}",
            f"{sink.status['actor_steps']:,}",
            f"{sink.status['episodes']:,}",
        )
        sink.close()
        puller.close()
        comp.close()


def _progress_state(status: dict[str, Any]) -> dict[str, Any]:
    """What the metrics process's progress lines show of the run's status."""

    def num(key: str) -> str | None:
        value = status.get(key)
        return None if value is None else logs.rate(float(value))

    return {
        "run step": status.get("global_step"),
        "actor steps": status.get("actor_steps"),
        "episodes": status.get("episodes"),
        "return": num("episodic_return"),
        "eval": num("charts/eval_return"),
        "invalid": status.get("invalid_messages", 0),
    }
