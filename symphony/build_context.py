"""Assemble one docker build context from several local folders and files, with excludes."""

from __future__ import annotations

import fnmatch
import io
import os
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from symphony.errors import SymphonyError

#: Excluded from every context unless the user adds them back explicitly as a file entry.
DEFAULT_EXCLUDES = ("**/__pycache__", "**/*.pyc", "**/.git", "**/.venv", "**/.pytest_cache")


class ContextError(SymphonyError, ValueError):
    """A build context entry is missing or maps two sources onto one path."""


@dataclass(frozen=True)
class ContextEntry:
    """One local file or folder copied into the context at `dest` (a relative POSIX path)."""

    src: Path
    dest: str

    @classmethod
    def parse(cls, text: str, base: Path | None = None) -> ContextEntry:
        """Parses ``SRC`` or ``SRC:DEST``; DEST defaults to SRC's name, SRC is relative to `base`.

        Args:
            text: the entry as written on the command line or in a build config.
            base: folder that relative sources are resolved against (default: the cwd).
        """
        src, _, dest = text.partition(":")
        return cls.of(src, dest or None, base)

    @classmethod
    def of(cls, src: str | Path, dest: str | None = None, base: Path | None = None) -> ContextEntry:
        """Builds an entry from a source path and an optional destination inside the context."""
        path = Path(os.path.expanduser(str(src)))
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        path = path.resolve()
        if not path.exists():
            raise ContextError(
                f"build context source {src!r} does not exist (resolved to {path}); "
                "fix the path in the build config or on the command line"
            )
        target = dest if dest is not None else path.name
        norm = PurePosixPath(target.strip("/") or ".")
        if ".." in norm.parts:
            raise ContextError(
                f"destination {target!r} leaves the build context; use a path inside it"
            )
        return cls(path, str(norm))


def is_excluded(rel: str, patterns: Iterable[str]) -> bool:
    """True when context path `rel` (or a folder above it) matches an exclude pattern.

    Patterns follow `.dockerignore` loosely: ``*`` does not cross ``/``, a leading ``**/``
    matches at any depth, and a pattern that matches a folder excludes everything below it.
    """
    parts = PurePosixPath(rel).parts
    for pattern in patterns:
        pat = pattern.strip("/")
        deep = pat.startswith("**/")
        core = pat[3:] if deep else pat
        n = core.count("/") + 1
        starts = range(len(parts) - n + 1) if deep else range(1 if len(parts) >= n else 0)
        if any(_match("/".join(parts[i : i + n]), core) for i in starts):
            return True
    return False


def _match(path: str, pattern: str) -> bool:
    """fnmatch where ``*`` and ``?`` do not cross a ``/``."""
    if path.count("/") != pattern.count("/"):
        return False
    return all(
        fnmatch.fnmatchcase(p, q) for p, q in zip(path.split("/"), pattern.split("/"), strict=True)
    )


def iter_context(
    entries: Iterable[ContextEntry], excludes: Iterable[str] = DEFAULT_EXCLUDES
) -> Iterator[tuple[Path, str]]:
    """Yields (local path, context path) for every file and folder the context will hold.

    Raises:
        ContextError: when two entries put different sources at the same context path.
    """
    patterns = list(excludes)
    seen: dict[str, Path] = {}
    for entry in entries:
        for local, rel in _walk(entry, patterns):
            if rel in seen and seen[rel] != local and not local.is_dir():
                raise ContextError(
                    f"context path {rel!r} comes from both {seen[rel]} and {local}; "
                    "give one of them another destination (SRC:DEST)"
                )
            if rel not in seen:
                seen[rel] = local
                yield local, rel


def _walk(entry: ContextEntry, patterns: list[str]) -> Iterator[tuple[Path, str]]:
    if entry.src.is_file():
        if entry.dest != ".":  # an explicitly named file is never excluded
            yield entry.src, entry.dest
        return
    for root, dirs, files in os.walk(entry.src):
        rel_root = PurePosixPath(entry.dest) / Path(root).relative_to(entry.src).as_posix()
        dirs[:] = sorted(d for d in dirs if not is_excluded(_rel(rel_root / d), patterns))
        if _rel(rel_root) != ".":
            yield Path(root), _rel(rel_root)
        for name in sorted(files):
            rel = _rel(rel_root / name)
            if not is_excluded(rel, patterns):
                yield Path(root) / name, rel


def _rel(path: PurePosixPath) -> str:
    text = str(path)
    return text[2:] if text.startswith("./") else text


def write_context(
    entries: Iterable[ContextEntry],
    fileobj: io.IOBase,
    excludes: Iterable[str] = DEFAULT_EXCLUDES,
    dockerfile: Path | None = None,
) -> list[str]:
    """Writes the context as an uncompressed tar to `fileobj`; returns the context paths.

    Every member gets mtime 0 and uid/gid 0 so equal inputs give an equal archive (and the
    builder's cache hits). `dockerfile`, when given, is stored as ``Dockerfile`` at the root.
    """
    names: list[str] = []
    with tarfile.open(fileobj=fileobj, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for local, rel in iter_context(entries, excludes):
            tar.addfile(*_member(tar, local, rel))
            names.append(rel)
        if dockerfile is not None:
            if "Dockerfile" in names:
                raise ContextError(
                    "the context already holds a Dockerfile at its root and a "
                    "dockerfile was given too; drop one of them"
                )
            tar.addfile(*_member(tar, Path(dockerfile), "Dockerfile"))
            names.append("Dockerfile")
    return names


def _member(
    tar: tarfile.TarFile, local: Path, rel: str
) -> tuple[tarfile.TarInfo, io.BufferedReader | None]:
    info = tar.gettarinfo(str(local), arcname=rel)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    if info.isreg():
        return info, io.BytesIO(local.read_bytes())  # type: ignore[return-value]
    return info, None
