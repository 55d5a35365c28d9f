"""Name resolution for Slurm: services publish host:port as files in the experiment's shared folder.

Hosts are known only once Slurm has allocated a node, so processes cannot get their addresses at
submit time. Instead, inside each job the launcher (`slurm_launcher`) picks a free port on its node
for every service the group binds and publishes `names/<service>.json` (written to a temporary
file, then renamed, so readers never see half a record); for every service the group connects to
it polls for the file until a deadline. The folder must be on a filesystem every node sees (the
symphony state directory, `SYMPHONY_HOME`, on NFS or Lustre), like SRL's name-resolve store.

Each record carries the launch id, so a record left by an earlier launch of the same name is
never taken for a live one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from symphony.errors import BackendError


@dataclass(frozen=True)
class NameRecord:
    """Where one service listens.

    Attributes:
        service: the service name.
        host: host name (or address) of the node that binds it.
        port: TCP port chosen free on that node.
        process: the process that binds it.
        job_id: the Slurm job of that process.
        launch_id: the launch this record belongs to.
    """

    service: str
    host: str
    port: int
    process: str
    job_id: str
    launch_id: str


class NameStore:
    """The `names/` folder of one launch of an experiment.

    Args:
        folder: the experiment's shared folder (the store lives in `folder/names`).
        launch_id: only records of this launch are visible.
    """

    def __init__(self, folder: str | Path, launch_id: str) -> None:
        self.folder = Path(folder) / "names"
        self.launch_id = launch_id

    def publish(self, record: NameRecord) -> None:
        """Write a service's record atomically (temp file + rename)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        final = self.folder / f"{record.service}.json"
        tmp = self.folder / f".{record.service}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(asdict(record)))
        os.replace(tmp, final)

    def lookup(self, service: str) -> NameRecord | None:
        """The record of `service` from this launch, or None while nobody has published it."""
        try:
            data = json.loads((self.folder / f"{service}.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        record = NameRecord(**data)
        return record if record.launch_id == self.launch_id else None

    def resolve(
        self, services: list[str], timeout_s: float, poll_s: float = 0.1
    ) -> dict[str, NameRecord]:
        """Wait until every service in `services` is published; return their records.

        Raises:
            BackendError: some service was not published within `timeout_s` (names them).
        """
        deadline = time.monotonic() + timeout_s
        found: dict[str, NameRecord] = {}
        while True:
            for service in services:
                if service not in found:
                    record = self.lookup(service)
                    if record is not None:
                        found[service] = record
            missing = [s for s in services if s not in found]
            if not missing:
                return found
            if time.monotonic() >= deadline:
                raise BackendError(
                    f"services {missing} were not published in {self.folder} within {timeout_s:.0f} s; "
                    f"check that the jobs that bind them started (`symphony describe`), that the "
                    f"folder is on a filesystem every node shares, or raise resolve_timeout_s"
                )
            time.sleep(poll_s)  # polling a shared filesystem with a deadline, not synchronization

    def clear(self) -> None:
        """Remove every record (before a new launch reuses the folder)."""
        if self.folder.exists():
            for path in self.folder.iterdir():
                path.unlink(missing_ok=True)
