"""The data sources as torch Datasets, matching runner/loader/src/source.rs and images.rs."""

from __future__ import annotations

import importlib
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
from torch.utils.data import Dataset, TensorDataset

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class SourceError(ValueError):
    """A source that cannot be opened (the message names the file and what was wrong)."""


@dataclass
class OpenedSource:
    dataset: Dataset
    collate_fn: Callable | None  # None: torch's default_collate
    samples: int | None  # len(dataset), None when it has no len
    sample_shape: list[int]
    sample_bytes: int  # bytes of one sample's input tensor


class SyntheticDataset(Dataset):
    """Each sample costs a sleep and/or the native CPU loop; inputs uniform in [0, 1)."""

    def __init__(self, samples: int, features: int, classes: int, latency_us: int, cpu_work_rounds: int):
        self.samples = samples
        self.features = features
        self.classes = classes
        self.latency_s = latency_us / 1e6
        self.rounds = cpu_work_rounds

    def __len__(self) -> int:
        return self.samples

    def __getitem__(self, index: int):
        if self.latency_s > 0:
            time.sleep(self.latency_s)
        x = torch.from_numpy(np.random.default_rng(index).random(self.features, dtype=np.float32))
        if self.rounds > 0:
            # source.rs: acc = sqrt(acc * 1.0000001 + round), kept alive by adding acc * 0.
            acc = float(index)
            sqrt = math.sqrt
            for r in range(self.rounds):
                acc = sqrt(acc * 1.0000001 + r)
            x[0] += acc * 0.0
        return x, index % self.classes


class ImageDataset(Dataset):
    """PIL decode, Resize(shorter side, bilinear, antialias), CenterCrop/RandomCrop, flip, ToTensor, Normalize."""

    def __init__(self, files: list[tuple[str, int]], resize: int, crop: int, random_crop: bool, flip: bool):
        from torchvision import transforms as T

        self.files = files
        steps = [
            T.Resize(resize, interpolation=T.InterpolationMode.BILINEAR, antialias=True),
            T.RandomCrop(crop) if random_crop else T.CenterCrop(crop),
        ]
        if flip:
            steps.append(T.RandomHorizontalFlip())
        steps += [T.ToTensor(), T.Normalize(IMAGENET_MEAN, IMAGENET_STD)]
        self.transform = T.Compose(steps)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        from PIL import Image

        path, label = self.files[index]
        with Image.open(path) as img:
            rgb = img.convert("RGB")
        return self.transform(rgb), label


class FashionMnistDataset(Dataset):
    """The first `samples` IDX images (1 x 28 x 28, scaled to [0, 1]) and labels."""

    def __init__(self, pixels: torch.Tensor, labels: torch.Tensor):
        self.pixels = pixels  # N x 1 x 28 x 28 uint8
        self.labels = labels  # N int64

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.pixels[index].float().div_(255.0), self.labels[index]


def read_idx_u8(path: str, dims: list[int | None], samples: int) -> np.ndarray:
    """Read the first `samples` items of an IDX file of unsigned bytes (data.rs's checks)."""
    what = {1: "IDX labels: unsigned bytes, 1 dimension",
            3: "IDX images: unsigned bytes, 3 dimensions"}.get(len(dims), "IDX unsigned bytes")
    expected_magic = 0x0800 | len(dims)
    header = 4 + 4 * len(dims)
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(header)
            if len(head) < 4:
                raise SourceError(f"{path}: byte {len(head)}: file ends early: expected {header} bytes "
                                  f"of header, found {len(head)}")
            magic = int.from_bytes(head[0:4], "big")
            if magic != expected_magic:
                raise SourceError(f"{path}: byte 0: bad magic number 0x{magic:08x}, expected "
                                  f"0x{expected_magic:08x} ({what})")
            if len(head) < header:
                raise SourceError(f"{path}: byte {len(head)}: file ends early: expected {header} bytes "
                                  f"of header, found {len(head)}")
            sizes = []
            for i, want in enumerate(dims):
                at = 4 + 4 * i
                n = int.from_bytes(head[at:at + 4], "big")
                if (want is None and n == 0) or (want is not None and n != want):
                    expected = "a positive size" if want is None else str(want)
                    raise SourceError(f"{path}: byte {at}: dimension {i} is {n}, expected {expected}")
                sizes.append(n)
            item = math.prod(sizes[1:])
            total = header + sizes[0] * item
            if size < total:
                raise SourceError(f"{path}: byte {size}: file ends early: expected {total} bytes in all, "
                                  f"found {size}")
            if size > total:
                raise SourceError(f"{path}: byte {total}: {size - total} trailing bytes after the data, "
                                  f"expected none")
            if sizes[0] < samples:
                raise SourceError(f"{path}: byte 4: holds {sizes[0]} items, fewer than the {samples} "
                                  f"samples requested")
            data = np.frombuffer(f.read(samples * item), dtype=np.uint8)
    except OSError as e:
        raise SourceError(f"{path}: cannot read: {e}") from None
    return data.reshape([samples, *sizes[1:]]).copy()


def _open_fashionmnist(spec: dict) -> OpenedSource:
    n = spec["samples"]
    pixels = read_idx_u8(spec["images"], [None, 28, 28], n)
    labels = read_idx_u8(spec["labels"], [None], n)
    bad = np.nonzero(labels >= 10)[0]
    if len(bad):
        i = int(bad[0])
        raise SourceError(f"{spec['labels']}: byte {8 + i}: label {labels[i]} out of range, expected 0..10")
    ds = FashionMnistDataset(torch.from_numpy(pixels).reshape(n, 1, 28, 28),
                             torch.from_numpy(labels.astype(np.int64)))
    return OpenedSource(ds, None, n, [1, 28, 28], 784 * 4)


def _read_raw(path: str, dtype: str, count: int, what: str) -> np.ndarray:
    itemsize = np.dtype(dtype).itemsize
    try:
        size = os.path.getsize(path)
    except OSError as e:
        raise SourceError(f"{path}: cannot read: {e}") from None
    if size != count * itemsize:
        raise SourceError(f"{path}: holds {size} bytes, expected {count * itemsize} ({what})")
    return np.fromfile(path, dtype=dtype)


def _open_tensor(spec: dict) -> OpenedSource:
    n, f = spec["samples"], spec["features"]
    x = _read_raw(spec["inputs"], "<f4", n * f, f"{n} x {f} little-endian float32")
    y = _read_raw(spec["labels"], "<i8", n, f"{n} little-endian int64 labels")
    ds = TensorDataset(torch.from_numpy(x).reshape(n, f), torch.from_numpy(y))
    return OpenedSource(ds, None, n, [f], f * 4)


def _open_python(spec: dict) -> OpenedSource:
    for folder in reversed(spec["path"]):
        sys.path.insert(0, folder)
    where = f"{spec['module']}:{spec['function']}"
    try:
        module = importlib.import_module(spec["module"])
    except Exception as e:
        raise SourceError(f"python source {where}: cannot import {spec['module']!r}: "
                          f"{type(e).__name__}: {e}") from e
    fn = getattr(module, spec["function"], None)
    if not callable(fn):
        raise SourceError(f"python source {where}: {spec['module']!r} has no function {spec['function']!r}")
    made = fn(**spec["args"])
    collate = None
    if isinstance(made, tuple):
        if len(made) != 2 or not callable(made[1]):
            raise SourceError(f"python source {where}: expected a Dataset or (Dataset, collate_fn), "
                              f"got a tuple of {len(made)}")
        made, collate = made
    if not hasattr(made, "__getitem__"):
        raise SourceError(f"python source {where}: returned {type(made).__name__}, not a map-style Dataset")
    samples = len(made) if hasattr(made, "__len__") else None
    first = (collate or torch.utils.data.default_collate)([made[0]])
    if not isinstance(first, (tuple, list)) or len(first) != 2 or not isinstance(first[0], torch.Tensor):
        raise SourceError(f"python source {where}: a collated batch must be (inputs tensor, labels), "
                          f"got {type(first).__name__}")
    x = first[0]
    shape = list(x.shape[1:])
    return OpenedSource(made, collate, samples, shape, math.prod(shape) * x.element_size())


def open_source(spec: dict, engine: str = "pytorch") -> OpenedSource:
    """Open the source a request names (the spdl engine decodes images itself: no Dataset then)."""
    kind = spec["kind"]
    if kind == "tensor":
        return _open_tensor(spec)
    if kind == "synthetic":
        ds = SyntheticDataset(spec["samples"], spec["features"], spec["classes"],
                              spec["latency_us"], spec["cpu_work_rounds"])
        return OpenedSource(ds, None, spec["samples"], [spec["features"]], spec["features"] * 4)
    if kind == "images":
        c = spec["crop"]
        if engine == "spdl":
            return OpenedSource(None, None, len(spec["files"]), [3, c, c], 3 * c * c * 4)
        ds = ImageDataset(spec["files"], spec["resize"], c, spec["random_crop"], spec["flip"])
        return OpenedSource(ds, None, len(spec["files"]), [3, c, c], 3 * c * c * 4)
    if kind == "fashionmnist":
        return _open_fashionmnist(spec)
    return _open_python(spec)


def epoch_batches(samples: int, batch_size: int, drop_last: bool, shuffle: bool,
                  generator: torch.Generator | None) -> list[list[int]]:
    """One epoch's batches when the request gives none (python sources)."""
    order = torch.randperm(samples, generator=generator).tolist() if shuffle else list(range(samples))
    batches = [order[i:i + batch_size] for i in range(0, samples, batch_size)]
    if drop_last and batches and len(batches[-1]) < batch_size:
        batches.pop()
    return batches


def check_indices(batches: list[list[list[int]]], samples: int | None) -> None:
    if samples is None:
        return
    for e, epoch in enumerate(batches):
        for b, batch in enumerate(epoch):
            top = max(batch)
            if top >= samples:
                raise SourceError(f"request.batches[{e}][{b}]: sample index {top} is out of range "
                                  f"(the source has {samples} samples)")
