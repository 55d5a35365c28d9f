"""One node of the ring: receive the counter from the previous node, add one, pass it on.

Plain sockets and the SYMPH_* environment only (no symphony import), so it runs on any backend
and in any image with Python 3. Node 0 starts the counter. The node whose increment reaches
SIZE * ROUNDS sends a stop token around the ring; every node forwards it and exits, and the
node that sent it exits when it comes back. ROUNDS=0 runs until stopped; then a node that was
restarted rejoins the ring (its predecessor reconnects to it, it connects to its successor) and
node 0 injects a new token when none came by for a while, so the count goes on after a crash.
"""

import argparse
import json
import os
import queue
import socket
import threading
import time


def service(name: str) -> tuple[str, int]:
    """(host, port) of a declared service, from the symphony address contract."""
    prefix = "SYMPH_" + name.upper().replace("-", "_")
    return os.environ[f"{prefix}_HOST"], int(os.environ[f"{prefix}_PORT"])


def serve(port: int, bind_host: str, inbox: queue.Queue) -> None:
    """Accept the predecessor (again after it restarts) and queue every message it sends."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("" if bind_host == "*" else bind_host, port))
    listener.listen()
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_read, args=(conn, inbox), daemon=True).start()


def _read(conn: socket.socket, inbox: queue.Queue) -> None:
    with conn, conn.makefile() as lines:
        for line in lines:
            inbox.put(json.loads(line))


class Sender:
    """A connection to the next node that reconnects (with a deadline) when it breaks."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.address, self.sock = address, None

    def send(self, message: dict, deadline_s: float = 60.0) -> None:
        data = (json.dumps(message) + "\n").encode()
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(self.address, timeout=5)
                self.sock.sendall(data)
                return
            except OSError:
                self.sock = None
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--hop-delay", type=float, default=0.05)
    args = parser.parse_args()
    me, after = f"ring-{args.index}", f"ring-{(args.index + 1) % args.size}"
    inbox: queue.Queue = queue.Queue()
    bind_host = os.environ.get("SYMPH_BIND_HOST", "*")
    threading.Thread(target=serve, args=(service(me)[1], bind_host, inbox), daemon=True).start()
    nxt = Sender(service(after))
    limit = args.size * args.rounds
    print(f"node {args.index} listening on {me}, passing to {after}", flush=True)
    if args.index == 0:
        nxt.send({"count": 1, "stop": False, "origin": 0})
    stopping = False  # this node sent the stop token and waits for it to come back
    while True:
        try:
            msg = inbox.get(timeout=5.0)
        except queue.Empty:
            if args.index == 0 and not limit:  # endless ring: the token died with a crashed node
                print("node 0 re-injects a token", flush=True)
                nxt.send({"count": 1, "stop": False, "origin": 0})
            continue
        if msg["stop"]:
            print(f"node {args.index} got stop at count {msg['count']}", flush=True)
            if msg["origin"] != args.index:
                nxt.send(msg)
            return
        if stopping:
            continue  # a stray second token; the next node may be gone already
        count = msg["count"] + 1
        print(f"node {args.index} got count {msg['count']}", flush=True)
        time.sleep(args.hop_delay)  # pacing, so a ring that runs forever does not spin the CPU
        stopping = bool(limit) and count >= limit
        nxt.send({"count": count, "stop": stopping, "origin": args.index})


if __name__ == "__main__":
    main()
