"""The run folder: FOLDER/EXPERIMENT/TRIAL with the config, metrics, status and checkpoints."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import surreal.api.config as config_io
from surreal.api.recipe import recipe_of
from surreal.api.registry import config_class, resolve
from surreal.api.spaces import EnvInfo
from surreal.runtime.runfolder.storage import S3Folder, is_remote
from surreal.runtime.runfolder.storage_sync import mirror_path, prepare_launch_mirror, track


def slug(text: str) -> str:
    """A DNS-1123-friendly name: lower case, digits and '-'."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:40] or "run"


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (readers never see half a file); a run in an object store
    uploads it (`surreal.runtime.runfolder.storage_sync.track`)."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, default=float) + "\n")


def write_text(path: Path, text: str) -> None:
    """Write `text` atomically: into a temporary file beside `path`, then renamed over it; one
    that fails (a full disk) leaves `path` as it was and no temporary file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    track(path)


def read_json(path: Path, default: Any = None) -> Any:
    """Read JSON, or `default` when the file is missing or being replaced."""
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return default


def write_ending(run: RunDir, outcome: str, why: str) -> None:
    """Say how the run ended before its processes are stopped (`RUN/ending.json`): `outcome`
    ("finished", "stopped", "failed") and `why` (e.g. "budget used"); each process's `stop:`
    line says it instead of "stopped by a signal" (`stop_reason`), `surreal status` shows it."""
    try:
        write_json(run.ending_file, {"outcome": outcome, "why": why, "time": time.time()})
    except OSError:  # a full disk: the stop lines say "stopped by a signal"
        pass


def stop_reason(run: RunDir, since: float) -> str | None:
    """Why this process was told to stop, when the run said so after `since` (epoch seconds:
    the process's start; an earlier launch's word is not about it): the launcher's
    `write_ending` ("the run finished (budget used)"), else a status whose learner reported the
    end of its budget ("the run finished (budget used)"); None: a signal from elsewhere."""
    ended = read_json(run.ending_file, None)
    if isinstance(ended, dict) and float(ended.get("time") or 0) >= since:
        what = {"finished": "the run finished", "failed": "the run failed"}
        said = what.get(ended.get("outcome"), "stopped")
        return f"{said} ({ended.get('why')})" if ended.get("why") else said
    status = read_json(run.status_file, None)
    fresh = isinstance(status, dict) and float(status.get("updated") or 0) >= since
    return f"the run finished ({finish_why(status)})" if fresh and status.get("finished") else None


def finish_why(status: dict) -> str:
    """Why the learner of a finished run (`status.json`) ended: "budget used", or the
    evaluation that reached `run.stop_at_return` (`surreal.runtime.wire.goal`)."""
    why = status.get("why")
    return why if isinstance(why, str) and why else "budget used"


class RunFileError(ValueError):
    """A file of the run folder cannot be read; the message names it and what to do."""


def load_json(path: Path, default: Any = None) -> Any:
    """A run file's JSON object: `default` when it is missing; one that is not JSON (truncated,
    edited) raises RunFileError naming it (`write_json` never leaves half a file)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return default
    except json.JSONDecodeError as err:
        raise RunFileError(
            f"{path} is not valid JSON ({err.msg}: line {err.lineno} column {err.colno}); "
            "the run folder is damaged: restore the file from a copy"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise RunFileError(f"cannot read {path}: {getattr(err, 'strerror', None) or err}") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{path} holds a JSON {type(data).__name__}, not an object")
    return data


@dataclass
class RunDir:
    """Paths of one run (one trial of one experiment).

    `url`: where the run is kept when it lives in an object store (`s3://...`); `path` is then
    a local mirror of it (`surreal.runtime.runfolder.storage_sync`).
    """

    path: Path
    url: str | None = None

    @property
    def where(self) -> str:
        """The run's location as users name it: its URL, or its path."""
        return self.url or str(self.path)

    @property
    def location(self) -> str:
        """Where the run's processes find it: its URL, or its absolute path."""
        return self.url or str(self.path.resolve())

    def shown(self, rel: str) -> str:
        """A file or folder of the run as users name it (`where`/rel)."""
        return f"{self.url}/{rel}" if self.url else str(self.path / rel)

    @property
    def config_file(self) -> Path:
        return self.path / "config.json"

    @property
    def run_file(self) -> Path:
        return self.path / "run.json"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def status_file(self) -> Path:
        return self.path / "status.json"

    @property
    def ending_file(self) -> Path:
        """How the launcher ended the run (`write_ending`), written before it stops the processes."""
        return self.path / "ending.json"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoints" / "latest.pt"

    @property
    def tensorboard(self) -> Path:
        return self.path / "tb"

    def exists(self) -> bool:
        """Whether this folder holds a run (its config and run record)."""
        return self.config_file.is_file() and self.run_file.is_file()

    def info(self) -> dict[str, Any]:
        """The run record (algorithm, env info, symphony experiment name, ...)."""
        return load_json(self.run_file, {})

    def algo_ref(self) -> str:
        """What `resolve` loads for this run: a registered name, or the run's own copy of a
        `file.py:Class` learner (`code/`), so later edits of the original never change it."""
        info = self.info()
        copy = info.get("algo_copy")
        return f"{self.path.resolve() / copy}" if copy else info["algo"]

    def algo_class(self) -> type:
        """The Learner class this run trains (from the run's copy of its file, if it has one)."""
        return resolve(self.algo_ref())

    def copy_algo_file(self, ref: str) -> str | None:
        """Copy the file of a `path/file.py:Class` ref into `code/`; returns the copy's ref
        relative to the run folder (None for a registered name)."""
        path, sep, cls = ref.rpartition(":")
        if not (sep and path.endswith(".py")):
            return None
        (self.path / "code").mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, self.path / "code" / Path(path).name)
        return f"code/{Path(path).name}:{cls}"

    def components(self) -> dict[str, str]:
        """role -> "module:function" of the run's processes: as recorded at launch (`run.json`),
        so a process finds its entry point without importing the learner (and torch); a run
        folder written before that was recorded asks the learner class."""
        recorded = self.info().get("components")
        return dict(recorded) if recorded else recipe_of(self.algo_class()).components()

    def load_config(self) -> config_io.Config:
        """The saved, resolved config (a built-in algorithm's config class is imported without
        its learner, so without torch: `registry.config_class`)."""
        return config_io.load(self.config_file, config_class(self.algo_ref()))

    def env_info(self) -> EnvInfo:
        """The environment description saved at launch."""
        return EnvInfo.from_dict(self.info()["env_info"])

    def create(self, config: config_io.Config, info: dict[str, Any]) -> None:
        """Make the folder and write the config and run record."""
        (self.path / "checkpoints").mkdir(parents=True, exist_ok=True)
        config_io.save(config, self.config_file)
        write_json(self.run_file, {**info, "created": time.time()})


_WHY = {
    errno.EROFS: "a read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "a file system that takes no new folders",
}


def check_writable(folder: str | Path, flag: str = "--folder") -> None:
    """Raise ConfigError (one line naming `folder` and why) unless a run can be written at or
    under `folder`: the nearest folder of the path that exists must take new entries. It is
    probed with an empty temporary folder, removed at once (permission bits alone miss
    read-only mounts, /proc, and root's rights)."""
    path = Path(folder).absolute()
    existing = path
    while not os.path.lexists(existing):
        existing = existing.parent
    if not existing.exists():
        raise config_io.ConfigError(f"{flag} {folder}: {existing} is a broken symbolic link")
    if not existing.is_dir():
        raise config_io.ConfigError(
            f"{flag} {folder}: {existing} is a file, not a folder; pick another {flag}"
        )
    try:
        probe = tempfile.mkdtemp(prefix=".surreal-probe-", dir=existing)
    except OSError as err:
        why = _WHY.get(err.errno or 0, err.strerror or str(err))
        raise config_io.ConfigError(
            f"{flag} {folder}: cannot write a run there: {existing} is not writable ({why})"
        ) from None
    os.rmdir(probe)


def resolve_run(run: str | Path) -> RunDir:
    """A RunDir from a path; raises FileNotFoundError with a hint when it holds no run."""
    run_dir = RunDir(Path(run))
    if not run_dir.exists():
        raise FileNotFoundError(
            f"{run} is not a surreal run folder (no config.json/run.json); runs live in "
            "FOLDER/EXPERIMENT/TRIAL, e.g. runs/ppo-cartpole-v1/t1"
        )
    return run_dir


def resume_run_dir(ref: str) -> RunDir:
    """The RunDir `surreal launch --resume REF` continues: REF itself, or for a URL a fresh
    local mirror of it (`surreal.runtime.runfolder.storage_sync.prepare_launch_mirror`)."""
    if not is_remote(ref):
        return RunDir(Path(ref))
    return RunDir(prepare_launch_mirror(ref, resume=True), url=ref.rstrip("/"))


def new_remote_run_dir(
    folder: str, experiment: str, trial: str | None, offline: bool = False
) -> RunDir:
    """The RunDir of a new run under the object-store folder `folder`: FOLDER/EXPERIMENT/TRIAL,
    TRIAL the first free t1, t2, ... unless given; FileExistsError when it holds a run.
    `offline` (`surreal launch --dry-run`): the store is not contacted, TRIAL is t1 unless
    given, and nothing checks that it is free."""
    base = S3Folder(folder).child(experiment)
    if offline:
        run = base.child(trial or "t1")
        return RunDir(mirror_path(run.url, "launch"), url=run.url)
    if trial is None:
        taken, i = set(base.children()), 1
        while f"t{i}" in taken:
            i += 1
        trial = f"t{i}"
    run = base.child(trial)
    if run.exists():
        raise FileExistsError(
            f"{run.url} exists; pick another --trial or continue it with --resume {run.url}"
        )
    return RunDir(mirror_path(run.url, "launch"), url=run.url)
