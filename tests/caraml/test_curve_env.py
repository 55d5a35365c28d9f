"""CARAML_CURVE_KEYS: every endpoint uses the experiment's keys; a peer without them gets nothing."""

from __future__ import annotations

import stat

import pytest

import caraml
from caraml.curve_env import ENV

pytestmark = pytest.mark.timeout(60)


def echo(request):
    return request


@pytest.fixture
def keys(tmp_path, monkeypatch):
    folder = caraml.write_keys(tmp_path / "keys")
    monkeypatch.setenv(ENV, str(folder))
    return folder


def test_key_files_are_private(keys):
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    names = sorted(p.name for p in keys.iterdir())
    assert names == ["client.key", "client.key_secret", "server.key", "server.key_secret"]
    for file in keys.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        caraml.write_keys(keys)


def test_keyed_client_served_plain_and_foreign_clients_get_nothing(
    keys, addr, tmp_path, monkeypatch
):
    with caraml.Server(addr, echo) as server:
        server.start()
        assert server.curve is not None  # a Curve server without any curve= argument
        with caraml.Client(addr, timeout=0.5, retries=0) as client:
            assert client.request({"x": b"data"}) == {"x": b"data"}
        foreign = caraml.write_keys(tmp_path / "other")
        monkeypatch.setenv(ENV, str(foreign))  # another experiment's keys
        with caraml.Client(addr, timeout=0.5, retries=1) as stranger:
            with pytest.raises(caraml.RequestTimeout):
                stranger.request("let me in")
        monkeypatch.delenv(ENV)  # no keys at all: plain TCP
        with caraml.Client(addr, timeout=0.5, retries=1) as plain:
            assert plain.curve is None
            with pytest.raises(caraml.RequestTimeout):
                plain.request("no keys")
        assert server.served == 1


def test_client_keeps_its_keys_after_a_lost_reply(keys, addr):
    with caraml.Client(addr, timeout=0.3, retries=1) as client:
        with pytest.raises(caraml.RequestTimeout):
            client.request("nobody there yet")  # resets the REQ socket twice
        with caraml.Server(addr, echo) as server:
            server.start()
            assert client.request("now", timeout=5) == "now"


def test_push_pull_only_keyed_pushers_arrive(keys, addr, monkeypatch):
    with caraml.Puller(addr) as puller:
        monkeypatch.delenv(ENV)
        with caraml.Pusher(addr) as plain:
            plain.push("plain")
        monkeypatch.setenv(ENV, str(keys))
        with caraml.Pusher(addr) as keyed:
            keyed.push("keyed")
            assert puller.pull(timeout=10) == "keyed"
        with pytest.raises(caraml.RequestTimeout):
            puller.pull(timeout=0.5)


def test_proxy_under_curve(keys):
    from caraml.testing import free_address

    front, back = free_address(), free_address()
    with caraml.Proxy(front, back), caraml.Server(back, echo, bind=False) as server:
        server.start()
        with caraml.Client(front, timeout=5) as client:
            assert client.request("via proxy") == "via proxy"


def test_unreadable_key_folder_is_an_error(tmp_path, monkeypatch, addr):
    monkeypatch.setenv(ENV, str(tmp_path / "missing"))
    with pytest.raises(caraml.CaramlError, match=ENV):
        caraml.Client(addr)
