"""Local mirrors of run folders kept in an object store: what each process fetches and uploads.

Libraries write files (TensorBoard's events, torch's checkpoints), so every process of a run in
`s3://...` works in a local folder, the mirror. The run's processes on one machine share one
mirror (`mirror_path`); each fetches the run files it lacks when it starts (`attached`) and
uploads the files it wrote itself (`track`) every `SURREAL_SYNC_S` seconds (default 3) and when
it ends. `surreal launch` keeps its own mirror (`LaunchSync`): it uploads the run's config before
anything starts, follows the run's status.json from the store, and uploads the logs at the end.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from surreal.runtime.runfolder.storage import NEVER_UPLOADED, S3Folder, StorageError, is_remote

SKIP_ON_START = ("tb/", "logs/")
"""Run files a process does not fetch when it starts (TensorBoard starts a new events file)."""

_TRACKED: set[Path] = set()
_FORGOTTEN: set[Path] = set()
_LOCK = threading.Lock()


def track(path: str | os.PathLike[str]) -> None:
    """Mark a file (or folder) as written by this process: a mirror's syncer uploads it when it
    changes. Cheap and harmless for runs on a local path (nothing uploads them)."""
    with _LOCK:
        _TRACKED.add(Path(path).absolute())


def forget(path: str | os.PathLike[str]) -> None:
    """Mark a file this process wrote (`track`) and has since deleted: a mirror's syncer
    deletes it from the store too, so a later fetch of the run does not bring it back."""
    with _LOCK:
        _TRACKED.discard(Path(path).absolute())
        _FORGOTTEN.add(Path(path).absolute())


def forgotten() -> list[Path]:
    """The files this process deleted (`forget`) and the store may still hold."""
    with _LOCK:
        return sorted(_FORGOTTEN)


def tracked() -> list[Path]:
    """The files and folders this process marked with `track`."""
    with _LOCK:
        return sorted(_TRACKED)


def sync_every_s() -> float:
    """Seconds between uploads: `SURREAL_SYNC_S`, default 3."""
    try:
        return max(0.2, float(os.environ.get("SURREAL_SYNC_S", "3")))
    except ValueError:
        return 3.0


def mirror_root() -> Path:
    """Where mirrors live: `SURREAL_MIRROR_DIR`, default TMPDIR/surreal-mirror-UID."""
    configured = os.environ.get("SURREAL_MIRROR_DIR")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"surreal-mirror-{os.getuid()}"


def mirror_path(url: str, kind: str = "run") -> Path:
    """The local mirror of the run at `url` on this machine (`kind` run: the processes', launch:
    `surreal launch`'s own)."""
    folder = S3Folder(url)
    return mirror_root() / kind / folder.bucket / folder.key


def _state(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_size, st.st_mtime_ns


def _uploadable(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    temporary = name.startswith(".") and (name.endswith(".tmp") or name.endswith(".part"))
    return not temporary and not rel.startswith(NEVER_UPLOADED)


class Mirror:
    """A local folder that stands for the run folder at `url`.

    Remembers the state (size, mtime) of every file it fetched or uploaded, so `push` uploads
    only what changed since.
    """

    def __init__(self, url: str, path: Path) -> None:
        self.remote = S3Folder(url)
        self.path = path
        self.synced: dict[str, tuple[int, int] | None] = {}

    def pull(self, skip: tuple[str, ...] = SKIP_ON_START, only_missing: bool = False) -> int:
        """Fetch the run's files (but `skip`); `only_missing`: keep files already here.
        Returns how many were fetched."""
        fetched = 0
        for obj in self.remote.list():
            if obj.rel.startswith(skip) or not obj.rel:
                continue
            target = self.path / obj.rel
            if only_missing and target.exists():
                continue
            self.remote.download(obj.rel, target, obj.modified)
            self.synced[obj.rel] = _state(target)
            fetched += 1
        return fetched

    def refresh(self, rel: str) -> bool:
        """Fetch `rel` when the store holds a newer copy than this mirror; True if fetched."""
        target, obj = self.path / rel, self.remote.stat(rel)
        local = _state(target)
        if obj is None or (local is not None and obj.modified <= local[1] / 1e9):
            return False
        self.remote.download(rel, target, obj.modified)
        self.synced[rel] = _state(target)
        return True

    def push(self, paths: Iterable[Path]) -> int:
        """Upload the files under `paths` (files or folders inside the mirror) that changed
        since this mirror last fetched or uploaded them. Returns how many it uploaded."""
        root, uploaded = self.path.absolute(), 0
        for path in paths:
            path = Path(path).absolute()
            files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
            for file in files:
                try:
                    rel = file.relative_to(root).as_posix()
                except ValueError:
                    continue  # not a run file (tracked by a process of another run)
                state = _state(file)
                if state is None or not _uploadable(rel) or self.synced.get(rel) == state:
                    continue
                self.remote.upload(file, rel)
                self.synced[rel] = state
                uploaded += 1
        return uploaded

    def delete(self, paths: Iterable[Path]) -> int:
        """Delete from the store the mirror's files `paths` that are gone here (`forget`);
        returns how many it deleted."""
        root, deleted = self.path.absolute(), 0
        for path in paths:
            path = Path(path).absolute()
            try:
                rel = path.relative_to(root).as_posix()
            except ValueError:
                continue
            if not path.exists():
                self.remote.delete(rel)
                self.synced.pop(rel, None)
                deleted += 1
            with _LOCK:
                _FORGOTTEN.discard(path)
        return deleted

    def sync(self) -> None:
        """Upload what this process wrote and delete from the store what it removed."""
        self.push(tracked())
        self.delete(forgotten())

    def push_all(self) -> int:
        """Upload every changed file of the mirror."""
        return self.push([self.path])


class Syncer:
    """Calls `work` every `every_s` seconds on a daemon thread and once more at `close`.
    A failed upload is reported on stderr and retried on the next round; it never ends the
    process."""

    def __init__(self, work, every_s: float | None = None, name: str = "surreal-sync") -> None:
        self.work, self.every_s = work, every_s or sync_every_s()
        self._stop = threading.Event()
        self._warned = False
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> Syncer:
        self._thread.start()
        return self

    def _round(self) -> None:
        try:
            self.work()
        except (StorageError, OSError) as err:
            if not self._warned:
                print(f"surreal: run storage: {err} (retrying)", file=sys.stderr, flush=True)
                self._warned = True

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self._round()

    def close(self) -> None:
        """Stop the thread and do a last round."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=120)
        self._warned = False
        self._round()


@contextmanager
def attached(run_dir: str) -> Iterator[str]:
    """The local folder a component works in: `run_dir` itself, or for a URL the machine's
    mirror of the run (the files it lacks fetched), whose files this process writes are
    uploaded while it runs and when it ends."""
    if not is_remote(run_dir):
        yield run_dir
        return
    mirror = Mirror(run_dir, mirror_path(run_dir))
    mirror.path.mkdir(parents=True, exist_ok=True)
    mirror.pull(only_missing=True)
    syncer = Syncer(mirror.sync).start()
    try:
        yield str(mirror.path)
    finally:
        syncer.close()


class LaunchSync:
    """`surreal launch`'s side of a run in an object store: upload what the launch wrote before
    anything starts, follow the run's status.json while it runs, upload the logs at the end.
    For a run on a local path every method does nothing."""

    def __init__(self, run_dir) -> None:
        url = getattr(run_dir, "url", None)
        self.mirror = Mirror(url, run_dir.path) if url else None
        self.syncer: Syncer | None = None

    def start(self) -> None:
        if self.mirror is None:
            return
        self.mirror.push_all()
        self.syncer = Syncer(lambda: self.mirror.refresh("status.json"), every_s=1.0).start()

    def close(self) -> None:
        if self.mirror is None:
            return
        if self.syncer is not None:
            self.syncer.close()
        try:
            self.mirror.push_all()  # the logs
        except StorageError as err:
            print(f"surreal: could not upload the logs: {err}", file=sys.stderr)


def prepare_launch_mirror(url: str, resume: bool) -> Path:
    """A clean local mirror for `surreal launch` of the run at `url` (its files fetched for
    `--resume`), and no stale copy of the run in this machine's process mirror."""
    path = mirror_path(url, "launch")
    for stale in (path, mirror_path(url)):
        shutil.rmtree(stale, ignore_errors=True)
    path.mkdir(parents=True)
    if resume:
        Mirror(url, path).pull()
    return path


@contextmanager
def reading(ref: str, skip: tuple[str, ...] = SKIP_ON_START) -> Iterator[Path]:
    """A local copy of the run at `ref` for reading (`surreal status`, `surreal eval`):
    `ref` itself for a path, a temporary copy (removed after) for a URL."""
    if not is_remote(ref):
        yield Path(ref)
        return
    S3Folder(ref).check()
    folder = Path(tempfile.mkdtemp(prefix="surreal-read-"))
    try:
        Mirror(ref, folder).pull(skip=skip)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(
                f"{ref} is not a surreal run folder (no config.json there); runs live in "
                "FOLDER/EXPERIMENT/TRIAL, e.g. s3://bucket/runs/ppo-cartpole-v1/t1"
            )
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def check_folder(folder: str, contact: bool = True) -> None:
    """For an object-store `--folder`/`--resume`: raise StorageError (one line) unless it names
    a bucket and (`contact`) the bucket answers; before anything is written."""
    if is_remote(folder):
        remote = S3Folder(folder)  # the URL's form: no store contacted
        if contact:
            remote.check()
