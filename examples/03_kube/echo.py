"""The smallest kube example: an echo server and a client, runnable on any cluster as-is.

symphony launch examples/03_kube/echo.py --backend kube --dry-run -o output=/tmp/echo
symphony launch examples/03_kube/echo.py --backend kube --detach
symphony logs echo client        # echoed: hello from symphony
"""

from symphony import Experiment, Process, RestartPolicy

SERVER = """
import os, socket
port = int(os.environ["SYMPH_ECHO_PORT"])
srv = socket.create_server(("", port))
print("echo server on", port, flush=True)
while True:
    conn, _ = srv.accept()
    with conn:
        conn.sendall(conn.recv(1024))
"""

CLIENT = """
import os, socket, time
addr = (os.environ["SYMPH_ECHO_HOST"], int(os.environ["SYMPH_ECHO_PORT"]))
for attempt in range(60):
    try:
        with socket.create_connection(addr, timeout=5) as conn:
            conn.sendall(b"hello from symphony")
            print("echoed:", conn.recv(1024).decode(), flush=True)
            break
    except OSError:
        time.sleep(1)  # the server's pod may still be starting
else:
    raise SystemExit("no echo server at %s:%s" % addr)
"""


def make_experiment() -> Experiment:
    """An echo server (a Deployment: it restarts always) and a client (a Job: it ends)."""
    exp = Experiment("echo", image="python:3.11-slim")
    exp.add(
        Process("server", ["python", "-c", SERVER], restart=RestartPolicy(mode="always")).binds(
            "echo"
        )
    )
    exp.add(
        Process(
            "client", ["python", "-c", CLIENT], restart=RestartPolicy(mode="on-failure")
        ).connects("echo")
    )
    return exp
