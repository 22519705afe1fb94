"""The timed loops (whole_run and diagnostic, as runner/src/train.rs) and the per-mode sequence."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass
from typing import Any, Iterable

import torch

from .models import Trainer
from .protocol import StageError

_END = object()
_ns = time.perf_counter_ns


class LoaderError(StageError):
    """The loader failed to give the next batch; `stage` is 'worker' or 'epoch'."""

    def __init__(self, stage: str, cause: BaseException) -> None:
        super().__init__(stage, f"loader: {type(cause).__name__}: {cause}")


@dataclass
class DeviceCtx:
    device: torch.device
    non_blocking: bool

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


@dataclass
class EpochResult:
    seconds: float
    samples: int
    steps: int
    bytes: int
    time_to_first_batch_s: float | None
    iterator_creation_s: float | None = None
    next_wait_ns: list[int] | None = None
    transfer_ns: list[int] | None = None
    compute_ns: list[int] | None = None
    comm_ns: list[int] | None = None


def _check_batch(batch: Any) -> None:
    if (not isinstance(batch, (tuple, list)) or len(batch) != 2
            or not isinstance(batch[0], torch.Tensor) or not isinstance(batch[1], torch.Tensor)):
        raise TypeError(f"a batch must be (inputs tensor, labels tensor), got {type(batch).__name__}"
                        + (f" of {len(batch)}" if isinstance(batch, (tuple, list)) else ""))


def whole_run_epoch(loader: Iterable, trainer: Trainer | None, ctx: DeviceCtx, loader_stage: str,
                    fault_step: int = -1, fire=None) -> EpochResult:
    """Synchronize once before and once after; nothing in the loop reads a device value back."""
    device, nb, i64 = ctx.device, ctx.non_blocking, torch.int64
    samples = steps = nbytes = 0
    first_ns = None
    ctx.sync()
    start = _ns()
    try:
        it = iter(loader)
    except Exception as e:
        raise LoaderError(loader_stage, e) from e
    while True:
        try:
            batch = next(it, _END)
        except Exception as e:
            raise LoaderError(loader_stage, e) from e
        if batch is _END:
            break
        if first_ns is None:
            first_ns = _ns() - start
            _check_batch(batch)
        if steps == fault_step:
            fire()
        x, y = batch
        if trainer is not None:
            trainer.step(x.to(device, non_blocking=nb), y.to(device, dtype=i64, non_blocking=nb))
        samples += x.shape[0]
        nbytes += x.numel() * x.element_size() + y.numel() * 8
        steps += 1
    ctx.sync()
    seconds = (_ns() - start) / 1e9
    return EpochResult(seconds, samples, steps, nbytes,
                       None if first_ns is None else first_ns / 1e9)


def diagnostic_epoch(loader: Iterable, trainer: Trainer | None, ctx: DeviceCtx, loader_stage: str,
                     fault_step: int = -1, fire=None) -> EpochResult:
    """Synchronize at every stage boundary of every step; time iterator creation."""
    device, nb, i64, sync = ctx.device, ctx.non_blocking, torch.int64, ctx.sync
    waits: list[int] = []
    transfers: list[int] = []
    computes: list[int] = []
    comms: list[int] = []
    apart = trainer is not None and trainer.ranks is not None
    samples = steps = nbytes = 0
    first_ns = None
    sync()
    start = _ns()
    try:
        it = iter(loader)
    except Exception as e:
        raise LoaderError(loader_stage, e) from e
    creation_ns = _ns() - start
    while True:
        t0 = _ns()
        try:
            batch = next(it, _END)
        except Exception as e:
            raise LoaderError(loader_stage, e) from e
        if batch is _END:
            break
        sync()
        t1 = _ns()
        if first_ns is None:
            first_ns = t1 - start
            _check_batch(batch)
        if steps == fault_step:
            fire()
            t1 = _ns()
        x, y = batch
        if trainer is not None:
            x = x.to(device, non_blocking=nb)
            y = y.to(device, dtype=i64, non_blocking=nb)
            sync()
            t2 = _ns()
            if apart:
                compute, comm = trainer.step_apart(x, y, sync)
                t3 = t2 + compute
                comms.append(comm)
            else:
                trainer.step(x, y)
                sync()
                t3 = _ns()
        else:
            t2 = t3 = t1
        waits.append(t1 - t0)
        transfers.append(t2 - t1)
        computes.append(t3 - t2)
        samples += x.shape[0]
        nbytes += x.numel() * x.element_size() + y.numel() * 8
        steps += 1
    seconds = (_ns() - start) / 1e9
    return EpochResult(seconds, samples, steps, nbytes,
                       None if first_ns is None else first_ns / 1e9,
                       creation_ns / 1e9, waits, transfers, computes, comms if apart else None)


def peak_rss() -> tuple[int, int | None]:
    """(the harness's own peak RSS, the largest peak of a finished child or None), in bytes."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    return own, (children or None)


def epoch_line(mode: str, epoch: int, r: EpochResult, stats: dict) -> dict:
    own, children = peak_rss()
    line: dict[str, Any] = {
        "type": "epoch",
        "mode": mode,
        "epoch": epoch,
        "seconds": r.seconds,
        "samples": r.samples,
        "steps": r.steps,
        "bytes": r.bytes,
        "host_peak_rss_bytes": own,
        "children_peak_rss_bytes": children,
    }
    if mode == "diagnostic":
        line.update(iterator_creation_s=r.iterator_creation_s, next_wait_ns=r.next_wait_ns,
                    transfer_ns=r.transfer_ns, compute_ns=r.compute_ns)
        if r.comm_ns is not None:
            line["comm_ns"] = r.comm_ns
        if stats.get("worker_tracks") is not None:
            line["worker_tracks"] = stats["worker_tracks"]
    line["loader"] = {"time_to_first_batch_s": r.time_to_first_batch_s,
                      "stages": stats.get("stages", []), "queues": stats.get("queues", [])}
    return line


def run_modes(req, engine, batches: list[list[list[int]]], ctx: DeviceCtx, out, fault, state,
              ranks=None, warm_batch=None) -> list[Trainer]:
    """Each mode: fresh model and loader, an untimed warm-up step, then the timed epochs.

    The warm-up step is on `warm_batch` when given (a user's model: the Dataset's first batch), else
    on a synthetic batch of the model's shape. Returns each mode's trainer (their weights are
    compared across ranks)."""
    trainers = []
    for mode_index, mode in enumerate(req.modes):
        state.stage = "setup"
        trainer = None
        if req.model["name"] != "none":
            trainer = Trainer(req.model, req.optimizer, ctx.device, req.weights_seed, ranks)
            trainers.append(trainer)
            if warm_batch is not None:
                x = warm_batch[0].to(ctx.device)
                y = warm_batch[1].to(ctx.device, dtype=torch.int64)
            else:
                x, y = trainer.synthetic_batch(req.loader.batch_size)
            trainer.step(x, y)
            ctx.sync()
            del x, y
        # Augmentations (RandomCrop, flip) draw from torch's generator: same draws on every mode.
        torch.manual_seed(req.augment_seed)
        set_tracing = getattr(engine, "set_tracing", None)
        if set_tracing is not None:  # worker tracks: diagnostic epochs only
            set_tracing(mode == "diagnostic")
        engine.open_mode()
        timed = whole_run_epoch if mode == "whole_run" else diagnostic_epoch
        for e in range(req.epochs):
            state.stage = "epoch"
            fault_step = fault.step_for(mode_index, e) if fault is not None else -1
            fire = (lambda: fault.fire(out)) if fault_step >= 0 else None
            result = timed(engine.epoch(e, batches[e]), trainer, ctx, engine.loader_stage,
                           fault_step, fire)
            out.emit(epoch_line(mode, e, result, engine.epoch_stats()))
        state.stage = "epoch"
        engine.close_mode()
    return trainers
