"""The `pytorch` engine: torch.utils.data.DataLoader over the given batches, with an optional CUDA-stream prefetcher."""

from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset, Sampler, TensorDataset

from stallscope_steps import peaks

from .sources import FashionMnistDataset, OpenedSource, SyntheticDataset
from .worker_tracks import TracedCollate, TracedFetch, TracedLoader, TrackRecorder


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


class BatchedFetch(Dataset):
    """The source's Dataset with `__getitems__`: torch's fetcher then calls it once per batch.

    As the last step of PyTorch's "Data Loading Optimization" tutorial
    (`SyntheticDatasetBatched`): a synthetic batch costs ONE sleep of the
    per-sample latency, not one per sample, and its samples are still
    returned as a list for the collate function. The samples themselves are
    the ones `__getitem__` gives (the same inputs for the same indices, and
    `cpu_work_rounds` still paid per sample: batching amortises I/O, not
    compute). Tensor and FashionMNIST sources gather the batch with one
    index operation; image files are still decoded one by one (PIL has no
    batch decode), so for them only the call pattern changes.
    """

    def __init__(self, dataset) -> None:
        self.dataset = dataset
        if isinstance(dataset, SyntheticDataset):
            # The same samples without the per-sample sleep: the batch sleeps once.
            self.unslept = SyntheticDataset(dataset.samples, dataset.features, dataset.classes, 0,
                                            dataset.rounds)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> list:
        ds = self.dataset
        if isinstance(ds, SyntheticDataset):
            if ds.latency_s > 0:
                time.sleep(ds.latency_s)
            return [self.unslept[i] for i in indices]
        if isinstance(ds, TensorDataset):
            x, y = ds.tensors
            idx = torch.tensor(indices, dtype=torch.int64)
            return list(zip(x[idx].unbind(0), y[idx].unbind(0)))
        if isinstance(ds, FashionMnistDataset):
            idx = torch.tensor(indices, dtype=torch.int64)
            return list(zip(ds.pixels[idx].float().div_(255.0).unbind(0), ds.labels[idx].unbind(0)))
        return [ds[i] for i in indices]


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
        # Worker tracks: asked for in diagnostic modes, kept only with worker processes.
        self.tracing = False
        self.traced = False
        self.recorder: TrackRecorder | None = None

    def set_tracing(self, on: bool) -> None:
        self.tracing = on

    def open_mode(self) -> None:
        spec = self.req.loader
        workers = spec.workers
        self.sampler = GivenBatches()
        generator = torch.Generator()
        generator.manual_seed(self.req.augment_seed)
        dataset = self.source.dataset
        if spec.batched_fetch:
            dataset = BatchedFetch(dataset)
        collate_fn = self.source.collate_fn
        self.traced = self.tracing and workers > 0
        if self.traced:
            dataset, collate_fn = TracedFetch(dataset), TracedCollate(collate_fn)
        self.loader = DataLoader(
            dataset,
            batch_sampler=self.sampler,
            num_workers=workers,
            collate_fn=collate_fn,
            pin_memory=spec.pin_memory,
            prefetch_factor=spec.prefetch if workers > 0 else None,
            persistent_workers=spec.persistent and workers > 0,
            multiprocessing_context=spec.context if workers > 0 else None,
            generator=generator,
        )

    def epoch(self, epoch: int, batches: list[list[int]]):
        self.sampler.set_batches(batches)
        loader = self.loader
        self.recorder = None
        if self.traced:
            self.recorder = TrackRecorder(self.req.loader.workers)
            loader = TracedLoader(self.loader, self.recorder)
        if self.req.loader.prefetch_to_device:
            return CudaPrefetcher(loader, self.device)
        return loader

    def worker_processes(self) -> dict[int, dict]:
        """The DataLoader's live worker processes (persistent ones between epochs); a non-persistent
        epoch's workers end with it, their peaks read as they stop (stallscope_steps.peaks)."""
        it = getattr(self.loader, "_iterator", None) if self.loader is not None else None
        return peaks.dataloader_workers(it) if it is not None else {}

    def epoch_stats(self) -> dict:
        if self.recorder is None:
            return {}
        return {"worker_tracks": self.recorder.columns()}

    def close_mode(self) -> None:
        loader, self.loader = self.loader, None
        it = getattr(loader, "_iterator", None)
        if it is not None and hasattr(it, "_shutdown_workers"):
            it._shutdown_workers()
