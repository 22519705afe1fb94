"""Ranks in the harness: real DDP through torch.distributed, joined to the runner's own c10d store.

The runner of rank 0 serves a c10d TCPStore at MASTER_ADDR:MASTER_PORT for its
per-step barrier. Each rank's harness connects to that same store as a client,
under a prefix of its own (one per configuration and repeat, shared by its
modes), and builds the process group on it: Gloo on the CPU, NCCL on CUDA.
No second port is opened.

Whole-run epochs step the DDP module as any training script does (the
gradient all-reduce overlaps the backward pass). Diagnostic epochs keep the
all-reduce apart so it can be timed as the `comm` stage: backward runs under
`no_sync()`, then the gradients are all-reduced as one flat bucket and
divided by the world size, which is the average DDP computes.
"""

from __future__ import annotations

import datetime
import hashlib
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class DistSpec:
    rank: int
    world_size: int
    master_addr: str
    master_port: int
    prefix: str
    timeout_s: float


class Ranks:
    """The process group of one request (a configuration and repeat, every mode of it), and the
    collective the diagnostic loop times."""

    def __init__(self, spec: DistSpec, device: torch.device) -> None:
        self.spec = spec
        self.device = device
        timeout = datetime.timedelta(seconds=spec.timeout_s)
        store = dist.TCPStore(spec.master_addr, spec.master_port, is_master=False,
                              timeout=timeout, wait_for_workers=False)
        self.store = dist.PrefixStore(spec.prefix, store)
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, store=self.store, rank=spec.rank,
                                world_size=spec.world_size, timeout=timeout)
        self.backend = backend

    def wrap(self, module: nn.Module) -> nn.Module:
        ids = [self.device.index or 0] if self.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(module, device_ids=ids)

    def all_reduce_grads(self, module: nn.Module) -> None:
        """Average the gradients over the ranks as one flat bucket (what DDP does, un-overlapped)."""
        grads = [p.grad for p in module.parameters() if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat /= self.spec.world_size
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset:offset + n].view_as(g))
            offset += n

    def close(self) -> None:
        dist.destroy_process_group()


def weights_digest(module: nn.Module) -> str:
    """A digest of the weights: equal on every rank after DDP training, which the tests check."""
    h = hashlib.sha256()
    for p in module.state_dict().values():
        h.update(p.detach().to("cpu").contiguous().numpy().tobytes())
    return h.hexdigest()[:16]
