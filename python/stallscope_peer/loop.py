"""The timed loops (whole_run and diagnostic, as runner/core/src/measure/mod.rs) and the per-mode sequence.

The clocks and device waits are `stallscope_steps.clock.StepClock`'s, the job's too; peak memory is
`stallscope_steps.peaks`' per-epoch window. fixtures/loop/contract.json holds the calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import torch

from stallscope_steps import peaks
from stallscope_steps.clock import StepClock, now

from .models import Trainer
from .protocol import StageError

_END = object()


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
    clock = StepClock("whole_run", ctx.sync)
    samples = steps = nbytes = 0
    first_ns = None
    start = clock.open()
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
            first_ns = now() - start
            _check_batch(batch)
        if steps == fault_step:
            fire()
        x, y = batch
        if trainer is not None:
            trainer.step(x.to(device, non_blocking=nb), y.to(device, dtype=i64, non_blocking=nb))
        samples += x.shape[0]
        nbytes += x.numel() * x.element_size() + y.numel() * 8
        steps += 1
    seconds = (clock.close() - start) / 1e9
    return EpochResult(seconds, samples, steps, nbytes,
                       None if first_ns is None else first_ns / 1e9)


def diagnostic_epoch(loader: Iterable, trainer: Trainer | None, ctx: DeviceCtx, loader_stage: str,
                     fault_step: int = -1, fire=None) -> EpochResult:
    """Synchronize at every stage boundary of every step; time iterator creation."""
    device, nb, i64 = ctx.device, ctx.non_blocking, torch.int64
    clock = StepClock("diagnostic", ctx.sync)
    waits: list[int] = []
    transfers: list[int] = []
    computes: list[int] = []
    comms: list[int] = []
    apart = trainer is not None and trainer.ranks is not None
    samples = steps = nbytes = 0
    first_ns = None
    start = clock.open()
    try:
        it = iter(loader)
    except Exception as e:
        raise LoaderError(loader_stage, e) from e
    creation_ns = now() - start
    while True:
        t0 = now()
        try:
            batch = next(it, _END)
        except Exception as e:
            raise LoaderError(loader_stage, e) from e
        if batch is _END:
            break
        t1 = clock.mark()
        if first_ns is None:
            first_ns = t1 - start
            _check_batch(batch)
        if steps == fault_step:
            fire()
            t1 = now()
        x, y = batch
        if trainer is not None:
            x = x.to(device, non_blocking=nb)
            y = y.to(device, dtype=i64, non_blocking=nb)
            t2 = clock.mark()
            if apart:
                compute, comm = trainer.step_apart(x, y, clock.sync)
                t3 = t2 + compute
                comms.append(comm)
            else:
                trainer.step(x, y)
                t3 = clock.mark()
        else:
            t2 = t3 = t1
        waits.append(t1 - t0)
        transfers.append(t2 - t1)
        computes.append(t3 - t2)
        samples += x.shape[0]
        nbytes += x.numel() * x.element_size() + y.numel() * 8
        steps += 1
    seconds = (clock.close() - start) / 1e9
    return EpochResult(seconds, samples, steps, nbytes,
                       None if first_ns is None else first_ns / 1e9,
                       creation_ns / 1e9, waits, transfers, computes, comms if apart else None)


def epoch_workers(engine) -> dict[int, dict]:
    """The engine's worker processes alive now: its own list (the pytorch engine names its
    DataLoader's workers), else every descendant of the harness but multiprocessing's helpers."""
    own = getattr(engine, "worker_processes", None)
    found = own() if own is not None else peaks.descendants()
    return {pid: {"loader": 0, **meta} for pid, meta in found.items()}


def _sampler(window: peaks.Window, engine):
    """Engines that do not name their workers: sample the harness's descendants during the epoch
    (their processes may start and end inside it). The pytorch engine's are read exactly."""
    import contextlib

    if hasattr(engine, "worker_processes"):
        return contextlib.nullcontext()
    return peaks.Sampler(window, lambda: epoch_workers(engine))


def memory_of(window: peaks.Window, engine) -> dict:
    """The epoch's peaks (reset when it opened): the harness and each worker, with PSS and USS."""
    return window.close(epoch_workers(engine))


def epoch_line(mode: str, epoch: int, r: EpochResult, stats: dict, memory: dict) -> dict:
    line: dict[str, Any] = {
        "type": "epoch",
        "mode": mode,
        "epoch": epoch,
        "seconds": r.seconds,
        "samples": r.samples,
        "steps": r.steps,
        "bytes": r.bytes,
        "host_peak_rss_bytes": memory["main"]["peak_rss_bytes"],
        "children_peak_rss_bytes": memory["workers_peak_rss_bytes"],
        "memory": memory,
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
    window = peaks.Window()
    undo = peaks.watch_shutdowns(lambda it: _ending(window, it))
    try:
        for mode_index, mode in enumerate(req.modes):
            trainer = _run_mode(req, engine, batches, ctx, out, fault, state, ranks, warm_batch,
                                (mode_index, mode), window)
            if trainer is not None:
                trainers.append(trainer)
    finally:
        undo()
    return trainers


def _ending(window: peaks.Window, it) -> None:
    """A DataLoader iterator stops its workers (a non-persistent epoch's end): keep their peaks."""
    for pid, meta in peaks.dataloader_workers(it).items():
        window.ending(pid, {"loader": 0, **meta})


def _run_mode(req, engine, batches, ctx: DeviceCtx, out, fault, state, ranks, warm_batch,
              which: tuple[int, str], window: peaks.Window) -> Trainer | None:
    """One mode: fresh model and loader, the warm-up step, then each timed epoch with its peaks."""
    mode_index, mode = which
    state.stage = "setup"
    trainer = None
    if req.model["name"] != "none":
        trainer = Trainer(req.model, req.optimizer, ctx.device, req.weights_seed, ranks)
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
        window.open({pid: {"loader": 0, **meta} for pid, meta in epoch_workers(engine).items()})
        result = timed(engine.epoch(e, batches[e]), trainer, ctx, engine.loader_stage,
                       fault_step, fire)
        memory = memory_of(window, engine)
        out.emit(epoch_line(mode, e, result, engine.epoch_stats(), memory))
    state.stage = "epoch"
    engine.close_mode()
    return trainer
