"""The measured loader: an iterator proxy that times every next(), warm-up, the window, replay, and the end of it."""

from __future__ import annotations

import sys
import threading
import time

from . import cpu, memory
from .describe import iterator_facts
from .records import batch_size_and_bytes

_ns = time.perf_counter_ns
_NOTHING = object()
FLUSH_NS = 500_000_000
CPU_TRANSFER = "none: the job runs on the CPU (no accelerator was initialised), there is no host-to-device copy"
NO_COPY_SEEN = ("none seen: no Tensor.to / Tensor.cuda / Tensor.copy_ from a CPU tensor to an accelerator "
                "ran in the consumer thread outside next() during the window")


def sync() -> None:
    """Wait for the accelerator this process has initialised (its current device); nothing on the CPU."""
    torch = sys.modules["torch"]
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_initialized():
        xpu.synchronize()


def accelerator() -> str | None:
    torch = sys.modules["torch"]
    if torch.cuda.is_initialized():
        return f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_initialized():
        return f"xpu:{xpu.current_device()}"
    return None


class Proxy:
    """Stands for the DataLoader's iterator: next() is timed, everything else goes to the real one."""

    __slots__ = ("_stallscope_it", "_stallscope_session")

    def __init__(self, it, session) -> None:
        object.__setattr__(self, "_stallscope_it", it)
        object.__setattr__(self, "_stallscope_session", session)

    def __iter__(self):
        return self

    def __next__(self):
        return self._stallscope_session.next(self)

    def __len__(self):
        return len(self._stallscope_it)

    def __getattr__(self, name):
        return getattr(self._stallscope_it, name)

    def __setattr__(self, name, value):
        setattr(self._stallscope_it, name, value)

    def __delattr__(self, name):
        delattr(self._stallscope_it, name)

    def __repr__(self):
        return repr(self._stallscope_it)

    @property
    def __class__(self):  # isinstance(proxy, _MultiProcessingDataLoaderIter) holds, as for the real one
        return type(self._stallscope_it)


class Steps:
    """The window's per-step series: one tuple per step, written as columns in chunks."""

    def __init__(self, diagnostic: bool) -> None:
        self.names = ["step_ns", "next_ns", "samples", "bytes"]
        if diagnostic:
            self.names += ["next_wait_ns", "transfer_ns", "compute_ns", "copies"]
        self.rows = []
        self.written = 0

    @property
    def count(self) -> int:
        return len(self.rows)

    def chunk(self) -> dict | None:
        if self.written == len(self.rows):
            return None
        record = {"type": "steps", "first": self.written}
        columns = zip(*self.rows[self.written:])
        record.update({n: list(c) for n, c in zip(self.names, columns)})
        self.written = len(self.rows)
        return record


class Session:
    """The measured loader across its epochs: warm-up, then the window of `steps` steps."""

    def __init__(self, rt, info) -> None:
        self.rt, self.config, self.info = rt, rt.config, info
        self.tensor = sys.modules["torch"].Tensor
        self.diagnostic = rt.config.diagnostic
        self.steps = Steps(self.diagnostic)
        self.phase = "warmup"
        self.epoch = -1
        self.current = None
        self.taken = 0
        self.iter_started = self.iter_ns = None
        self.first_batch_pending = False
        self.gap_ns = None
        self.t0 = None
        self.pending = None  # [start_ns, next_ns, next_wait_ns, samples, bytes] of the step in progress
        self.in_next_since = None
        self.epoch_end = None  # start of the call that ended an epoch inside the window
        self.samples = self.bytes = 0
        self.last_flush = 0
        self.held = []  # records made inside the window, written with the next chunk
        self.replay = None
        self.replay_i = 0
        self.cpu_open = None  # the process tree's CPU times when the window opened
        self.consumer = None
        self.copies = None
        self.transfer_acc = self.copies_acc = 0
        self._got = _NOTHING  # the batch taken from the loader in the current call
        self._loader_raised = False  # the exception in flight is the loader's own

    # ------------------------------------------------------------ iter() and next()

    def iterate(self, loader, orig_iter):
        """The measured loader's iter(): a new epoch (ending the step in progress inside the window)."""
        try:
            if self.phase == "window":
                c = self._boundary()
                if self.epoch_end is None:  # a new epoch without StopIteration (the script broke out)
                    self.epoch_end = c
        except Exception as e:  # noqa: BLE001 (reported; the loader is iterated unmeasured)
            self.rt.fail("measuring the loader's iter()", e)
            return orig_iter(loader)
        start = _ns()
        it = orig_iter(loader)
        self.iter_ns = _ns() - start
        self.iter_started = start
        self.rt.iterators[it] = self.info.index
        self.epoch += 1
        self.first_batch_pending = True
        self.current = Proxy(it, self)
        return self.current

    def next(self, proxy):
        """The proxy's __next__: the loader's own exceptions (StopIteration too) reach the script as they are;
        a failure of the measuring itself is reported and the call completes unmeasured."""
        it = proxy._stallscope_it
        if proxy is not self.current or self.phase == "done" or self.rt.disabled:
            return next(it)
        self._got = _NOTHING
        self._loader_raised = False
        try:
            return self._next(it)
        except Exception as e:
            if self._loader_raised:
                raise
            self.rt.fail("measuring the loader's next()", e)
            return next(it) if self._got is _NOTHING else self._got

    def _next(self, it):
        if self.phase == "warmup":
            if self.taken < self.config.warmup:
                batch = self._fetch(it)
                self.taken += 1
                return batch
            self._open_window(it)
        c = self._boundary()
        if self.epoch_end is not None:
            self.gap_ns, self.epoch_end = c - self.epoch_end, None
        if self.replay is not None:
            batch = self._got = self.replay[self.replay_i % len(self.replay)]
            self.replay_i += 1
        else:
            try:
                batch = self._fetch(it, c)
            except StopIteration:
                self.epoch_end = c
                raise
        returned = waited = _ns()
        if self.diagnostic:
            sync()
            waited = _ns()
        samples, nbytes = batch_size_and_bytes(batch, self.tensor)
        self.pending = [c, returned - c, waited - c, samples, nbytes]
        self.transfer_acc = self.copies_acc = 0
        return batch

    def _fetch(self, it, since: int | None = None):
        """The real next(), and the epoch's first-batch facts once per epoch."""
        self.in_next_since = _ns() if since is None else since
        try:
            batch = self._got = next(it)
        except BaseException as e:
            self._loader_raised = True
            if self.first_batch_pending and isinstance(e, StopIteration):
                try:
                    self._epoch_record(it, None)
                except Exception as failure:  # noqa: BLE001 (reported; the StopIteration goes on)
                    self.rt.fail("the epoch record", failure)
            raise
        finally:
            self.in_next_since = None
        if self.first_batch_pending:
            self._epoch_record(it, _ns() - self.iter_started)
        return batch

    def _epoch_record(self, it, first_ns) -> None:
        self.first_batch_pending = False
        record = {"type": "cold" if self.epoch == 0 else "epoch", "epoch": self.epoch,
                  "loader": self.info.index, "iteration_index": self.info.iteration,
                  "iterator_creation_s": self.iter_ns / 1e9,
                  "time_to_first_batch_s": None if first_ns is None else first_ns / 1e9,
                  "empty": first_ns is None, **iterator_facts(it),
                  "phase": self.phase, "at_step": self.steps.count if self.phase == "window" else None,
                  "gap_ns": self.gap_ns if self.phase == "window" else None}
        self.gap_ns = None
        self._emit(record)

    # ------------------------------------------------------------ the window

    def _open_window(self, it) -> None:
        if self.config.replay_batches is not None:
            self._gather(it)
        self.consumer = threading.get_ident()
        if self.diagnostic:
            from .copies import CopyClock

            self.copies = CopyClock(self)
            self.copies.install()
        self._emit({"type": "window", "epoch": self.epoch, "warmup_taken": self.taken,
                    "replay": self.replay is not None})
        self.cpu_open = cpu.snapshot(closing=False)
        self.phase = "window"

    def _gather(self, it) -> None:
        """Replay: hold up to M real batches (after warm-up), fewer when one more (as large as the mean
        so far) would pass `max_bytes`; the window then cycles through them."""
        want, limit = self.config.replay_batches, self.config.replay_max_bytes
        start = _ns()
        held, nbytes, short = [], 0, None
        while len(held) < want:
            if limit is not None and held and nbytes + nbytes / len(held) > limit:
                short = f"one more batch would pass max_bytes ({nbytes} bytes held, max_bytes {limit})"
                break
            try:
                held.append(self._fetch(it))
            except StopIteration:
                if not held:
                    raise  # the epoch ended right after warm-up: gather from the next one
                self._loader_raised = False  # handled here: the script never sees it
                short = "the epoch ended while gathering"
                break
            nbytes += batch_size_and_bytes(held[-1], self.tensor)[1]
        self.replay = held
        self._emit({"type": "replay", "batches": len(held), "requested": want, "max_bytes": limit,
                    "bytes": nbytes, "gather_s": (_ns() - start) / 1e9, "short": short})

    def _boundary(self) -> int:
        """A next() or iter() call inside the window begins: end the step in progress."""
        ending = self.pending is not None and self.steps.count + 1 == self.config.steps
        c = _ns()
        if self.pending is not None and not ending and c - self.last_flush >= FLUSH_NS:
            self._flush()
            c = _ns()
        if self.diagnostic or ending or self.t0 is None:
            sync()
            c = _ns()
        if self.t0 is None:
            self.t0 = self.last_flush = c
        if self.pending is not None:
            self._close(c)
        if self.steps.count == self.config.steps:
            self._finish(c)
        return c

    def _close(self, end: int) -> None:
        start, next_ns, wait_ns, samples, nbytes = self.pending
        self.pending = None
        step = end - start
        if self.diagnostic:
            self.steps.rows.append((step, next_ns, samples, nbytes, wait_ns, self.transfer_acc,
                                    step - wait_ns - self.transfer_acc, self.copies_acc))
        else:
            self.steps.rows.append((step, next_ns, samples, nbytes))
        self.samples += samples or 0
        self.bytes += nbytes

    def _emit(self, record: dict) -> None:
        if self.phase == "window":
            self.held.append(record)
        else:
            self.rt.write(record)

    def _flush(self) -> None:
        chunk = self.steps.chunk()
        if chunk is not None:
            self.rt.write(chunk)
        for record in self.held:
            self.rt.write(record)
        self.held = []
        self.last_flush = _ns()

    def _transfer_note(self) -> str | None:
        if not self.diagnostic:
            return None
        if self.copies is not None and self.copies.total:
            return None
        return CPU_TRANSFER if accelerator() is None else NO_COPY_SEEN

    def _finish(self, t1: int) -> None:
        """The window is complete: chunk, memory, done, then end the process cleanly."""
        cpu_close = cpu.snapshot(closing=True)
        self.phase = "done"
        self.rt.over = True
        self._flush()
        workers = self.rt.workers()
        self.rt.write(memory.snapshot(workers))
        cost = cpu.window_cost(self.cpu_open, cpu_close, (t1 - self.t0) / 1e9, workers)
        self.rt.write({"type": "done", "steps": self.steps.count, "window_s": (t1 - self.t0) / 1e9,
                       "samples": self.samples, "bytes": self.bytes, "epochs": self.epoch + 1,
                       "replay": self.replay is not None, "accelerator": accelerator(),
                       "transfer": self._transfer_note(),
                       "copies": None if self.copies is None else self.copies.total, "cpu": cost})
        self.rt.shutdown_and_exit(0)

    # ------------------------------------------------------------ the end without completion

    def close_for_end(self) -> dict:
        """Flush what was measured and describe where the process stood (for `end`)."""
        now = _ns()
        pending = None
        if self.pending is not None:
            pending = {"started_ns_ago": now - self.pending[0], "in_next": False}
        elif self.in_next_since is not None:
            pending = {"started_ns_ago": now - self.in_next_since, "in_next": True}
        if self.phase == "window":
            self._flush()
        self.phase = "done"
        return {"steps": self.steps.count, "phase_at_end": "window" if self.t0 is not None else "warmup",
                "warmup_taken": self.taken, "epochs": self.epoch + 1, "samples": self.samples,
                "window_s_so_far": None if self.t0 is None else (now - self.t0) / 1e9,
                "pending_step": pending, "replay": self.replay is not None,
                "transfer": self._transfer_note()}
