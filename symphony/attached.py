"""Stream an attached experiment's output to the terminal, each line prefixed by its process.

Like `docker compose up`: `actor-0  | a line it printed`. Backends that write a log file per
process (local, tmux, slurm) are tailed from those files by one thread, and whatever is left in
the files when the experiment ends is printed before `stop()` returns, so no last line is lost.
Other backends (compose, kube, test) are followed through `Backend.logs(follow=True)`, one
daemon thread per process.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TextIO

from symphony.backends.base import Backend
from symphony.records import ExperimentRecord

FILE_BACKENDS = ("local", "tmux", "slurm")
POLL_S = 0.1


class OutputStreamer:
    """Prints every process's new lines to `out` as `NAME | line` until `stop()`.

    Args:
        backend: the experiment's backend.
        record: the launched experiment's record.
        out: where the lines go (the terminal's stdout).
    """

    def __init__(self, backend: Backend, record: ExperimentRecord, out: TextIO) -> None:
        self.backend = backend
        self.record = record
        self.out = out
        self.names = record.experiment().process_names()
        self.width = max((len(n) for n in self.names), default=0)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> OutputStreamer:
        """Start following the output (call right after the record exists, before launching)."""
        if self.backend.name in FILE_BACKENDS:
            paths = {n: self.record.log_path(n) for n in self.names}
            self.threads = [threading.Thread(target=self._tail_files, args=(paths,), daemon=True)]
        else:
            self.threads = [
                threading.Thread(target=self._follow, args=(n,), daemon=True) for n in self.names
            ]
        for thread in self.threads:
            thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """The experiment ended: print what is left and stop following."""
        self.done.set()
        for thread in self.threads:
            thread.join(timeout)

    def emit(self, name: str, line: str) -> None:
        """Print one line of process `name`, prefixed."""
        with self.lock:
            self.out.write(f"{name.ljust(self.width)} | {line.rstrip(chr(10))}\n")
            self.out.flush()

    def _tail_files(self, paths: dict[str, Path]) -> None:
        files: dict[str, TextIO] = {}
        partial = dict.fromkeys(paths, "")
        try:
            while True:
                last_round = self.done.is_set()  # read once more after the end: nothing is lost
                for name, path in paths.items():
                    if name not in files:
                        try:
                            files[name] = open(path, errors="replace")  # noqa: SIM115
                        except FileNotFoundError:
                            continue
                    for chunk in iter(files[name].readline, ""):
                        partial[name] += chunk
                        if partial[name].endswith("\n"):
                            self.emit(name, partial[name])
                            partial[name] = ""
                if last_round:
                    break
                self.done.wait(POLL_S)
            for name, rest in partial.items():
                if rest:
                    self.emit(name, rest)
        finally:
            for f in files.values():
                f.close()

    def _follow(self, name: str) -> None:
        """Follow one process through the backend; retried until it has started (or the end)."""
        seen = 0
        while True:
            try:
                count = 0
                for line in self.backend.logs(self.record, name, follow=True):
                    count += 1
                    if count > seen:  # a retry starts from the top: skip what was printed
                        self.emit(name, line)
                        seen = count
                if seen or self.done.is_set():
                    return
            except Exception:  # noqa: BLE001 - not started yet (no container/pod): try again
                if self.done.is_set():
                    return
            self.done.wait(0.5)
