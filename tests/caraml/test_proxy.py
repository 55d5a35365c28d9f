"""Proxies: load-balance requests and pushes over shards, stop cleanly, pass garbage harmlessly."""

from __future__ import annotations

import time

import pytest

import caraml
from caraml.testing import free_address
from symphony.testing import scaled

from .test_req_rep import fuzz

pytestmark = pytest.mark.timeout(60)


def tagger(tag):
    return lambda request: {"served_by": tag, "echo": request}


def test_router_dealer_spreads_requests_over_servers():
    front, back = free_address(), free_address()
    with (
        caraml.Proxy(front, back, kind="router-dealer"),
        caraml.Server(back, tagger("a"), bind=False) as a,
        caraml.Server(back, tagger("b"), bind=False) as b,
        caraml.Client(front) as client,
    ):
        deadline = time.monotonic() + scaled(20)
        replies = []
        while (a.served == 0 or b.served == 0) and time.monotonic() < deadline:
            replies.append(client.request(len(replies)))  # both connect eventually
        assert a.served > 0 and b.served > 0
        assert [r["echo"] for r in replies] == list(range(len(replies)))


def test_pull_push_proxy_delivers_each_message_exactly_once():
    front, back = free_address(), free_address()
    with (
        caraml.Proxy(front, back, kind="pull-push"),
        caraml.Puller(back, bind=False) as p1,
        caraml.Puller(back, bind=False) as p2,
        caraml.Pusher(front) as pusher,
    ):
        for i in range(100):
            pusher.push(i)
        got = []
        while len(got) < 100:
            for puller in (p1, p2):
                try:
                    got.append(puller.pull(timeout=0.05))
                except caraml.RequestTimeout:
                    pass
        assert sorted(got) == list(range(100))


def test_xsub_xpub_proxy_fans_out_publications():
    front, back = free_address(), free_address()
    with (
        caraml.Proxy(front, back, kind="xsub-xpub"),
        caraml.Publisher(front, bind=False) as pub,
        caraml.Subscriber(back, topics=["p"]) as sub,
    ):
        for _ in range(500):
            pub.publish("p", "hello")
            try:
                assert sub.recv(timeout=0.02) == ("p", "hello")
                break
            except caraml.RequestTimeout:
                continue
        else:
            raise AssertionError("publication never arrived through the proxy")


def test_unknown_proxy_kind_names_the_valid_ones():
    with pytest.raises(caraml.CaramlError, match="router-dealer"):
        caraml.Proxy(free_address(), free_address(), kind="star")


@pytest.mark.integration
def test_ten_thousand_garbled_requests_through_a_proxy(addr):
    back = free_address()
    with caraml.Proxy(addr, back), caraml.Server(back, tagger("s"), bind=False) as server:
        kinds, _ = fuzz(addr, seed=5)
        assert len(kinds) == 10_000 and server.malformed == 10_000
        with caraml.Client(addr) as client:
            assert client.request(1) == {"served_by": "s", "echo": 1}


def test_proxy_process_forwards_and_stops_without_leftovers():
    back = free_address()
    with (
        caraml.ProxyProcess("tcp://127.0.0.1:0", back, kind="router-dealer") as proxy,
        caraml.Server(back, tagger("p"), bind=False),
        caraml.Client(proxy.frontend) as client,
    ):
        assert proxy.frontend.startswith("tcp://127.0.0.1:") and not proxy.frontend.endswith(":0")
        assert client.request("hi") == {"served_by": "p", "echo": "hi"}


def test_proxy_process_reports_a_bind_failure(addr):
    with caraml.Puller(addr):
        with pytest.raises(caraml.CaramlError, match="proxy process failed"):
            caraml.ProxyProcess(addr, free_address(), kind="pull-push")
