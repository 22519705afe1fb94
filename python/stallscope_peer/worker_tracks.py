"""Worker tracks of a DataLoader's diagnostic epochs: which worker built each batch, when, its samples.

Inside each worker process `TracedFetch` times the fetch (each sample's `__getitem__`, or one
`__getitems__` call) and `TracedCollate` times the collate and appends a small int64 tensor to the
batch: the worker's id and the CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns`, one clock for every
process of the host). In the harness `TracedEpoch` strips that tensor before the loop sees the batch
and records when it handed the batch over. The columns are the bundle's `worker_tracks` (format 1.4),
times in nanoseconds since the epoch started; bounded as the native loader's are.
"""

from __future__ import annotations

import time
from typing import Any

import torch
from torch.utils.data import Dataset, default_collate, get_worker_info

MAX_TRACKED_BATCHES = 4096
MAX_TRACKED_SAMPLES = 8192

# The fetch of the batch being built in this worker process: (start, end, indices, per-sample rows).
_fetched: tuple[int, int, list[int], list[tuple[int, int]]] | None = None


class TracedFetch(Dataset):
    """The Dataset, its fetch timed per batch (and per sample where the fetcher goes sample by sample)."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int):
        return self.dataset[index]

    def __getitems__(self, indices: list[int]) -> list:
        global _fetched
        now = time.monotonic_ns
        start = now()
        rows: list[tuple[int, int]] = []
        batched = getattr(self.dataset, "__getitems__", None)
        if batched is not None:
            samples = batched(indices)
        else:
            samples = []
            for i in indices:
                t = now()
                samples.append(self.dataset[i])
                rows.append((t, now() - t))
        _fetched = (start, now(), list(indices), rows)
        return samples


class TracedCollate:
    """The collate function, returning (inputs, labels, trace) with the trace as one int64 tensor."""

    def __init__(self, collate_fn) -> None:
        self.collate_fn = collate_fn or default_collate

    def __call__(self, samples):
        global _fetched
        start = time.monotonic_ns()
        out = self.collate_fn(samples)
        end = time.monotonic_ns()
        info = get_worker_info()
        fetched, _fetched = _fetched, None
        if info is None or fetched is None or not isinstance(out, (tuple, list)) or len(out) != 2:
            return out
        f_start, f_end, indices, rows = fetched
        head = [info.id, f_start, f_end, start, end, len(indices), len(rows)]
        flat = head + indices + [v for row in rows for v in row]
        return out[0], out[1], torch.tensor(flat, dtype=torch.int64)


class TrackRecorder:
    """One epoch's columns, as the consumer (the harness's loop thread) receives the batches."""

    def __init__(self, workers: int) -> None:
        self.start = time.monotonic_ns()
        self.workers = workers
        self.batches: dict[str, list[int]] = {k: [] for k in (
            "batch", "worker", "start_ns", "build_ns", "collate_ns", "samples", "first_sample",
            "sample_rows")}
        self.samples: dict[str, list[int]] = {"index": [], "start_ns": [], "fetch": []}
        self.steps: dict[str, list[int]] = {"batch": [], "delivered_ns": []}
        self.left_out = [0, 0]  # batches, samples

    def batch(self, k: int, trace: list[int] | None) -> None:
        self.steps["batch"].append(k)
        self.steps["delivered_ns"].append(max(0, time.monotonic_ns() - self.start))
        if trace is None:
            return
        if len(self.batches["batch"]) >= MAX_TRACKED_BATCHES:
            self.left_out[0] += 1
            return
        worker, f_start, f_end, c_start, c_end, n, timed = trace[:7]
        indices = trace[7:7 + n]
        rows = trace[7 + n:7 + n + 2 * timed]
        listed = timed if len(self.samples["index"]) + timed <= MAX_TRACKED_SAMPLES else 0
        self.left_out[1] += n - listed
        b = self.batches
        for key, value in (("batch", k), ("worker", worker), ("start_ns", f_start - self.start),
                           ("build_ns", c_end - f_start), ("collate_ns", c_end - c_start),
                           ("samples", n), ("first_sample", indices[0] if indices else 0),
                           ("sample_rows", listed)):
            b[key].append(max(0, value))
        for i in range(listed):
            self.samples["index"].append(indices[i])
            self.samples["start_ns"].append(max(0, rows[2 * i] - self.start))
            self.samples["fetch"].append(rows[2 * i + 1])

    def columns(self) -> dict[str, Any]:
        s = self.samples
        stages = [{"name": "fetch", "ns": s["fetch"]}] if s["fetch"] else []
        return {"kind": "processes", "workers": self.workers,
                "batches_left_out": self.left_out[0], "samples_left_out": self.left_out[1],
                "batches": self.batches,
                "samples": {"index": s["index"], "start_ns": s["start_ns"], "stages": stages},
                "steps": self.steps}


class TracedLoader:
    """An epoch's loader whose batches lose their trace tensor on the way to the loop."""

    def __init__(self, loader, recorder: TrackRecorder) -> None:
        self.loader = loader
        self.recorder = recorder

    def __iter__(self):
        return TracedEpoch(iter(self.loader), self.recorder)


class TracedEpoch:
    def __init__(self, it, recorder: TrackRecorder) -> None:
        self.it = it
        self.recorder = recorder
        self.k = 0

    def __iter__(self):
        return self

    def __next__(self):
        batch = next(self.it)
        trace = None
        if isinstance(batch, (tuple, list)) and len(batch) == 3:
            trace = batch[2].tolist()
            batch = (batch[0], batch[1])
        self.recorder.batch(self.k, trace)
        self.k += 1
        return batch
