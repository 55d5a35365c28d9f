"""Metrics sink: writes TensorBoard events, `metrics.jsonl` and the `status.json` progress shows;
the same scalars go to Weights & Biases (`run.wandb`) and to its Prometheus `/metrics`
(`surreal_run_*`, the run's aggregate; `surreal.monitoring`)."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import caraml
from surreal.monitoring import logs
from surreal.monitoring.wandb_sink import open_sink
from surreal.runtime import schemas
from surreal.runtime.common import Component
from surreal.runtime.guard import PortGuard
from surreal.runtime.ports import NOTHING, receive
from surreal.runtime.rundir import read_json, write_json
from surreal.runtime.storage_sync import track


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


class MetricsSink:
    """Turns component reports into scalar records (always with the global step) and a status.

    Args:
        run_path: the run folder (`metrics.jsonl`, `status.json`, `tb/`).
        total_steps: the run's step budget (for progress).
        tensorboard: also write TensorBoard events (tensorboardX).
        prom: the process's Prometheus series (`surreal_run_*`), if any.
        wandb: a `WandbSink` that gets every scalar, if any.
    """

    def __init__(
        self,
        run_path: Path,
        total_steps: int,
        tensorboard: bool = True,
        prom: Any = None,
        wandb: Any = None,
    ) -> None:
        self.path, self.prom, self.wandb = run_path, prom, wandb
        self.jsonl = (run_path / "metrics.jsonl").open("a")
        self.writer = None
        if tensorboard:
            with _hidden("torch"):  # tensorboardX imports torch, if it can, for torch tensors only
                from tensorboardX import SummaryWriter

            self.writer = SummaryWriter(str(run_path / "tb"))
        for written in (run_path / "metrics.jsonl", run_path / "tb"):
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
        self.recent_returns: deque[float] = deque(maxlen=20)
        self.actor_steps: dict[int, int] = {}

    def scalar(self, name: str, value: float, step: int) -> None:
        """Record one scalar at `step`."""
        self.jsonl.write(
            json.dumps({"step": step, "name": name, "value": value, "time": round(time.time(), 3)})
            + "\n"
        )
        if self.writer is not None:
            self.writer.add_scalar(name, value, step)
        if self.wandb is not None:
            self.wandb.log(name, value, step)
        if self.prom is not None:
            self.prom.set("surreal_run_scalar", value, scalar=name)

    def handle(self, msg: dict[str, Any]) -> None:
        """Consume one report from a component."""
        source, status = msg.get("source"), self.status
        if source == "learner" and int(msg["step"]) > 2 * status["total_steps"]:
            return  # not a step this run's learner can report (it stops at total_steps)
        if source == "learner":
            status["global_step"] = max(status["global_step"], int(msg["step"]))
            status["version"] = msg.get("version")
            status["finished"] = bool(msg.get("finished"))
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

    def _actor(self, msg: dict[str, Any], step: int) -> None:
        index, steps = int(msg["index"]), int(msg.get("env_steps", 0))
        last = self.actor_steps.get(index, 0)
        self.status["actor_steps"] += steps - last if steps >= last else steps  # restarted
        self.actor_steps[index] = steps
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
        """Write `status.json` and flush the logs."""
        self.status["updated"] = time.time()
        write_json(self.path / "status.json", self.status)
        self.jsonl.flush()
        if self.writer is not None:
            self.writer.flush()
        if self.prom is not None:
            self.prom.set("surreal_run_global_step", self.status["global_step"])
            self.prom.set("surreal_run_actor_steps", self.status["actor_steps"])
            self.prom.set("surreal_run_episodes", self.status["episodes"])
        if self.wandb is not None:
            self.wandb.commit()

    def close(self) -> None:
        """Flush and close every file."""
        self.flush()
        self.jsonl.close()
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.close()


def main(run_dir: str, index: int = 0) -> None:
    """Collect reports until stopped; a message that is not a report is counted and dropped."""
    comp = Component(run_dir, "metrics", index)
    puller = caraml.Puller(comp.address("metrics").bind_tcp, max_size=schemas.REPORT_MAX_BYTES)
    wandb = open_sink(comp.run.path, comp.config)  # starts in its own thread
    sink = MetricsSink(comp.run.path, comp.config.run.steps, prom=comp.prom, wandb=wandb)
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
        checked = guard.check(schemas.report, message)
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
