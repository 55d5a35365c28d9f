"""Run one process for a terminal-based backend (tmux): tee its output, restart it, report state.

    python -m symphony.local.runner STATE_JSON LOG_FILE RESTART_JSON [--ends-experiment] -- COMMAND...

The runner is what a tmux pane runs. It starts COMMAND in its own session, copies everything the
command prints both to the pane and to LOG_FILE (so logs are complete, not only what the pane
shows), restarts it per RESTART_JSON (a RestartPolicy as a mapping), and keeps STATE_JSON current:

    {"runner_pid", "state", "pid", "started", "ended", "exit_code", "restarts",
     "last_end"}

On SIGTERM, SIGINT or SIGHUP it stops the command's tree (SIGTERM, grace, SIGKILL), records
"stopped" and exits. It exits with the command's last exit code.

With `--ends-experiment` (a process named in `Experiment.ends_with`) the command's end for good
(exit 0, or failed past its restarts; not a stop) is the experiment's end: the runner sends
SIGTERM to every other runner whose state file sits beside STATE_JSON and that carries this
runner's SYMPHONY_RUN_ID, and each stops its command as on `symphony delete`. So a tmux
experiment ends by itself, as the local supervisor ends one, with no launcher watching.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from symphony.local import proctree
from symphony.local.supervisor import write_json
from symphony.resources import ending, restart_mark
from symphony.spec import RestartPolicy
from symphony.states import EXITED, FAILED, RESTARTING, RUNNING, STOPPED

GRACE_S = 5.0
ENDS_FLAG = "--ends-experiment"


class Runner:
    """Supervises one command; see the module docstring."""

    def __init__(
        self,
        state_path: Path,
        log_path: Path,
        policy: RestartPolicy,
        argv: list[str],
        ends_experiment: bool = False,
    ) -> None:
        self.state_path, self.log_path, self.policy, self.argv = state_path, log_path, policy, argv
        self.ends_experiment = ends_experiment
        self.state: dict[str, Any] = {
            "runner_pid": os.getpid(),
            "state": RUNNING,
            "pid": None,
            "started": None,
            "ended": None,
            "exit_code": None,
            "restarts": 0,
            "last_end": None,
        }
        self.stop_requested = False
        self.restart_times: list[float] = []  # within policy.window_s: the backoff
        self.crash_times: list[float] = []  # within policy.window_s: max_restarts
        self.child: subprocess.Popen | None = None

    def run(self) -> int:
        """Run, restart and report until the command is done or a stop is requested."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._request_stop)
        while True:
            code = self._run_once()
            if self.stop_requested:
                return self._finish(STOPPED, code)
            now = time.time()
            crashes = self.policy.counted(self.crash_times, now)
            self.state["last_end"] = ending(code)
            if not self.policy.should_restart(code, crashes if self.policy.counts(code) else 0):
                self._finish(EXITED if code == 0 else FAILED, code)
                if self.ends_experiment:
                    self._stop_the_others()
                return code
            delay = self.policy.delay(self.policy.counted(self.restart_times, now))
            self._save(state=RESTARTING, exit_code=code)
            self._log(f"{self.state['last_end']}; restarting in {delay:g}s")
            deadline = time.monotonic() + delay
            while time.monotonic() < deadline and not self.stop_requested:
                time.sleep(0.05)
            if self.stop_requested:
                return self._finish(STOPPED, code)
            self.state["restarts"] += 1
            self.restart_times.append(time.time())
            if self.policy.counts(code):
                self.crash_times.append(time.time())
            window = self.policy.window_s
            within = "" if window is None else f" in {window:g}s"
            crashes = self.policy.counted(self.crash_times, time.time())
            self._log(
                f"restart {self.state['restarts']} ({crashes}/{self.policy.max_restarts} "
                f"crashes{within})"
            )
            with open(self.log_path, "a") as log:  # above the new attempt's lines
                log.write(restart_mark(code, self.state["restarts"] + 1) + "\n")

    def _run_once(self) -> int:
        self.child = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=proctree.die_with_parent,
        )
        started = proctree.create_time(self.child.pid) or time.time()  # identifies the pid later
        self._save(state=RUNNING, pid=self.child.pid, started=started, ended=None, exit_code=None)
        tee = threading.Thread(target=self._tee, args=(self.child.stdout,), daemon=True)
        tee.start()
        while self.child.poll() is None:
            if self.stop_requested:
                proctree.stop_all([self.child.pid], None, GRACE_S)
            time.sleep(0.05)
        # Children that outlived the command would keep the pipe (and themselves) alive.
        proctree.terminate(proctree.tree(self.child.pid), 1.0)
        tee.join(timeout=2.0)
        self._save(ended=time.time(), pid=None)
        return self.child.returncode

    def _tee(self, pipe) -> None:
        with open(self.log_path, "ab") as log:
            while chunk := os.read(pipe.fileno(), 65536):
                log.write(chunk)
                log.flush()
                try:
                    sys.stdout.buffer.write(chunk)
                    sys.stdout.buffer.flush()
                except OSError:
                    pass  # the pane is gone; the log file still gets everything

    def _log(self, text: str) -> None:
        line = f"[symphony] {time.strftime('%H:%M:%S')} {text}\n"
        with open(self.log_path, "a") as log:
            log.write(line)
        print(line, end="", flush=True)

    def _stop_the_others(self) -> None:
        """SIGTERM to the experiment's other runners: those with a state file beside this one's
        and this runner's run id (a pid that was reused since is not one of them)."""
        run_id = os.environ.get(proctree.RUN_ID_ENV)
        if not run_id:
            self._log("ended; no run id to find the other processes by: they keep running")
            return
        self._log("ended: it ends the experiment, stopping the other processes")
        ours = {p.pid for p in proctree.marked(run_id)}
        for path in sorted(self.state_path.parent.glob("*.json")):
            pid = (read_runner_state(path) or {}).get("runner_pid")
            if path != self.state_path and pid in ours:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass  # it ended meanwhile

    def _request_stop(self, *_: Any) -> None:
        self.stop_requested = True

    def _finish(self, state: str, code: int) -> int:
        self._save(state=state, exit_code=code)
        return code

    def _save(self, **changes: Any) -> None:
        self.state.update(changes)
        write_json(self.state_path, self.state)


def read_runner_state(path: Path) -> dict[str, Any] | None:
    """A runner's last state (None before it wrote one)."""
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def main(argv: list[str]) -> int:
    """Parse `STATE LOG RESTART_JSON [--ends-experiment] -- COMMAND...` and run."""
    split = argv.index("--") if "--" in argv else -1
    flags = argv[3:split] if split >= 3 else None
    if flags is None or flags not in ([], [ENDS_FLAG]) or len(argv) <= split + 1:
        print(
            "usage: python -m symphony.local.runner STATE LOG RESTART_JSON "
            f"[{ENDS_FLAG}] -- COMMAND...",
            file=sys.stderr,
        )
        return 2
    policy = RestartPolicy(**json.loads(argv[2]))
    return Runner(Path(argv[0]), Path(argv[1]), policy, argv[split + 1 :], bool(flags)).run()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
