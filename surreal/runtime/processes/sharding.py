"""Shard routing: the load-balancing proxies in front of K replay shards and K parameter servers.

Replay (experience in, samples out):

    actors --push--> [replay]  pull-push proxy  [replay-shards]  <--pull-- shard 0..K-1
    learner --req--> [replay-sample] router-dealer [replay-sample-shards] <--rep-- shard 0..K-1

Parameters (the learner publishes every version to all shards; actors' requests are spread):

    learner --pub--> [params-pub]   <--sub-- parameter-server shard 0..K-1
    actors --req-->  [params] router-dealer [params-shards] <--rep-- parameter-server shard 0..K-1

Names in brackets are symphony services. The proxies bind both sides, shards only connect, so a
shard that dies and restarts reconnects by itself, and K is a config value, not a code path.
Loss on a shard's death: the experience it held, plus chunks already queued for it in the push
proxy (up to the high-water mark); sample and parameter requests it held are retried by the
clients (lazy pirate) and land on another shard.
"""

from __future__ import annotations

from dataclasses import dataclass

import caraml
from surreal.runtime.processes.common import Component
from surreal.runtime.processes.param_server import serve

REPLAY_SERVICES = ("replay", "replay-shards", "replay-sample", "replay-sample-shards")
PARAM_SERVICES = ("params", "params-shards", "params-pub")


@dataclass
class ShardProxies:
    """The running proxies of one sharded service; `close()` stops them all."""

    proxies: list

    def close(self) -> None:
        for proxy in self.proxies:
            proxy.stop()

    def __enter__(self) -> ShardProxies:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def start_replay_proxies(
    push_front: str, push_back: str, sample_front: str, sample_back: str, hwm: int | None = None
) -> ShardProxies:
    """Bind the replay's pull-push (experience) and router-dealer (samples) proxies."""
    push = caraml.Proxy(push_front, push_back, kind="pull-push", hwm=hwm).start()
    sample = caraml.Proxy(sample_front, sample_back, kind="router-dealer").start()
    return ShardProxies([push, sample])


def start_param_proxy(front: str, back: str) -> ShardProxies:
    """Bind the parameter servers' router-dealer proxy."""
    return ShardProxies([caraml.Proxy(front, back, kind="router-dealer").start()])


def shard_seed(base: int, shard: int) -> int:
    """A distinct sampling seed per shard."""
    return base * 1009 + shard


def replay_proxy_main(run_dir: str, index: int = 0) -> None:
    """The replay proxies of a run: forward until stopped."""
    comp = Component(run_dir, "replay-proxy", index)
    a = comp.address
    with start_replay_proxies(
        a("replay").bind_tcp,
        a("replay-shards").bind_tcp,
        a("replay-sample").bind_tcp,
        a("replay-sample-shards").bind_tcp,
        hwm=64,
    ):
        comp.log.info(
            "binds replay %s -> replay-shards %s, replay-sample %s -> replay-sample-shards %s",
            *(a(s).bind_tcp for s in REPLAY_SERVICES),
        )
        comp.stopping.wait()
    comp.close()


def param_proxy_main(run_dir: str, index: int = 0) -> None:
    """The parameter servers' proxy of a run: forward until stopped."""
    comp = Component(run_dir, "param-proxy", index)
    with start_param_proxy(comp.address("params").bind_tcp, comp.address("params-shards").bind_tcp):
        comp.log.info(
            "binds params %s -> params-shards %s",
            comp.address("params").bind_tcp,
            comp.address("params-shards").bind_tcp,
        )
        comp.stopping.wait()
    comp.close()


def param_shard_main(run_dir: str, index: int = 0) -> None:
    """Parameter-server shard `index`: the runtime's ParameterStore, reached through the proxy."""
    comp = Component(run_dir, "param-server", index)
    serve(comp, comp.address("params-shards").tcp, bind=False)
