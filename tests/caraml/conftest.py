"""Shared fixtures: every caraml test runs under a leak check and gets free loopback addresses."""

from __future__ import annotations

import pytest

from caraml.testing import LeakChecker, free_address


@pytest.fixture(autouse=True)
def no_leaks():
    """Fail the test if it leaves threads, caraml sockets, shm segments or processes behind."""
    checker = LeakChecker()
    yield
    checker.check()


@pytest.fixture
def addr() -> str:
    """A free tcp://127.0.0.1:PORT address."""
    return free_address()


@pytest.fixture
def ipc_addr(tmp_path) -> str:
    """A fresh ipc:// address in the test's temporary directory."""
    return f"ipc://{tmp_path}/sock"
