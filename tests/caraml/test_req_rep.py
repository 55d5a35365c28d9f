"""Request-reply: round trips, error replies, timeout with reset and retry, fuzzed servers."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import caraml
from caraml.reader import decode
from caraml.sockets import make_socket, recv_frames
from caraml.testing import garbled_messages, junk_connections
from caraml.wire import KIND_ERROR

pytestmark = pytest.mark.timeout(60)


def double(request):
    return {"x": request["x"] * 2, "n": request["n"] + 1}


def test_request_returns_the_handlers_reply(addr):
    with caraml.Server(addr, double) as server, caraml.Client(addr) as client:
        for n in range(20):
            reply = client.request({"x": np.arange(n * 1000, dtype=np.int32), "n": n})
            assert reply["n"] == n + 1
            assert np.array_equal(reply["x"], np.arange(n * 1000, dtype=np.int32) * 2)
        assert server.served == 20


def test_handler_exception_becomes_remote_error_and_server_goes_on(addr):
    with caraml.Server(addr, double) as server, caraml.Client(addr) as client:
        with pytest.raises(caraml.RemoteError, match="KeyError"):
            client.request({"no": "x"})
        assert client.request({"x": 1, "n": 1}) == {"x": 2, "n": 2}
        assert server.handler_errors == 1


def test_timeout_when_no_server_then_recovery_when_it_comes(addr):
    with caraml.Client(addr, timeout=0.1, retries=1) as client:
        with pytest.raises(caraml.RequestTimeout, match="2 attempts"):
            client.request({"x": 1, "n": 0})
        with caraml.Server(addr, double):
            assert client.request({"x": 3, "n": 0}, timeout=5) == {"x": 6, "n": 1}


def test_slow_reply_is_retried_on_a_fresh_socket(addr):
    never = threading.Event()
    calls = []

    def slow_first(request):
        calls.append(request)
        if len(calls) == 1:
            never.wait(0.6)  # a slow handler: the first request outlives the client's timeout
        return request

    with (
        caraml.Server(addr, slow_first) as server,
        caraml.Client(addr, timeout=0.2, retries=5) as client,
    ):
        assert client.request("again") == "again"
        assert server.served >= 1 and len(calls) >= 2  # at-least-once: a duplicate was handled


def test_serve_forever_in_the_caller_stops_on_request(addr):
    server = caraml.Server(addr, double)
    thread = threading.Thread(target=server.serve_forever)
    thread.start()
    try:
        with caraml.Client(addr) as client:
            assert client.request({"x": 2, "n": 0}) == {"x": 4, "n": 1}
    finally:
        server.stop()
        thread.join(10)
    assert not thread.is_alive()


def fuzz(send_address, n=10_000, seed=4, window=500):
    """Send n garbled requests through a DEALER, up to ``window`` unanswered, and return the
    replies' kinds and the last reply's text (a ROUTER drops replies beyond its high-water mark,
    so the window keeps a proxy from dropping any)."""
    dealer = make_socket(caraml.req_rep.zmq.DEALER)
    kinds = []
    try:
        dealer.connect(send_address)
        for sent, frames in enumerate(garbled_messages(n, seed=seed), start=1):
            dealer.send_multipart([b"", *frames])
            while len(kinds) < sent and (sent - len(kinds) >= window or sent == n):
                assert dealer.poll(20_000), "server stopped answering"
                kind, text = decode(recv_frames(dealer)[1:])
                kinds.append(kind)
        return kinds, text
    finally:
        dealer.close()


def test_ten_thousand_garbled_requests_get_error_replies_and_server_still_answers(addr):
    with caraml.Server(addr, double) as server:
        kinds, text = fuzz(addr)
        assert kinds == [KIND_ERROR] * 10_000 and "malformed" in text
        assert server.malformed == 10_000
        with caraml.Client(addr) as client:
            assert client.request({"x": 5, "n": 5}) == {"x": 10, "n": 6}


def test_replies_still_arrive_after_200_raw_junk_connections(addr):
    with caraml.Server(addr, double) as server:
        junk_connections(addr, 200, seed=1)
        with caraml.Client(addr, timeout=10, retries=0) as client:  # no retry hides a lost reply
            for n in range(5):
                assert client.request({"x": n, "n": n}) == {"x": 2 * n, "n": n + 1}
        assert server.served == 5
        assert server.dropped > 0 and server.malformed >= server.dropped  # counted, not fatal
