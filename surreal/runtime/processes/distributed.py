"""Data-parallel learner replicas (`run.learner_replicas`): torch.distributed between them.

Each replica learns on its own share of the batch; `Replicas.average_gradients` makes every
replica step with the mean gradient over all of them (before gradient clipping), so N replicas on
1/N of a batch each take the step one learner takes on the whole batch (exactly when the loss is
a mean over equal shares: `test_distributed.py` checks PPO with one minibatch per pass; with
several minibatches each replica shuffles its own share, and advantage normalization is per
share). Backend: NCCL when the learner computes on a GPU, gloo on the CPU.

A learner reaches its replicas through `Learner.replicas` (None: a single learner), and calls
`Learner.sync_gradients()` after `backward()` and `Learner.gather(array)` for statistics that
must see the whole batch (the observation normalizer).
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from typing import Any

import numpy as np
import torch
import torch.distributed as dist


class Replicas:
    """This process's place among `world` replicas (rank 0 publishes and checkpoints)."""

    def __init__(self, rank: int, world: int, cpu_group: Any = None) -> None:
        self.rank, self.world = rank, world
        self.cpu_group = cpu_group
        """The group for numpy-side collectives (gloo; the default group unless that is NCCL)."""

    @classmethod
    def start(
        cls,
        rank: int,
        world: int,
        host: str,
        port: int,
        device: Any = "cpu",
        timeout_s: float = 600.0,
        bind_host: str = "127.0.0.1",
    ) -> Replicas:
        """Join the group: rank 0 serves the rendezvous (a TCPStore) on `bind_host:port` (a port
        symphony bound for it; "*": every interface), the others connect to `host:port`; NCCL on
        a CUDA `device`, gloo otherwise (on loopback when `host` is 127.0.0.1)."""
        backend = "nccl" if torch.device(device).type == "cuda" else "gloo"
        if host in ("127.0.0.1", "localhost"):
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        timeout = timedelta(seconds=timeout_s)
        listener = None
        if rank == 0:  # bind the socket ourselves: only the address symphony gave us
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("0.0.0.0" if bind_host == "*" else bind_host, port))
            listener.listen(world * 4)
        store = dist.TCPStore(
            host,
            port,
            world,
            is_master=rank == 0,
            timeout=timeout,
            master_listen_fd=listener.detach() if listener else None,  # the store owns it now
            use_libuv=False,
        )
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
        replicas = cls(rank, world, dist.new_group(backend="gloo") if backend == "nccl" else None)
        replicas._store = store  # rank 0's store serves the others while this process lives
        return replicas

    def average_gradients(self, parameters: Any) -> None:
        """Replace every parameter's gradient by its mean over the replicas (one all-reduce of
        all gradients, flattened together)."""
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.world
        offset = 0
        for g in grads:
            g.copy_(flat[offset : offset + g.numel()].view_as(g))
            offset += g.numel()

    def gather(self, array: np.ndarray) -> np.ndarray:
        """Every replica's `array` (same shape on all), concatenated along axis 0 in rank order."""
        local = torch.from_numpy(np.ascontiguousarray(array))
        parts = [torch.empty_like(local) for _ in range(self.world)]
        dist.all_gather(parts, local, group=self.cpu_group)
        return np.concatenate([p.numpy() for p in parts])

    def sum(self, value: float) -> float:
        """`value` summed over the replicas (e.g. env steps consumed this iteration)."""
        total = torch.tensor([float(value)], dtype=torch.float64)
        dist.all_reduce(total, group=self.cpu_group)
        return float(total[0])

    def broadcast_module(self, module: Any) -> None:
        """Copy rank 0's parameters and buffers into every replica's `module`."""
        for tensor in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(tensor.data, src=0)

    def close(self) -> None:
        """Leave the group."""
        if dist.is_initialized():
            dist.destroy_process_group()
