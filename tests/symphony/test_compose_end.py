"""compose_end, the wrapper that ends a compose experiment's other processes once its
`ends_with` process ended for good, run here as plain processes on 127.0.0.1 (the docker run is
in test_compose_docker.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from caraml.testing import free_port
from symphony.backends import compose_end
from symphony.testing import scaled, wait_for

pytestmark = pytest.mark.timeout(120)
WRAPPER = [sys.executable, str(Path(compose_end.__file__))]
FOREVER = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]
UNTIL_STDIN_CLOSES = [sys.executable, "-c", "import sys; sys.stdin.read()"]


def start(args: list[str], command: list[str], marker: Path, **kw) -> subprocess.Popen:
    env = dict(os.environ, SYMPHONY_END_MARKER=str(marker))
    return subprocess.Popen(
        [*WRAPPER, *args, "--", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kw,
    )


def ask(port: int, line: bytes = b"m1\n") -> str | None:
    return compose_end._ask(f"127.0.0.1:{port}", line.decode().strip())


def up(port: int) -> str:
    return wait_for(lambda: ask(port), 30, what="the ender's port to answer")


def test_the_members_stop_once_the_ender_is_over_and_junk_changes_nothing(tmp_path):
    port = free_port()
    ender = start(
        ["--name", "learner", "--announce", str(port), "--bind-host", "127.0.0.1"]
        + ["--members", "m1,m2", "--linger-s", "60"],
        UNTIL_STDIN_CLOSES,
        tmp_path / "learner.ended",
        stdin=subprocess.PIPE,
    )
    assert up(port) == "running"
    members = [
        start(
            ["--name", name, "--watch", f"127.0.0.1:{port}", "--poll-s", "0.2", "--grace-s", "5"],
            FOREVER,
            tmp_path / f"{name}.ended",
        )
        for name in ("m1", "m2")
    ]
    for junk in (b"", b"\x00" * 10_000, b"no newline", "é\n".encode(), b"m3\n", b"m1"):
        with socket.create_connection(("127.0.0.1", port)) as conn:
            conn.sendall(junk)
    assert ask(port, b"stranger\n") == "running"
    assert all(m.poll() is None for m in members)  # nobody stops while the ender runs
    ender.stdin.close()  # the command ends: exit 0
    assert ender.wait(scaled(60)) == 0
    out = ender.stdout.read()
    assert "learner ended with exit code 0; the others were told;" in out, out
    assert "6 stray connection(s) dropped on its port" in out  # 5 junk (m1 is one) + stranger
    for m in members:
        said, _ = m.communicate(timeout=scaled(30))
        assert m.returncode == 0, said
        assert f"127.0.0.1:{port} says the experiment is over 0" in said


def test_a_final_code_ends_it_too_and_a_restarted_ender_never_runs_the_command_again(tmp_path):
    port, marker, ran = free_port(), tmp_path / "learner.ended", tmp_path / "ran"
    command = [sys.executable, "-c", f"open({str(ran)!r}, 'a').write('x'); raise SystemExit(75)"]
    args = ["--name", "learner", "--announce", str(port), "--final", "73,75", "--linger-s", "0"]
    first = start(args, command, marker)
    assert first.wait(scaled(60)) == 75 and ran.read_text() == "x"
    assert marker.read_text() == "75"
    again = start(args, command, marker)  # docker's on-failure starts the container again
    out, _ = again.communicate(timeout=scaled(60))
    assert again.returncode == 75 and ran.read_text() == "x", out
    assert "learner ended with exit code 75; not started again" in out


def test_a_crash_is_left_to_the_restart_policy_and_the_members_go_on(tmp_path):
    port, marker = free_port(), tmp_path / "learner.ended"
    args = ["--name", "learner", "--announce", str(port), "--final", "75"]
    crash = start(args, [sys.executable, "-c", "raise SystemExit(3)"], marker)
    assert crash.wait(scaled(60)) == 3 and not marker.exists()
    member = start(
        ["--name", "m1", "--watch", f"127.0.0.1:{port}", "--poll-s", "0.1"],
        UNTIL_STDIN_CLOSES,
        tmp_path / "m1.ended",
        stdin=subprocess.PIPE,
    )
    with pytest.raises(subprocess.TimeoutExpired):  # the ender is gone: it asks on
        member.wait(1.0)
    member.stdin.close()  # its own command's end is its end, with its code
    assert member.wait(scaled(30)) == 0


def test_sigterm_reaches_the_command_and_its_code_is_the_wrappers(tmp_path):
    member = start(
        ["--name", "m1", "--watch", "127.0.0.1:1", "--poll-s", "0.1"],
        [
            sys.executable,
            "-c",
            "import signal, sys, time\n"
            "signal.signal(signal.SIGTERM, lambda *a: sys.exit(143))\n"
            "print('up', flush=True)\nwhile True: time.sleep(1)",
        ],
        tmp_path / "m1.ended",
    )
    assert member.stdout.readline().strip() == "up"
    member.terminate()
    assert member.wait(scaled(30)) == 143


def test_restart_always_runs_the_command_again_after_0_until_the_end(tmp_path):
    """Docker's `always` would start a member stopped at the end again; the wrapper runs under
    `on-failure` and starts the command again itself after an exit 0 (`--always`)."""
    port, runs = free_port(), tmp_path / "runs"
    ender = start(
        ["--name", "learner", "--announce", str(port), "--members", "m1"],
        UNTIL_STDIN_CLOSES,
        tmp_path / "learner.ended",
        stdin=subprocess.PIPE,
    )
    up(port)
    member = start(
        ["--name", "m1", "--watch", f"127.0.0.1:{port}", "--poll-s", "0.1", "--always"],
        [sys.executable, "-c", f"open({str(runs)!r}, 'a').write('x')"],
        tmp_path / "m1.ended",
    )
    wait_for(lambda: runs.is_file() and len(runs.read_text()) >= 3, 30, what="three runs")
    assert member.poll() is None
    ender.stdin.close()
    assert ender.wait(scaled(60)) == 0 and member.wait(scaled(30)) == 0
    assert "started again (restart always)" in member.stdout.read()


def test_a_stop_while_the_ender_waits_for_its_members_ends_it_at_once_with_its_code(tmp_path):
    """`symphony delete` (docker's SIGTERM) during the linger must not wait it out: docker
    would kill the container at its grace and record 137 instead of the command's 0."""
    port = free_port()
    ender = start(
        ["--name", "learner", "--announce", str(port), "--members", "m1", "--linger-s", "600"],
        [sys.executable, "-c", "pass"],
        tmp_path / "learner.ended",
    )
    assert wait_for(lambda: ask(port, b"probe\n") == "over 0", 30, what="the ender's over")
    assert ender.poll() is None  # m1 never asked: it waits
    ender.terminate()
    assert ender.wait(scaled(30)) == 0


def test_with_two_enders_the_first_end_stops_the_other_ender_and_the_members(tmp_path):
    """`ends_with=[a, b]`: a's end is the experiment's, so b stops like any member."""
    port_a, port_b = free_port(), free_port()
    a = start(
        ["--name", "a", "--announce", str(port_a), "--members", "b,m1"]
        + ["--watch", f"127.0.0.1:{port_b}", "--poll-s", "0.1"],
        UNTIL_STDIN_CLOSES,
        tmp_path / "a.ended",
        stdin=subprocess.PIPE,
    )
    b = start(
        ["--name", "b", "--announce", str(port_b), "--members", "a,m1"]
        + ["--watch", f"127.0.0.1:{port_a}", "--poll-s", "0.1"],
        FOREVER,
        tmp_path / "b.ended",
    )
    m1 = start(
        ["--name", "m1", "--watch", f"127.0.0.1:{port_a},127.0.0.1:{port_b}", "--poll-s", "0.1"],
        FOREVER,
        tmp_path / "m1.ended",
    )
    up(port_a), up(port_b)
    a.stdin.close()
    assert a.wait(scaled(60)) == 0 and b.wait(scaled(30)) == 0 and m1.wait(scaled(30)) == 0
    assert "a ended with exit code 0; the others were told\n" in a.stdout.read()
    assert f"stopping b: 127.0.0.1:{port_a} says the experiment is over 0" in b.stdout.read()
    assert not (tmp_path / "b.ended").exists()  # b did not end for good: a's end ended it
