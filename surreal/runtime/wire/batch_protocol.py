"""The learner <-> buffer batch protocol: idempotent requests, so a lost reply loses nothing.

The learner's DataFetcher sends `{"segments": n, "timeout": s, "id": "<requester>:<k>"}`; a new
`k` for each batch, the same `k` when caraml's lazy-pirate client resends a request whose reply did
not arrive (a dropped connection, a restarted peer, junk on the port). The buffer remembers the
last reply it sent to each requester: a request with that same id gets that same reply again, so
segments taken out of the FIFO for a reply that got lost are delivered, not dropped (dropping them
would leave actors that wait for the learner's next version and a learner that waits for their
segments standing still).
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any


class BatchRequests:
    """An endless, picklable iterable of batch requests with fresh ids (a DataFetcher's input).

    Args:
        segments: segments per batch.
        timeout: seconds the buffer may wait for enough segments before answering empty.
        requester: a name unique to this learner incarnation (default: random).
    """

    def __init__(self, segments: int, timeout: float = 1.0, requester: str | None = None) -> None:
        self.segments, self.timeout = segments, timeout
        self.requester = requester or os.urandom(6).hex()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        k = 0
        while True:
            yield {
                "segments": self.segments,
                "timeout": self.timeout,
                "id": f"{self.requester}:{k}",
            }
            k += 1


class ReplyCache:
    """The last reply sent to each requester, so a resent request is answered the same way.

    Args:
        requesters: how many requesters to remember (least recently seen ones are forgotten).
    """

    def __init__(self, requesters: int = 8) -> None:
        self.requesters = requesters
        self._last: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self.replayed = 0

    def answer(self, request_id: str | None, compute: Callable[[], Any]) -> Any:
        """The cached reply when `request_id` is the requester's last one, else `compute()`."""
        if request_id is None:
            return compute()
        requester, _, _ = request_id.rpartition(":")
        with self._lock:
            last = self._last.get(requester)
            if last is not None and last[0] == request_id:
                self._last.move_to_end(requester)
                self.replayed += 1
                return last[1]
        reply = compute()
        with self._lock:
            self._last[requester] = (request_id, reply)
            self._last.move_to_end(requester)
            while len(self._last) > self.requesters:
                self._last.popitem(last=False)
        return reply
