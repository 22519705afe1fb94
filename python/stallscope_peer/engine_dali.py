"""The `dali` engine: an NVIDIA DALI pipeline fed the given batches through an external source, read by DALI's PyTorch iterator."""

from __future__ import annotations

import io
import os
import time

import numpy as np
import nvidia.dali as dali
import nvidia.dali.fn as fn
import nvidia.dali.types as types
import torch
from nvidia.dali.pipeline import Pipeline
from nvidia.dali.plugin.pytorch import DALIGenericIterator
from PIL import Image

from .engine_pytorch import CudaPrefetcher
from .orphans import die_with_harness
from .sources import IMAGENET_MEAN, IMAGENET_STD, OpenedSource, SyntheticDataset

# One pipeline per timing mode, built (and its Python workers started) in
# open_mode, untimed, as SPDL's process pool is; the iterator is made at the
# first epoch's iter() (DALI starts prefetching then, so inside the clock)
# and reset at each later epoch's iter(), after the epoch's batches are set.
#
# Every source goes through `fn.external_source` in batch mode: the callable
# gets a BatchInfo (iteration, epoch_idx) and returns the samples of that
# batch of the runner's sampler, so DALI sees the same samples in the same
# order as every other engine (batches may be irregular: the pipeline's
# max_batch_size is the largest batch).
#
# - `images`: the callable reads each file's encoded bytes (in the loop's
#   thread, as DALI's external-source examples do) and works out, from the
#   JPEG header, torchvision's resized size and crop anchor (see
#   FileBatches); `fn.decoders.image` decodes (device "cpu", or "mixed":
#   nvJPEG), `fn.resize` scales to that size (bilinear, antialiased, as
#   torchvision's Resize), and `fn.crop_mirror_normalize` crops, flips and
#   normalises with the ImageNet mean/std to CHW float32. The operators run
#   on DALI's `num_threads` C++ threads.
# - `tensor`, `fashionmnist`: the callable gathers the Dataset's own
#   samples (the same numbers the other engines give); DALI passes them on.
# - `synthetic`: the per-sample sleep and CPU loop are Python, which DALI's
#   C++ threads cannot run; they run in DALI's Python worker processes
#   (`parallel=True` external source, `py_num_workers` = workers), one whole
#   batch per worker task, as a DataLoader worker makes a batch.
#
# Knobs: workers -> num_threads (and py_num_workers for synthetic), prefetch
# -> the pipeline's prefetch_queue_depth (and prefetch x workers batches in
# flight for the parallel external source, as a DataLoader keeps), dali_device
# -> the decoder's placement.


class FileBatches:
    """Batch-mode source of an images source: encoded bytes, label, and where to resize, crop and flip.

    The sizes and crop anchors are torchvision's (Resize truncates the longer
    side; CenterCrop rounds half to even, where DALI's 0.5 position would
    round up), read from the JPEG header; random crops and flips are drawn as
    the spdl engine draws them (a generator per augment_seed, epoch and
    index: top, left, then the flip), so DALI and SPDL make the same crops.
    """

    def __init__(self, engine: "Engine", source: dict, seed: int) -> None:
        self.engine = engine
        self.files = source["files"]
        self.resize = source["resize"]
        self.crop = source["crop"]
        self.random_crop = source["random_crop"]
        self.flip = source["flip"]
        self.seed = seed

    def __call__(self, info):
        batch = self.engine.current_batch(info)
        t0 = time.perf_counter()
        columns: list[list] = [[] for _ in range(7)]
        for i in batch:
            path, label = self.files[i]
            data = np.fromfile(path, dtype=np.uint8)
            for column, value in zip(columns, (data, np.array([label], dtype=np.int64),
                                               *self.placement(i, data))):
                column.append(value)
        self.engine.count_task(time.perf_counter() - t0)
        return tuple(columns)

    def placement(self, index: int, data: np.ndarray) -> tuple:
        """Resized width and height, crop position (0..1) along x and y, and the mirror flag."""
        with Image.open(io.BytesIO(data)) as img:
            w0, h0 = img.size
        r = self.resize
        w, h = (r, int(r * h0 / w0)) if w0 <= h0 else (int(r * w0 / h0), r)
        c = self.crop
        mirror = 0
        if self.random_crop or self.flip:
            rng = np.random.default_rng([self.seed, self.engine.epoch_index, index])
        if self.random_crop:
            top, left = int(rng.integers(0, h - c + 1)), int(rng.integers(0, w - c + 1))
        else:
            top, left = int(round((h - c) / 2.0)), int(round((w - c) / 2.0))
        if self.flip:
            mirror = int(rng.random() < 0.5)
        f32 = np.float32
        return (f32(w), f32(h), f32(_position(left, w - c)), f32(_position(top, h - c)),
                np.int32(mirror))


def _position(anchor: int, room: int) -> float:
    """The crop_pos giving this integer anchor: DALI takes pos x room, so a quarter pixel in survives its rounding."""
    if room <= 0:
        return 0.5
    return min(1.0, (anchor + 0.25) / room)


class DatasetBatches:
    """Batch-mode source of a tensor or fashionmnist source: the Dataset's own samples as arrays."""

    def __init__(self, engine: "Engine", dataset) -> None:
        self.engine = engine
        self.dataset = dataset

    def __call__(self, info):
        batch = self.engine.current_batch(info)
        t0 = time.perf_counter()
        xs, ys = _samples(self.dataset, batch)
        self.engine.count_task(time.perf_counter() - t0)
        return xs, ys


class ParallelBatches:
    """The parallel source of a synthetic source: runs in DALI's Python workers, so it holds every epoch's batches."""

    def __init__(self, dataset: SyntheticDataset, batches: list[list[list[int]]]) -> None:
        self.dataset = dataset
        self.batches = batches
        self.harness = os.getpid()

    def __call__(self, info):
        die_with_harness(self.harness)
        epoch = self.batches[info.epoch_idx]
        if info.iteration >= len(epoch):
            raise StopIteration
        t0 = time.perf_counter()
        xs, ys = _samples(self.dataset, epoch[info.iteration])
        spent = np.float32((time.perf_counter() - t0) / len(xs))
        return xs, ys, [np.array([spent], dtype=np.float32) for _ in xs]


def _samples(dataset, batch: list[int]) -> tuple[list, list]:
    xs, ys = [], []
    for i in batch:
        x, y = dataset[i]
        xs.append(np.ascontiguousarray(x.numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float32))
        ys.append(np.array([int(y)], dtype=np.int64))
    return xs, ys


class DaliEpoch:
    """One epoch: iter() makes (first epoch) or resets the DALI iterator."""

    def __init__(self, engine: "Engine") -> None:
        self.engine = engine

    def __iter__(self):
        return self.engine._start()


class _DaliIter:
    def __init__(self, engine: "Engine", it: DALIGenericIterator) -> None:
        self.engine = engine
        self.it = it

    def __iter__(self):
        return self

    def __next__(self):
        out = self.it.__next__()[0]  # StopIteration at the epoch's end
        x, y = out["x"], out["y"].reshape(-1)
        if "t" in out:
            self.engine.count_task(float(out["t"].sum()))
        if self.engine.pin:
            x, y = x.pin_memory(), y.pin_memory()
        return x, y


class Engine:
    name = "dali"
    loader_stage = "worker"

    def __init__(self, req, source: OpenedSource, device: torch.device) -> None:
        self.version = dali.__version__
        self.req = req
        self.spec = req.loader
        self.device = device
        self.source = source
        self.kind = req.source["kind"]
        if self.kind not in ("tensor", "synthetic", "images", "fashionmnist"):
            raise ValueError(f"the dali engine has no {self.kind!r} source")
        self.pin = self.spec.pin_memory and device.type == "cuda" and self.spec.dali_device == "cpu"
        self.all_batches = req.batches
        self.batches: list[list[int]] = []
        self.epoch_index = 0
        self.pipe: Pipeline | None = None
        self.iterator: DALIGenericIterator | None = None
        self.tasks = 0
        self.task_s = 0.0

    # ------------------------------------------------------------------
    # the pipeline

    def _device_id(self) -> int | None:
        if self.spec.dali_device == "mixed":
            return self.device.index if self.device.index is not None else torch.cuda.current_device()
        return None  # CPU operators only

    def _build(self) -> Pipeline:
        spec = self.spec
        parallel = self.kind == "synthetic"
        start = "fork" if spec.context == "fork" and self.device.type == "cpu" else "spawn"
        pipe = Pipeline(
            batch_size=max([spec.batch_size] + [len(b) for e in self.all_batches for b in e]),
            num_threads=spec.workers,
            device_id=self._device_id(),
            seed=self.req.augment_seed,
            prefetch_queue_depth=spec.prefetch,
            py_num_workers=spec.workers if parallel else 1,
            py_start_method=start,
        )
        with pipe:
            outputs = self._graph()
            pipe.set_outputs(*outputs)
        pipe.build()
        return pipe

    def _graph(self) -> list:
        spec, s = self.spec, self.req.source
        if self.kind == "synthetic":
            return list(fn.external_source(
                source=ParallelBatches(self.source.dataset, self.all_batches), num_outputs=3, batch=True,
                batch_info=True, parallel=True, prefetch_queue_depth=spec.prefetch * spec.workers,
                dtype=[types.FLOAT, types.INT64, types.FLOAT]))
        if self.kind != "images":
            return list(fn.external_source(source=DatasetBatches(self, self.source.dataset), num_outputs=2,
                                           batch=True, batch_info=True, dtype=[types.FLOAT, types.INT64]))
        f32 = types.FLOAT
        jpegs, labels, width, height, pos_x, pos_y, mirror = fn.external_source(
            source=FileBatches(self, s, self.req.augment_seed), num_outputs=7, batch=True, batch_info=True,
            dtype=[types.UINT8, types.INT64, f32, f32, f32, f32, types.INT32])
        # adjust_orientation off: PIL (the pytorch engine) ignores EXIF orientation too.
        images = fn.decoders.image(jpegs, device=spec.dali_device, output_type=types.RGB,
                                   adjust_orientation=False)
        images = fn.resize(images, resize_x=width, resize_y=height, interp_type=types.INTERP_LINEAR,
                           antialias=True)
        images = fn.crop_mirror_normalize(
            images, crop=(s["crop"], s["crop"]), crop_pos_x=pos_x, crop_pos_y=pos_y, mirror=mirror,
            mean=[255.0 * m for m in IMAGENET_MEAN], std=[255.0 * v for v in IMAGENET_STD],
            dtype=f32, output_layout="CHW")
        return [images, labels]

    # ------------------------------------------------------------------
    # what the external sources call

    def current_batch(self, info) -> list[int]:
        if info.iteration >= len(self.batches):
            raise StopIteration
        return self.batches[info.iteration]

    def count_task(self, seconds: float) -> None:
        self.tasks += 1
        self.task_s += seconds

    # ------------------------------------------------------------------
    # the engine interface

    def open_mode(self) -> None:
        self.pipe = self._build()
        self.iterator = None

    def _start(self) -> _DaliIter:
        self.tasks, self.task_s = 0, 0.0
        if self.iterator is None:
            outputs = ["x", "y", "t"] if self.kind == "synthetic" else ["x", "y"]
            self.iterator = DALIGenericIterator([self.pipe], outputs, auto_reset=False)
        else:
            self.iterator.reset()
        it = _DaliIter(self, self.iterator)
        if self.spec.prefetch_to_device:
            return iter(CudaPrefetcher(it, self.device))
        return it

    def epoch(self, epoch: int, batches: list[list[int]]) -> DaliEpoch:
        if self.kind == "synthetic" and batches is not self.all_batches[epoch]:
            raise RuntimeError("the dali engine's parallel source holds the request's batches; "
                               f"epoch {epoch} was given others")
        self.batches = batches
        self.epoch_index = epoch
        return DaliEpoch(self)

    def epoch_stats(self) -> dict:
        name = "external_source (python workers)" if self.kind == "synthetic" else "external_source"
        mean = self.task_s / self.tasks if self.tasks else 0.0
        return {"stages": [{"name": name, "tasks": self.tasks, "failures": 0, "mean_task_s": mean}],
                "queues": []}

    def close_mode(self) -> None:
        pipe, self.pipe, self.iterator = self.pipe, None, None
        if pipe is None:
            return
        pool = getattr(pipe, "_py_pool", None)  # the parallel source's worker processes
        if pool is not None:
            pool.close()
        pipe._shutdown()
