"""Fixtures for symphony tests: an isolated state directory and tmux server per test."""

import shutil

import pytest

from symphony.records import Records
from symphony.testing import kill_tmux_server, stop_everything, tmux_socket_name


@pytest.fixture
def symphony_home(tmp_path, monkeypatch):
    """SYMPHONY_HOME in tmp_path (inherited by CLI subprocesses); no user config file."""
    home = tmp_path / "symphony-home"
    monkeypatch.setenv("SYMPHONY_HOME", str(home))
    monkeypatch.setenv("SYMPHONY_CONFIG", str(tmp_path / "no-config.yaml"))
    yield home
    stop_everything(Records(home))  # a test that failed half-way leaves no process behind


@pytest.fixture
def records(symphony_home):
    """The Records of the isolated state directory."""
    return Records(symphony_home)


@pytest.fixture
def tmux_socket(monkeypatch):
    """A tmux server of this test's own (its socket name is in SYMPHONY_TMUX_SOCKET)."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed (scripts/install-system-deps.sh installs it)")
    name = tmux_socket_name()
    monkeypatch.setenv("SYMPHONY_TMUX_SOCKET", name)
    yield name
    kill_tmux_server(name)
