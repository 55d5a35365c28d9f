"""CurveZMQ: a client with an allowed key is served; any other peer is refused."""

from __future__ import annotations

import pytest

import caraml

pytestmark = pytest.mark.timeout(60)


def echo(request):
    return request


def test_only_allowed_client_keys_get_answers(addr):
    server_keys, good, bad = caraml.generate_keys(), caraml.generate_keys(), caraml.generate_keys()
    curve = caraml.CurveServer(server_keys, allowed_clients=[good.public])
    with caraml.Server(addr, echo, curve=curve):
        with caraml.Client(addr, curve=caraml.CurveClient(good, server_keys.public)) as client:
            assert client.request({"secret": b"data"}) == {"secret": b"data"}
        with caraml.Client(
            addr, timeout=0.3, retries=0, curve=caraml.CurveClient(bad, server_keys.public)
        ) as stranger:
            with pytest.raises(caraml.RequestTimeout):
                stranger.request("let me in")
        with caraml.Client(addr, timeout=0.3, retries=0) as plain:
            with pytest.raises(caraml.RequestTimeout):
                plain.request("no keys")


def test_curve_push_pull(addr):
    server_keys, client_keys = caraml.generate_keys(), caraml.generate_keys()
    with (
        caraml.Puller(addr, curve=caraml.CurveServer(server_keys, [client_keys.public])) as puller,
        caraml.Pusher(addr, curve=caraml.CurveClient(client_keys, server_keys.public)) as pusher,
    ):
        pusher.push([1, 2, 3])
        assert puller.pull(timeout=10) == [1, 2, 3]
