"""The `pytorch` engine: torch.utils.data.DataLoader over the given batches, with an optional CUDA-stream prefetcher."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Sampler

from .sources import OpenedSource


class GivenBatches(Sampler):
    """A batch sampler that yields the batches it is given for the current epoch.

    With persistent workers the DataLoader (and this object) is reused, so the
    batches are switched before each `iter(loader)`.
    """

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    def set_batches(self, batches: list[list[int]]) -> None:
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class CudaPrefetcher:
    """The PyTorch tutorial's prefetcher: copy the next batch on a side CUDA stream."""

    def __init__(self, loader, device: torch.device) -> None:
        self.loader = loader
        self.device = device

    def __iter__(self):
        return _CudaPrefetchIter(iter(self.loader), self.device)


class _CudaPrefetchIter:
    def __init__(self, it, device: torch.device) -> None:
        self.it = it
        self.device = device
        self.stream = torch.cuda.Stream(device=device)
        self.next_batch = None
        self._preload()

    def _preload(self) -> None:
        try:
            x, y = next(self.it)
        except StopIteration:
            self.next_batch = None
            return
        with torch.cuda.stream(self.stream):
            self.next_batch = (x.to(self.device, non_blocking=True),
                               y.to(self.device, dtype=torch.int64, non_blocking=True))

    def __iter__(self):
        return self

    def __next__(self):
        current = torch.cuda.current_stream(self.device)
        current.wait_stream(self.stream)
        batch = self.next_batch
        if batch is None:
            raise StopIteration
        batch[0].record_stream(current)
        batch[1].record_stream(current)
        self._preload()
        return batch


class Engine:
    name = "pytorch"

    def __init__(self, req, source: OpenedSource, device: torch.device) -> None:
        self.req = req
        self.source = source
        self.device = device
        spec = req.loader
        if spec.prefetch_to_device and device.type != "cuda":
            raise ValueError("prefetch_to_device needs a CUDA device")
        # Exceptions out of next(): from worker processes, or the dataset in-process.
        self.loader_stage = "worker" if spec.workers > 0 else "epoch"
        self.loader: DataLoader | None = None
        self.sampler = GivenBatches()

    def open_mode(self) -> None:
        spec = self.req.loader
        workers = spec.workers
        self.sampler = GivenBatches()
        generator = torch.Generator()
        generator.manual_seed(self.req.augment_seed)
        self.loader = DataLoader(
            self.source.dataset,
            batch_sampler=self.sampler,
            num_workers=workers,
            collate_fn=self.source.collate_fn,
            pin_memory=spec.pin_memory,
            prefetch_factor=spec.prefetch if workers > 0 else None,
            persistent_workers=spec.persistent and workers > 0,
            multiprocessing_context=spec.context if workers > 0 else None,
            generator=generator,
        )

    def epoch(self, epoch: int, batches: list[list[int]]):
        self.sampler.set_batches(batches)
        if self.req.loader.prefetch_to_device:
            return CudaPrefetcher(self.loader, self.device)
        return self.loader

    def epoch_stats(self) -> dict:
        return {}

    def close_mode(self) -> None:
        loader, self.loader = self.loader, None
        it = getattr(loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
