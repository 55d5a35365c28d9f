"""Long polls: a handler answers `Later`, the server parks the request and answers it on a wake
once ready, or at its deadline; many waiting clients cost one answer each, not a poll stream."""

from __future__ import annotations

import threading

import pytest

import caraml

pytestmark = pytest.mark.timeout(60)


class Counter:
    """A value that a request can wait for: {"at_least": n} is answered once value >= n."""

    def __init__(self) -> None:
        self.value, self.asked = 0, 0

    def handle(self, request):
        self.asked += 1
        want = request["at_least"]
        if self.value >= want:
            return {"value": self.value}
        return caraml.Later(
            ready=lambda: self.value >= want,
            answer=lambda: {"value": self.value},
            wait_s=request.get("wait_s", 5.0),
        )


def _ask_in_threads(addr, requests, timeout=10.0):
    replies, threads = [None] * len(requests), []

    def ask(i, request):
        with caraml.Client(addr, timeout=timeout, retries=0) as client:
            try:
                replies[i] = client.request(request)
            except caraml.RequestTimeout as exc:
                replies[i] = exc

    for i, request in enumerate(requests):
        threads.append(threading.Thread(target=ask, args=(i, request)))
        threads[-1].start()
    return replies, threads


def test_parked_requests_are_answered_by_a_wake_once_ready_each_exactly_once(addr):
    counter = Counter()
    with caraml.Server(addr, counter.handle) as server:
        replies, threads = _ask_in_threads(addr, [{"at_least": 1}] * 5 + [{"at_least": 2}] * 3)
        waited = threading.Event()
        while server.parked < 8:  # every request has arrived and waits
            waited.wait(0.01)
        counter.value = 1
        server.wake()
        for thread in threads[:5]:
            thread.join(10)
        assert replies[:5] == [{"value": 1}] * 5
        assert server.parked == 3  # not ready yet: still parked, not answered early
        counter.value = 2
        server.wake()
        for thread in threads:
            thread.join(10)
        assert replies == [{"value": 1}] * 5 + [{"value": 2}] * 3
        assert counter.asked == 8  # one handler call each: nobody polled
        assert server.answered_later == 8 and server.parked == 0


def test_a_parked_request_is_answered_at_its_deadline_with_the_current_state(addr):
    counter = Counter()
    with caraml.Server(addr, counter.handle) as server:
        replies, threads = _ask_in_threads(addr, [{"at_least": 5, "wait_s": 0.2}])
        threads[0].join(10)
        assert replies == [{"value": 0}]
        assert server.answered_later == 1 and server.parked == 0


def test_past_max_parked_requests_are_answered_at_once_and_a_raising_ready_answers_now(addr):
    counter = Counter()
    with caraml.Server(addr, counter.handle, max_parked=2) as server:
        replies, threads = _ask_in_threads(addr, [{"at_least": 1}] * 2)
        waited = threading.Event()
        while server.parked < 2:
            waited.wait(0.01)
        with caraml.Client(addr, timeout=5.0, retries=0) as client:
            assert client.request({"at_least": 1}) == {"value": 0}  # full: not parked
            broken = {"at_least": 1, "wait_s": 30.0}
            server.handler = lambda request: caraml.Later(lambda: 1 / 0, lambda: "now", 30.0)
            assert client.request(broken) == "now"
        server.handler = counter.handle
        counter.value = 1
        server.wake()
        for thread in threads:
            thread.join(10)
        assert replies == [{"value": 1}] * 2


def test_stop_with_parked_requests_ends_the_server_and_wake_after_stop_is_harmless(addr):
    counter = Counter()
    server = caraml.Server(addr, counter.handle).start()
    replies, threads = _ask_in_threads(addr, [{"at_least": 1}], timeout=1.0)
    waited = threading.Event()
    while server.parked < 1:
        waited.wait(0.01)
    server.stop()
    server.wake()  # e.g. a publication arriving while the process shuts down
    threads[0].join(10)
    assert server.parked == 0
    assert isinstance(replies[0], caraml.RequestTimeout)  # never answered: it asks again
