"""The `nodes` engine: torchdata.nodes over the given batches (sampler, parallel map-and-collate, pin, prefetch, Loader)."""

from __future__ import annotations

import os

import torch
import torchdata
import torchdata.nodes as tn
from torch.utils.data import default_collate

from .engine_pytorch import CudaPrefetcher, GivenBatches
from .orphans import die_with_harness
from .sources import OpenedSource

# The pipeline is the one torchdata's own guide builds to replace a DataLoader
# ("Migrating to torchdata.nodes from torch.utils.data", NodesDataLoader):
# a sampler node yields batches of indices, a ParallelMapper maps each WHOLE
# batch (every __getitem__ of the batch, then the collate function) on one
# worker, as a DataLoader worker does; then PinMemory and a Prefetcher, and a
# Loader that resets the chain every epoch. Mapping whole batches (not
# per-sample map + Batcher) keeps the DataLoader's unit of work and IPC: one
# message per batch, collated in the worker.
#
# Knobs: `workers` -> ParallelMapper.num_workers (0: the map runs inline in
# the loop's thread), `worker_kind` -> method "thread" / "process" (with
# `context` as multiprocessing_context), `prefetch` -> Prefetcher's
# prefetch_factor. ParallelMapper itself keeps at most 2 x workers batches
# in flight (torchdata's default max_concurrent), as a DataLoader with
# prefetch_factor 2 does. Process workers start on every epoch's reset (as a
# DataLoader's without persistent workers).


class MapAndCollate:
    """One batch of indices -> the collated batch: the Dataset's samples, then collate_fn."""

    def __init__(self, dataset, collate_fn) -> None:
        self.dataset = dataset
        self.collate_fn = collate_fn
        self.harness = os.getpid()

    def __call__(self, indices: list[int]):
        die_with_harness(self.harness)  # a no-op on threads
        return self.collate_fn([self.dataset[i] for i in indices])


class Engine:
    name = "nodes"

    def __init__(self, req, source: OpenedSource, device: torch.device) -> None:
        self.version = torchdata.__version__
        self.req = req
        self.spec = req.loader
        self.device = device
        self.source = source
        self.loader_stage = "worker" if self.spec.workers > 0 else "epoch"
        self.sampler = GivenBatches()
        self.loader: tn.Loader | None = None

    def open_mode(self) -> None:
        spec = self.spec
        self.sampler = GivenBatches()
        node = tn.SamplerWrapper(self.sampler)
        method = "process" if spec.worker_kind == "processes" else "thread"
        node = tn.ParallelMapper(
            node,
            map_fn=MapAndCollate(self.source.dataset, self.source.collate_fn or default_collate),
            num_workers=spec.workers,
            in_order=True,
            method=method,
            multiprocessing_context=spec.context if method == "process" else None,
        )
        if spec.pin_memory and self.device.type == "cuda":
            node = tn.PinMemory(node)
        node = tn.Prefetcher(node, prefetch_factor=spec.prefetch)
        self.loader = tn.Loader(node)

    def epoch(self, epoch: int, batches: list[list[int]]):
        self.sampler.set_batches(batches)
        if self.spec.prefetch_to_device:
            return CudaPrefetcher(self.loader, self.device)
        return self.loader

    def epoch_stats(self) -> dict:
        return {}  # torchdata.nodes keeps no statistics of its own

    def close_mode(self) -> None:
        loader, self.loader = self.loader, None
        if loader is not None:
            _shutdown(loader.root)


def _shutdown(node) -> None:
    """Stop the threads and worker processes of the chain's live iterators (torchdata has no public close)."""
    while node is not None:
        it = getattr(node, "_it", None)
        if hasattr(it, "_shutdown"):
            it._shutdown()
        elif isinstance(it, tn.BaseNode):  # ParallelMapper holds a _ParallelMapperImpl node
            _shutdown(it)
        node = getattr(node, "source", None)
