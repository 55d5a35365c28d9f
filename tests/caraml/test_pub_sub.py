"""Pub-sub: exact topic matching, nothing for other topics, garbage rejected."""

from __future__ import annotations

import pytest

import caraml
from caraml.sockets import make_socket
from caraml.testing import garbled_messages

pytestmark = pytest.mark.timeout(60)


def wait_until_subscribed(pub, sub, topic="ready"):
    """Readiness handshake: publish until the subscriber sees one (PUB drops before that)."""
    for _ in range(500):
        pub.publish(topic, None)
        try:
            return sub.recv(timeout=0.02)
        except caraml.RequestTimeout:
            continue
    raise AssertionError("subscriber never connected")


def drain(sub, topic):
    while True:
        try:
            got = sub.recv(timeout=0.05)
        except caraml.RequestTimeout:
            return
        assert got[0] == topic


def test_subscriber_gets_its_topic_and_nothing_else(addr):
    with caraml.Publisher(addr) as pub, caraml.Subscriber(addr, topics=["params", "ready"]) as sub:
        wait_until_subscribed(pub, sub)
        drain(sub, "ready")
        pub.publish("param", {"v": 0})  # prefix of the topic: must not match
        pub.publish("params-old", {"v": 0})  # topic is a prefix of it: must not match
        pub.publish("other", {"v": 0})
        pub.publish("params", {"v": 1})
        assert sub.recv(timeout=10) == ("params", {"v": 1})
        with pytest.raises(caraml.RequestTimeout):
            sub.recv(timeout=0.1)


def test_subscriber_with_no_topics_list_gets_everything_in_order(addr):
    with caraml.Publisher(addr) as pub, caraml.Subscriber(addr) as sub:
        wait_until_subscribed(pub, sub)
        drain(sub, "ready")
        for i in range(50):
            pub.publish(f"t{i % 3}", i)
        assert [sub.recv(timeout=10) for _ in range(50)] == [(f"t{i % 3}", i) for i in range(50)]


def test_ten_thousand_garbled_publications_are_rejected(addr):
    with caraml.Subscriber(addr, hwm=30_000) as sub:
        raw = make_socket(caraml.pub_sub.zmq.PUB, hwm=30_000)
        try:
            raw.bind(addr)
            for _ in range(500):  # handshake with raw frames
                raw.send_multipart([b"ready\x00", *caraml.serialize(None)])
                try:
                    sub.recv(timeout=0.02)
                    break
                except caraml.RequestTimeout:
                    continue
            drain(sub, "ready")
            for frames in garbled_messages(10_000, seed=3):
                raw.send_multipart(frames)
            raw.send_multipart([b"ok\x00", *caraml.serialize("still alive")])
            got = None
            while got is None or got[0] != "ok":
                try:
                    got = sub.recv(timeout=10)
                except caraml.MalformedMessage:
                    continue
        finally:
            raw.close()
        assert got == ("ok", "still alive")
        assert sub.malformed > 0
