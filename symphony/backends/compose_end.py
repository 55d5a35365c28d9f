"""The end of a compose experiment without a launcher: `Experiment.ends_with` in containers.

Compose containers share no disk and no supervisor, so once the launcher that watched a run is
gone (its terminal closed, `kill -9`), nothing stopped the other processes when the process
named in `ends_with` finished: they ran until `symphony delete`. With `ends_with` set, the
compose backend (`compose_render`) starts every `python ...` process through this wrapper:

- an **ender** (a process named in `ends_with`) runs its command and answers on a TCP port of
  its own (the service `symphony-end-<name>`): `running`, and once the command ended for good
  (exit 0, or one of the restart policy's `final_codes`) `over <code>`. It keeps answering
  until every member has heard `over` (`--linger-s` at most), then exits with the command's
  code. A marker in the container's own filesystem (which docker keeps across its restarts)
  makes a restarted ender (a final code is not 0, so docker's `on-failure` starts it again)
  exit with that code at once, never running the command again: `final_codes` hold on compose.
- a **member** (every other process, and each ender for the others) runs its command and asks each ender every `--poll-s`
  seconds, sending its name; at `over` it stops its command (SIGTERM, SIGKILL after
  `--grace-s`) and exits 0, so docker does not start it again. An ender that cannot be reached
  (not up yet, restarting after a crash) is asked again later. A process whose restart policy is
  `always` runs under docker's `on-failure` instead (`always` would start it again after that
  0): the wrapper itself starts its command again after an exit 0 (`--always`).

Both forward SIGTERM and SIGINT to the command (docker's stop) and exit with its code. The port
reads at most one short line from whoever connects: a name it does not know is counted and
answered like any other, never acted on; junk never stops it.

The wrapper is passed to `python -c` as this file's source, so it uses the standard library
only and needs nothing in the image but the `python` its process runs anyway.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time

MARKER = os.environ.get("SYMPHONY_END_MARKER", "/tmp/.symphony-ended")
"""In the container's writable layer, which docker keeps across its restarts."""
NAME_BYTES = 64


class Ender:
    """The port that says whether the ender's command is over; counts who heard it."""

    def __init__(self, bind_host, port, members):
        self.members, self.heard, self.junk = set(members), set(), 0
        self.over = None  # the command's code once it ended for good
        self.all_heard = threading.Event()
        if not self.members:
            self.all_heard.set()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("0.0.0.0" if bind_host in ("*", "") else bind_host, port))
        self.sock.listen(64)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            try:
                self._answer(conn)
            except OSError:
                self.junk += 1
            finally:
                conn.close()

    def _answer(self, conn):
        conn.settimeout(1.0)
        data = b""
        while b"\n" not in data and len(data) <= NAME_BYTES:
            chunk = conn.recv(NAME_BYTES + 1)
            if not chunk:
                break
            data += chunk
        name = data.split(b"\n", 1)[0].decode("ascii", "replace").strip()
        over = self.over
        conn.sendall(b"running\n" if over is None else f"over {over}\n".encode())
        if name not in self.members:
            self.junk += 1
        elif over is not None:
            self.heard.add(name)
            if self.heard >= self.members:
                self.all_heard.set()


def _ask(address, name, timeout=2.0):
    """The ender's answer ("running", "over N"), or None when it cannot be reached."""
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as conn:
            conn.sendall(name.encode() + b"\n")
            reply = conn.makefile("rb").readline(32).decode("ascii", "replace").strip()
    except (OSError, ValueError):
        return None
    return reply


class Command:
    """The wrapped command, started again on demand; SIGTERM and SIGINT (docker's stop) are
    passed on to it, and once one came the wrapper only waits for it and exits."""

    def __init__(self, argv):
        self.argv, self.child, self.stopping = argv, None, False
        signal.signal(signal.SIGTERM, self._forward)
        signal.signal(signal.SIGINT, self._forward)

    def start(self):
        self.child = subprocess.Popen(self.argv)
        return self.child

    def _forward(self, signum, _frame):
        self.stopping = True
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)
        elif self.child is not None:  # it already ended: the wrapper's own wait ends now
            raise SystemExit(self.child.returncode)


def _stop(child, grace_s):
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(grace_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def ender(args, command):
    if os.path.exists(MARKER):  # this container's command already ended for good
        with open(MARKER) as marker:
            code = int(marker.read().strip() or 0)
        print(f"symphony: {args.name} ended with exit code {code}; not started again", flush=True)
        return code
    port = Ender(args.bind_host, args.announce, args.members.split(",") if args.members else [])
    code, told = watched(args, command)  # another ender's end (`--watch`) ends this one too
    if told:
        return 0
    final = [int(c) for c in args.final.split(",") if c]
    if code != 0 and code not in final:
        return code  # a crash: docker's restart policy decides
    with open(MARKER, "w") as marker:
        marker.write(str(code))
    port.over = code
    heard = port.all_heard.wait(args.linger_s)
    missing = sorted(port.members - port.heard)
    print(
        f"symphony: {args.name} ended with exit code {code}; the others were told"
        + ("" if heard else f" (not heard by {', '.join(missing)} in {args.linger_s:g} s)")
        + (f"; {port.junk} stray connection(s) dropped on its port" if port.junk else ""),
        flush=True,
    )
    return code


def watched(args, command):
    """Run the command, asking each ender of `--watch` every `--poll-s` seconds: (its exit
    code, None), or (0, the answer) once one said `over` and the command was stopped."""
    child = command.start()
    enders = [a for a in args.watch.split(",") if a]
    while True:
        try:
            code = child.wait(args.poll_s)
            if code != 0 or not args.always or command.stopping:
                return code, None
            print(f"symphony: {args.name} exited 0; started again (restart always)", flush=True)
            time.sleep(args.poll_s)  # paces the restarts, as docker's `always` backs off
            child = command.start()
        except subprocess.TimeoutExpired:
            pass
        for address in enders:
            reply = _ask(address, args.name)
            if reply and reply.startswith("over"):
                print(f"symphony: stopping {args.name}: {address} says the experiment is {reply}")
                sys.stdout.flush()
                _stop(child, args.grace_s)
                return 0, reply


def member(args, command):
    return watched(args, command)[0]


def main(argv):
    parser = argparse.ArgumentParser(prog="compose_end")
    parser.add_argument("--name", required=True)
    parser.add_argument("--announce", type=int, help="ender: the port that answers")
    parser.add_argument("--bind-host", default="*")
    parser.add_argument("--members", default="", help="ender: names of the others")
    parser.add_argument("--final", default="", help="ender: final exit codes, e.g. 73,75")
    parser.add_argument("--linger-s", type=float, default=60.0)
    parser.add_argument("--watch", default="", help="member: HOST:PORT of each ender")
    parser.add_argument("--poll-s", type=float, default=2.0)
    parser.add_argument("--grace-s", type=float, default=8.0)
    parser.add_argument("--always", action="store_true", help="member: start it again after 0")
    if "--" not in argv:
        parser.error("give the command after --")
    split = argv.index("--")
    args, command = parser.parse_args(argv[:split]), argv[split + 1 :]
    if not command:
        parser.error("give the command after --")
    run = Command(command)
    return ender(args, run) if args.announce else member(args, run)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
