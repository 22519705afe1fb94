"""The `spdl` engine: an spdl.pipeline per epoch (source, per-sample load, aggregate, collate, sink) with SPDL's own stats."""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import spdl
import spdl.io
import torch
from spdl.pipeline import PipelineBuilder, StatsQueue, TaskStatsHook
from spdl.pipeline.defs import Aggregator
from torch.utils.data import default_collate

from .sources import IMAGENET_MEAN, IMAGENET_STD, OpenedSource

# --------------------------------------------------------------------------
# Stats. SPDL 0.8 builds one TaskStatsHook per stage (through the public
# `task_hook_factory` of PipelineBuilder.build; we keep the instances and read
# their public counters) and one StatsQueue per stage output. A queue's final
# QueuePerfStats is only handed to `StatsQueue._log_stats` when its stage ends,
# so we wrap that method (once, for the whole process) to record it. Passing a
# StatsQueue subclass as `queue_class` would do the same but loses SPDL's fast
# foreground path for the sink queue (it only mirrors exact StatsQueue types),
# which would change what is measured.

_QUEUE_STATS: list = []


def _install_queue_recorder() -> None:
    original = getattr(StatsQueue, "_log_stats", None)
    if original is None:
        raise RuntimeError(f"spdl {spdl.__version__}: StatsQueue._log_stats is missing; "
                           "the queue stats recorder needs updating for this version")
    if getattr(original, "_stallscope", False):
        return

    def _log_stats(self, stats) -> None:
        _QUEUE_STATS.append((self.info, stats))
        original(self, stats)

    _log_stats._stallscope = True
    StatsQueue._log_stats = _log_stats


# --------------------------------------------------------------------------
# Loading one sample. Images are decoded and scaled by spdl.io (FFmpeg:
# `scale` with flags=bilinear of the shorter side to `resize`, then `crop` at
# the centre, then rgb24); a random crop and the flip are torch slicing on the
# decoded uint8 tensor, from a generator seeded per (augment_seed, epoch,
# index). Normalisation is the same ImageNet mean/std as the other engines.


class SpdlImageLoader:
    def __init__(self, files, resize: int, crop: int, random_crop: bool, flip: bool, augment_seed: int):
        self.files = files
        self.crop = crop
        self.random_crop = random_crop
        self.flip = flip
        self.seed = augment_seed
        r = resize
        scale = (f"scale=w='if(lte(iw,ih),{r},round(iw*{r}/ih))'"
                 f":h='if(lte(iw,ih),round(ih*{r}/iw),{r})':flags=bilinear")
        centre = "" if random_crop else f",crop={crop}:{crop}"
        self.filter_desc = f"{scale}{centre},format=rgb24"
        self.mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        self.std = torch.tensor(IMAGENET_STD).view(3, 1, 1)

    def __call__(self, epoch: int, index: int):
        path, label = self.files[index]
        hwc = spdl.io.to_torch(spdl.io.load_image(path, filter_desc=self.filter_desc))
        c = self.crop
        if self.random_crop or self.flip:
            rng = np.random.default_rng([self.seed, epoch, index])
            if self.random_crop:
                h, w = hwc.shape[0], hwc.shape[1]
                y0 = int(rng.integers(0, h - c + 1))
                x0 = int(rng.integers(0, w - c + 1))
                hwc = hwc[y0:y0 + c, x0:x0 + c]
            if self.flip and rng.random() < 0.5:
                hwc = hwc.flip(1)
        # CHW made contiguous first, as ToTensor does (normalising the permuted view is ~6x slower).
        x = hwc.permute(2, 0, 1).contiguous().float().div_(255.0)
        return x.sub_(self.mean).div_(self.std), label


class DatasetLoader:
    """Any other source: the Dataset's own __getitem__ (the same code the pytorch engine runs)."""

    def __init__(self, dataset) -> None:
        self.dataset = dataset

    def __call__(self, epoch: int, index: int):
        return self.dataset[index]


# Process workers hold the loader in a global, set once by the pool's initializer.
_WORKER_LOADER = None


def _worker_init(loader) -> None:
    global _WORKER_LOADER
    _WORKER_LOADER = loader
    torch.set_num_threads(1)  # as DataLoader does in its workers


def _worker_load(epoch: int, index: int):
    return _WORKER_LOADER(epoch, index)


def _worker_ping(_: int) -> int:
    time.sleep(0.05)
    return os.getpid()


class GivenSizes(Aggregator):
    """Emit batches of exactly the given sizes (used when the batches are not all batch_size)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.i = 0
        self.buffer: list = []

    def accumulate(self, item):
        self.buffer.append(item)
        if len(self.buffer) == self.sizes[self.i]:
            out, self.buffer = self.buffer, []
            self.i += 1
            return out
        return None

    def flush(self):
        out, self.buffer = self.buffer, []
        return out or None

    def __repr__(self) -> str:  # SPDL names the stage after it
        return f"given_sizes({len(self.sizes)} batches)"


def _collate(pin: bool, items):
    x, y = default_collate(items)
    if pin:
        x, y = x.pin_memory(), y.pin_memory()
    return x, y


class PipelineFailed(RuntimeError):
    """SPDL's PipelineFailure, described by its tasks' own exceptions."""


def describe_failure(group: BaseExceptionGroup) -> str:
    """The failed tasks' own exceptions first, then the stages SPDL stopped.

    With max_failures=0 each stage raises "failed N times, which exceeds the
    threshold" *from* the task's exception; SPDL notes the stage on each.
    """
    causes: list[str] = []
    stages: list[str] = []

    def leaves(e: BaseException) -> None:
        if isinstance(e, BaseExceptionGroup):
            for sub in e.exceptions:
                leaves(sub)
            return
        notes = [n for n in getattr(e, "__notes__", None) or [] if n.startswith("Pipeline stage: ")]
        if notes:
            stages.append(notes[0][len("Pipeline stage: "):])
        root = e.__cause__ if e.__cause__ is not None else e
        text = f"{type(root).__name__}: {root}"
        if text not in causes:
            causes.append(text)

    leaves(group)
    return "; ".join(causes) + (f" (SPDL stopped stages {', '.join(stages)})" if stages else "")


def _stage_order(info) -> int:
    try:
        return int(info.stage_id)
    except (TypeError, ValueError):
        return 1 << 30


class SpdlEpoch:
    """One epoch: iter() builds and starts the pipeline; exhaustion stops it."""

    def __init__(self, engine: "Engine", epoch: int, batches: list[list[int]]) -> None:
        self.engine = engine
        self.epoch = epoch
        self.batches = batches

    def __iter__(self):
        return self.engine._start(self.epoch, self.batches)


class _SpdlIter:
    def __init__(self, pipeline) -> None:
        self.pipeline = pipeline
        self.get_item = pipeline.get_item
        self.stopped = False

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return self.get_item()
        except EOFError:
            self.stop()
            raise StopIteration from None
        except BaseExceptionGroup as group:  # PipelineFailure: say what failed, not just how many
            raise PipelineFailed(describe_failure(group)) from group

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.pipeline.stop()


class Engine:
    name = "spdl"
    loader_stage = "worker"

    def __init__(self, req, source: OpenedSource, device: torch.device) -> None:
        self.version = spdl.__version__
        _install_queue_recorder()
        self.req = req
        spec = req.loader
        self.spec = spec
        self.device = device
        s = req.source
        if s["kind"] == "images":
            self.load = SpdlImageLoader(s["files"], s["resize"], s["crop"], s["random_crop"],
                                        s["flip"], req.augment_seed)
        else:
            self.load = DatasetLoader(source.dataset)
        self.pin = spec.pin_memory and device.type == "cuda"
        self.executor: ProcessPoolExecutor | None = None
        self.hooks: list = []
        self.running: _SpdlIter | None = None
        if spec.spdl_workers == "processes":
            # PipelineBuilder.pipe(executor=...) takes a concurrent.futures executor.
            if "executor" not in inspect.signature(PipelineBuilder.pipe).parameters:
                raise RuntimeError(f"spdl_workers 'processes' is not available in spdl {self.version}")

    def open_mode(self) -> None:
        if self.spec.spdl_workers == "processes":
            n = self.spec.concurrency
            self.executor = ProcessPoolExecutor(
                max_workers=n, mp_context=multiprocessing.get_context(self.spec.context),
                initializer=_worker_init, initargs=(self.load,))
            # Start every worker now (untimed), not inside the first epoch.
            for f in [self.executor.submit(_worker_ping, i) for i in range(n)]:
                f.result()

    def _hook_factory(self, info):
        hook = TaskStatsHook(info)
        self.hooks.append(hook)
        return [hook]

    def _start(self, epoch: int, batches: list[list[int]]) -> _SpdlIter:
        spec = self.spec
        self.hooks = []
        _QUEUE_STATS.clear()
        indices = [i for batch in batches for i in batch]
        if self.executor is not None:
            load = functools.partial(_worker_load, epoch)
        else:
            load = functools.partial(self.load, epoch)
        sizes = [len(b) for b in batches]
        regular = all(n == spec.batch_size for n in sizes[:-1]) and (not sizes or sizes[-1] <= spec.batch_size)
        builder = (
            PipelineBuilder()
            .add_source(indices)
            .pipe(load, concurrency=spec.concurrency, executor=self.executor,
                  output_order="input", name="load")
        )
        if regular:
            builder = builder.aggregate(spec.batch_size, drop_last=spec.drop_last)
        else:
            builder = builder.aggregate(GivenSizes(sizes), drop_last=spec.drop_last)
        pipeline = (
            builder.pipe(functools.partial(_collate, self.pin), name="collate")
            .add_sink(spec.prefetch if spec.prefetch else 3)
            .build(num_threads=spec.concurrency, max_failures=0,
                   task_hook_factory=self._hook_factory)
        )
        pipeline.start()
        self.running = _SpdlIter(pipeline)
        return self.running

    def epoch(self, epoch: int, batches: list[list[int]]) -> SpdlEpoch:
        return SpdlEpoch(self, epoch, batches)

    def epoch_stats(self) -> dict:
        if self.running is not None:
            self.running.stop()  # the stages' final stats are recorded when they end
            self.running = None
        stages = [{"name": h.info.stage_name, "tasks": h.num_tasks,
                   "failures": h.num_tasks - h.num_success, "mean_task_s": h.ave_time}
                  for h in self.hooks]
        # Each stage's output queue, in pipeline order (they are recorded as stages end),
        # and the sink, the queue the loop takes batches from, last: shared reads the
        # last queue as the one the consumer saw.
        recorded = sorted(_QUEUE_STATS, key=lambda r: (r[0].stage_name == "sink", _stage_order(r[0])))
        queues = [{"name": info.stage_name, "gets": s.num_items,
                   "get_wait_s": s.ave_get_time * s.num_items, "readiness": s.occupancy_rate}
                  for info, s in recorded]
        return {"stages": stages, "queues": queues}

    def close_mode(self) -> None:
        if self.running is not None:
            self.running.stop()
            self.running = None
        if self.executor is not None:
            ex, self.executor = self.executor, None
            ex.shutdown(wait=True)
