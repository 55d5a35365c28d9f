"""`surreal eval` and `surreal status`: a run's checkpoint played back, and its state."""

from __future__ import annotations

import sys
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np

from surreal.envs import VectorEnv, make_env
from surreal.launch.cost import RunCost, status_line
from surreal.launch.progress_view import restarts_by_role
from surreal.monitoring.crash import status_lines
from surreal.runtime.processes.evaluator import evaluate
from surreal.runtime.runfolder import checkpoint
from surreal.runtime.runfolder.rundir import RunDir, finish_why, load_json, resolve_run
from surreal.runtime.runfolder.storage_sync import reading
from surreal.runtime.wire import waits
from symphony.backends import get_backend
from symphony.records import Records
from symphony.states import ALIVE_STATES

VIDEO_FORMATS = {".mp4": "imageio_ffmpeg", ".gif": "PIL"}
"""The video files `--video` writes (imageio): suffix -> the module imageio's writer needs."""
_PACKAGES = {"imageio_ffmpeg": "imageio-ffmpeg", "PIL": "pillow"}


def check_video(path: str) -> None:
    """Raise ValueError (one line) unless `path` is a video file `record_video` can write: a
    known suffix, its writer installed, an existing folder; checked before any episode runs."""
    suffix = Path(path).suffix.lower()
    if suffix not in VIDEO_FORMATS:
        shown = f"a {suffix} file" if suffix else "a file without a suffix"
        known = " or ".join(VIDEO_FORMATS)
        raise ValueError(f"--video {path}: cannot write {shown}; name a {known} file")
    for module in ("imageio", VIDEO_FORMATS[suffix]):
        if find_spec(module) is None:
            package = _PACKAGES.get(module, module)
            raise ValueError(
                f"--video {path}: writing {suffix} needs {package}: pip install {package}"
            )
    folder = Path(path).absolute().parent
    if not folder.is_dir():
        raise ValueError(f"--video {path}: {folder} is not a folder")


def evaluate_run(path: str | Path, episodes: int = 10, video: str | None = None) -> dict[str, Any]:
    """Greedy episodes with the run's latest checkpoint (`path`: a run folder or its s3:// URL);
    optionally record the first to `video` (`check_video` first, before anything runs)."""
    if video:
        check_video(video)
    with reading(str(path)) as local:
        return _evaluate(local, episodes, video)


def _say(line: str) -> None:
    """One line for the person at the terminal (stderr: stdout carries the result)."""
    print(line, file=sys.stderr)


def _evaluate(path: Path, episodes: int, video: str | None) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    run = resolve_run(path)
    config = run.load_config()
    policy = run.algo_class().make_policy(config.algo, run.env_info())
    # verified first (whole, finite, its checksum, taken by the policy), else previous.pt
    state = checkpoint.load(
        run.checkpoint, note=_say, use=lambda s: policy.load_params(s["params"])
    )
    env = VectorEnv(config.env.id, config.env, seed=config.run.seed + 2 * 10**6, num_envs=episodes)
    try:
        returns = evaluate(policy, env, episodes)
    finally:
        env.close()
    if video:
        record_video(policy, config, video)
    return {
        "episodes": episodes,
        "step": int(state["counters"]["global_step"]),
        "mean": float(np.mean(returns)),
        "std": float(np.std(returns)),
        "min": float(np.min(returns)),
        "max": float(np.max(returns)),
        "returns": returns,
    }


def record_video(policy: Any, config: Any, path: str, max_frames: int = 2000) -> None:
    """Play one greedy episode with rendering on and write its frames to `path` (imageio)."""
    try:
        import imageio.v2 as imageio
    except ModuleNotFoundError as err:
        raise ValueError(
            "--video needs imageio: pip install imageio (and imageio-ffmpeg for "
            ".mp4); or write a .gif"
        ) from err
    env = make_env(config.env.id, config.env, seed=config.run.seed, render=True)
    frames = []
    obs, _ = env.reset(seed=config.run.seed)
    policy.reset(np.ones(1, bool))
    for _ in range(max_frames):
        try:
            frames.append(env.render())
        except Exception as err:  # gymnasium's DependencyNotInstalled and friends
            raise ValueError(f"cannot render {config.env.id}: {err}") from err
        action, _ = policy.act(obs[None], deterministic=True)
        obs, _, terminated, truncated, _ = env.step(action[0])
        if terminated or truncated:
            break
    env.close()
    mp4 = Path(path).suffix.lower() == ".mp4"
    imageio.mimsave(path, frames, **({"fps": 30} if mp4 else {"duration": 33}))


def run_status(path: str | Path) -> str:
    """A few lines on the run (`path`: a run folder or its s3:// URL): progress, returns,
    checkpoint, and its processes if it runs."""
    with reading(str(path)) as local:
        return _status(resolve_run(local), str(path))


def _status(run: RunDir, where: str) -> str:
    info, status = run.info(), load_json(run.status_file, {})
    lines = [f"run {where}: {info.get('algo')} on {run.load_config().env.id}"]
    lines.append(
        f"  steps      {status.get('global_step', 0):,} / {status.get('total_steps', 0):,}"
        f"  (actors generated {status.get('actor_steps', 0):,})"
    )
    for label, key in (
        ("return", "episodic_return"),
        ("eval", "charts/eval_return"),
        ("best eval", "best_eval_return"),
        ("steps/s", "charts/sps"),
    ):
        if status.get(key) is not None:
            lines.append(f"  {label:<10} {status[key]:.1f}")
    shown, alive = _processes(info.get("experiment"))
    lines.append("  state      " + _state(run, status, alive))
    if run.checkpoint.is_file():
        lines.append(f"  checkpoint {where.rstrip('/')}/" + _checkpoint(run, alive))
    lines.append("  processes  " + shown)
    waiting = waits.pick(status.get("waits") or {}, time.time()) if alive else None
    if waiting:  # what stands still and why (`surreal.runtime.wire.waits`)
        lines.append("  waiting    for " + waiting)
    if info.get("cost"):  # launched on kube with a cluster spec (`cluster_launch.record_cost`)
        lines.append("  cost       " + _cost(run, info, status, alive))
    lines += status_lines(run.path)  # crashes per role, the latest one's traceback end
    return "\n".join(lines)


def _state(run: RunDir, status: dict[str, Any], alive: bool) -> str:
    """`running`, else how the run ended: what its launcher wrote (`RUN/ending.json`:
    finished / stopped / failed, and why), else what its learner reported."""
    if alive:
        return "running"
    ended = load_json(run.ending_file, {}) or {}
    if ended.get("outcome"):
        return ended["outcome"] + (f" ({ended['why']})" if ended.get("why") else "")
    if status.get("finished"):
        return f"finished ({finish_why(status)})"
    return "not running (its launcher did not say how it ended: killed, or still starting)"


def _checkpoint(run: RunDir, alive: bool) -> str:
    """`checkpoints/latest.pt (12 s old)` while the run trains; once it ended, when it was
    written (its age is no warning then)."""
    written = run.checkpoint.stat().st_mtime
    if alive:
        when = f"{time.time() - written:.0f} s old"
    else:
        when = "written " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(written))
    shown = run.checkpoint.relative_to(run.path)
    return f"{shown} ({when}{_damage(run.checkpoint)})"


def _damage(latest: Path) -> str:
    """ "" for a usable checkpoint, else `; WHY: what --resume and eval use instead`."""
    wrong = checkpoint.problem(latest)
    if wrong is None:
        return ""
    before = checkpoint.previous(latest)
    kept = before.is_file() and checkpoint.problem(before) is None
    instead = f"--resume and eval use {checkpoint.PREVIOUS}" if kept else "none usable before it"
    return f"; {wrong.why}: {instead}"


def _cost(run: RunDir, info: dict[str, Any], status: dict[str, Any], alive: bool) -> str:
    """The run's $/h at launch, its cost from `created` to now (to its last status when it
    runs no more), and the rest of the budget's at the status's steps/s."""
    end = time.time() if alive else float(status.get("updated") or time.time())
    hours = max(0.0, end - float(info.get("created") or end)) / 3600
    budget = {"total_steps": status.get("total_steps") or run.load_config().run.steps}
    return status_line(RunCost.from_dict(info["cost"]), hours, {**status, **budget}, not alive)


def _processes(experiment: str | None) -> tuple[str, bool]:
    """The processes line, and whether any process is alive."""
    try:
        record = Records().load(experiment)
        status = get_backend(record.backend).describe(record)
    except Exception:  # no record: the run is not running (or its backend is gone)
        return "not running", False
    if not any(p.state in ALIVE_STATES for p in status.processes):
        ended = record.ended_status(status.status)  # symphony keeps an ended run's record
        return f"not running ({ended}; `symphony describe {record.name}`)", False
    return (
        ", ".join(
            f"{p.name}={p.state}" + (f" (restarts {p.restarts})" if p.restarts else "")
            for p in status.processes
        )
        + f"\n  restarts   {restarts_by_role(status.processes)}"
    ), True
