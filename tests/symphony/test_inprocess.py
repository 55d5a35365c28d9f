"""The in-process `test` backend: threads run callables (or commands) with real addresses."""

import os
import socket
import sys
from pathlib import Path

import pytest

import symphony
from symphony import Experiment, Process, RestartPolicy
from symphony.loader import load_experiment

pytestmark = pytest.mark.timeout(60)

RING = Path(__file__).resolve().parents[2] / "examples" / "01_ring" / "ring.py"


def _echo_server(ctx):
    addr = ctx.address("echo")
    with socket.socket() as srv:
        srv.bind((addr.bind_host, addr.port))  # 127.0.0.1 on this backend
        srv.listen()
        srv.settimeout(0.1)
        while not ctx.stopped:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(conn.recv(100).upper())
                ctx.log("echoed")


def _client(ctx):
    addr = ctx.address("echo")
    for _ in range(100):
        try:
            with socket.create_connection((addr.host, addr.port), timeout=5) as conn:
                conn.sendall(b"hello")
                ctx.log("reply", conn.recv(100).decode())
                return
        except ConnectionRefusedError:
            ctx.stop_event.wait(0.05)
    raise RuntimeError("no server")


def test_callables_talk_through_their_declared_services(records):
    exp = Experiment("echo").add(
        Process("server", ["unused"]).binds("echo"),
        Process("client", ["unused"]).connects("echo"),
    )
    handle = symphony.launch(
        exp, "test", records=records, targets={"server": _echo_server, "client": _client}
    )
    try:
        assert "".join(handle.backend.logs(handle.record, "client", follow=True)) == "reply HELLO\n"
        status = handle.status()
        assert status.process("client").state == "exited"
        assert status.process("server").state == "running"
    finally:
        final = handle.stop()
    assert {p.state for p in final.processes} == {"exited", "stopped"}
    assert records.load("echo").status == "stopped"
    handle.delete()
    assert not (records.folder / "echo").exists()


def test_restart_policy_applies_to_a_crashing_callable(records):
    calls = []

    def flaky(ctx):
        calls.append(1)
        if len(calls) < 3:
            raise ValueError("boom")

    exp = Experiment("flaky").add(
        Process("p", ["unused"], restart=RestartPolicy("on-failure", 5, 0.01))
    )
    handle = symphony.launch(exp, "test", records=records, targets={"p": flaky})
    status = handle.wait(timeout=30)
    assert (status.process("p").state, status.process("p").restarts) == ("exited", 2)
    assert handle.logs("p").count("ValueError: boom") == 2
    handle.stop()


def test_the_ring_example_runs_as_commands_on_the_test_backend(records, monkeypatch):
    monkeypatch.setenv("RING_ROUNDS", "2")
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    handle = symphony.launch(load_experiment(str(RING)), "test", records=records)
    status = handle.wait(timeout=45)
    assert {p.state for p in status.processes} == {"exited"}
    assert "got stop at count 6" in handle.logs("node-2")
    handle.stop()


def test_an_unknown_target_name_starts_nothing(records):
    exp = Experiment("t").add(Process("p", ["true"]))
    with pytest.raises(symphony.BackendError, match="name no process"):
        symphony.launch(exp, "test", records=records, targets={"q": print})
    assert records.all() == []
