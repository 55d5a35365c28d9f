"""Fuzzing every kind of bound caraml endpoint on 127.0.0.1: junk TCP connections and garbled
messages (caraml.testing's cases) are counted and dropped, and the endpoint keeps working."""

from __future__ import annotations

import time

import pytest
import zmq

import caraml
from caraml.sockets import make_socket
from caraml.testing import free_address, garbled_messages, junk_connections
from caraml.wire import KIND_ERROR
from symphony.testing import scaled

from .test_req_rep import fuzz

pytestmark = pytest.mark.timeout(120)

JUNK, GARBLED = 200, 2000


def echo(request):
    return request


def test_server_answers_after_junk_connections_and_garbled_requests(addr):
    with caraml.Server(addr, echo) as server:
        junk_connections(addr, JUNK, seed=2)
        kinds, _ = fuzz(addr, n=GARBLED, seed=11)  # every garbled request gets an error reply
        assert kinds == [KIND_ERROR] * GARBLED
        with caraml.Client(addr, timeout=30, retries=0) as client:
            assert client.request({"ok": 1}) == {"ok": 1}
        assert server.served == 1 and server.malformed >= GARBLED


def test_proxy_and_its_server_answer_after_junk_connections(addr):
    back = free_address()
    with caraml.Proxy(addr, back), caraml.Server(back, echo, bind=False) as server:
        junk_connections(addr, JUNK, seed=3)
        with caraml.Client(addr, timeout=30, retries=0) as client:
            assert client.request("through") == "through"
        assert server.served == 1


def test_puller_yields_nothing_from_junk_and_garbage_then_the_real_message(addr):
    with caraml.Puller(addr, hwm=10 * GARBLED) as puller:
        junk_connections(addr, JUNK, seed=4)
        leaked = []
        raw = make_socket(zmq.PUSH, hwm=10 * GARBLED)
        try:
            raw.connect(addr)
            for frames in garbled_messages(GARBLED, seed=11):
                raw.send_multipart(frames)
            raw.send_multipart(caraml.serialize("real"), copy=False)  # same pipe: last
            deadline = time.monotonic() + scaled(60)
            while time.monotonic() < deadline:
                try:
                    got = puller.pull(timeout=1)
                except caraml.MalformedMessage:
                    continue
                except caraml.RequestTimeout:
                    continue
                if isinstance(got, str) and got == "real":
                    break
                leaked.append(got)
            else:
                raise AssertionError("the real message never arrived")
        finally:
            raw.close()
        assert leaked == [] and puller.malformed >= GARBLED
