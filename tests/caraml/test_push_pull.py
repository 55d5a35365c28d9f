"""Push-pull: objects arrive in order, timeouts raise, garbage is rejected without harm."""

from __future__ import annotations

import numpy as np
import pytest

import caraml
from caraml.sockets import make_socket
from caraml.testing import garbled_messages

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["tcp", "ipc"])
def test_messages_arrive_complete_and_in_order(kind, addr, ipc_addr):
    address = addr if kind == "tcp" else ipc_addr
    with caraml.Puller(address) as puller, caraml.Pusher(address) as pusher:
        for i in range(200):
            pusher.push({"i": i, "obs": np.full((3, 4), i, np.float32), "big": np.arange(i * 100)})
        for i in range(200):
            got = puller.pull(timeout=10)
            assert got["i"] == i
            assert np.array_equal(got["obs"], np.full((3, 4), i, np.float32))
            assert np.array_equal(got["big"], np.arange(i * 100))


def test_pull_timeout_raises_request_timeout(addr):
    with caraml.Puller(addr) as puller:
        with pytest.raises(caraml.RequestTimeout, match="within 0.05 s"):
            puller.pull(timeout=0.05)


def test_binding_a_used_address_says_what_to_do(addr):
    with caraml.Puller(addr):
        with pytest.raises(caraml.CaramlError, match="free_port"):
            caraml.Puller(addr)


@pytest.mark.integration
def test_ten_thousand_garbled_messages_are_dropped_whole_and_pulling_goes_on(addr):
    messages = list(garbled_messages(10_000, seed=2))
    with caraml.Puller(addr, hwm=20_000) as puller:
        raw = make_socket(caraml.push_pull.zmq.PUSH, hwm=20_000)
        try:
            raw.connect(puller.address)
            for frames in messages:
                raw.send_multipart(frames)
            raw.send_multipart(caraml.serialize("still alive"), copy=False)  # same pipe: last
            leaked = []
            while True:
                try:
                    got = puller.pull(timeout=10)
                except caraml.MalformedMessage:
                    continue
                if isinstance(got, str) and got == "still alive":
                    break
                leaked.append(got)
        finally:
            raw.close()
        # every garbled multipart message is dropped as one, none yields an object (not even
        # one whose first part alone would be a valid message)
        assert leaked == []
        assert puller.malformed == 10_000


def test_socket_max_size_drops_oversized_messages_and_keeps_the_rest(addr):
    with caraml.Puller(addr, max_size=10_000) as puller, caraml.Pusher(addr) as pusher:
        pusher.push(np.zeros(100_000, np.uint8))  # ZeroMQ cuts the sender off: never delivered
        with pytest.raises(caraml.RequestTimeout):
            puller.pull(timeout=0.3)
        for _ in range(200):  # the pusher reconnects by itself; small messages get through
            pusher.push("small")
            try:
                assert puller.pull(timeout=0.05) == "small"
                break
            except caraml.RequestTimeout:
                continue
        else:
            raise AssertionError("small messages never arrived after the oversized one")


def test_push_with_timeout_raises_when_nobody_pulls(addr):
    with caraml.Pusher(addr, bind=True) as pusher:
        with pytest.raises(caraml.RequestTimeout, match="no puller"):
            pusher.push("lost", timeout=0.05)
        with caraml.Puller(addr, bind=False) as puller:
            pusher.push("found", timeout=10)
            assert puller.pull(timeout=10) == "found"


def test_push_with_timeout_raises_when_the_queue_is_full(addr):
    with caraml.Pusher(addr, hwm=2) as pusher:
        with pytest.raises(caraml.RequestTimeout):
            for _ in range(100):
                pusher.push(np.zeros(10), timeout=0.05)
