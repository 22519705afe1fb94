"""The training thread's steps: which thread trains, where its steps end, and how long it waits for data.

docs/job-protocol.md ("The step") is the contract; in short:

- the **training thread** is the thread that runs the optimizer step (torch.optim's global
  step post-hook); the **lead optimizer** is the first one it steps, and each of its steps ends a
  training step (other optimizers' steps do not: a GAN's two optimizers make one step);
- the step's **wait** is the time that thread is blocked getting batches: its own calls into any
  DataLoader iterator (`next()`, and `iter()`, which restarts non-persistent workers), however deep
  in generators and wrappers of its own, and its `get` on a **data queue** (a `queue.Queue` that a
  thread iterating a DataLoader put into). Calls nested inside one of these count once;
- fetches are classified in **bursts** (a source's fetches since the last backward or optimizer
  step), when the next backward or optimizer step comes: training data, or a validation pass,
  whose span (`apart_ns`) is taken out of the step (sources.py names the rules);
- with no optimizer stepping, the **fallback** times the loop that consumes DataLoader
  `config.loader` (iteration index), as protocol 1 did.

Everything here runs in the script's threads; `Session` (window.py) owns the window around it.
"""

from __future__ import annotations

import threading
import time

from . import sources
from .records import batch_size_and_bytes

now = time.perf_counter_ns
get_ident = threading.get_ident
# With no optimizer step by then, the fallback takes over after this many batches past the warm-up
# of DataLoader `config.loader` (room for gradient accumulation of up to this many micro-batches).
FALLBACK_AFTER = 64


class Burst:
    """One source's fetches by the training thread since the last backward or optimizer step."""

    __slots__ = ("source", "first", "last_end", "seq", "wait", "synced", "batches", "samples",
                 "sized", "bytes", "no_grad", "why")

    def __init__(self, source, first: int) -> None:
        self.source, self.first = source, first
        self.last_end = self.seq = self.wait = self.synced = 0
        self.batches = self.samples = self.sized = self.bytes = 0
        self.no_grad = False
        self.why = None


class Step:
    """The training step in progress: what its resolved bursts and copies added up to."""

    __slots__ = ("start", "wait", "synced", "batches", "samples", "sized", "bytes", "apart",
                 "transfer", "copies")

    def __init__(self, start: int) -> None:
        self.start = start
        self.wait = self.synced = self.batches = self.samples = self.sized = self.bytes = 0
        self.apart = self.transfer = self.copies = 0

    def row(self, end: int, diagnostic: bool) -> tuple:
        step = end - self.start - self.apart
        samples = self.samples if self.sized else None
        if not diagnostic:
            return (step, self.wait, samples, self.bytes, self.batches, self.apart)
        return (step, self.wait, samples, self.bytes, self.batches, self.apart, self.synced,
                self.transfer, step - self.synced - self.transfer, self.copies)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


class Tracker:
    """The training thread's fetches, backward and optimizer steps, made into steps."""

    def __init__(self, session) -> None:
        self.session = session
        torch = session.torch
        self.grad_enabled = torch.is_grad_enabled
        self.tensor = torch.Tensor
        self.tid = None  # the training thread
        self.lead = None  # the optimizer whose steps end training steps
        self.mode = None  # None (not known yet), "optimizer" or "loader" (the fallback)
        self.fallback = None  # the LoaderInfo the fallback times
        self.fallback_ok = True  # its last fetch returned a batch (so its next next() starts a step)
        self.optimizers: dict[int, str] = {}  # id -> class of each optimizer the training thread stepped
        self.feeders: dict[int, object] = {}  # other thread -> the LoaderInfo it fetched from last
        self.depth = 0  # the training thread is inside a fetch
        self.fetching_since = None
        self.mark = now  # the stage clock's mark once the window is open (diagnostic: it syncs)
        self.step = None  # the step in progress (None before the first boundary)
        self.events = 0
        self._reset_bursts()

    def _reset_bursts(self) -> None:
        self.bursts: dict[int, Burst] = {}  # id(source) -> its burst, in first-fetch order
        self.changes: list[tuple[int, object]] = []  # (start, source) where the fetched source changed
        self.last_source = None
        self.seq = 0
        self.copy_spans: list[tuple[int, int]] = []  # (start, ns) of diagnostic copies

    def _clear_bursts(self) -> None:
        """The same as _reset_bursts, in place (once or twice a step: no new objects)."""
        self.bursts.clear()
        self.changes.clear()
        self.last_source = None
        self.seq = 0
        if self.copy_spans:
            self.copy_spans.clear()

    # ------------------------------------------------------------------ fetches

    def timed(self, source, fetch, args: tuple, batch: bool = True):
        """One fetch by the training thread (not nested in another): `fetch(*args)`, timed.

        In the fallback, a fetch of its DataLoader after one that returned a batch begins a step."""
        try:
            if self.mode == "loader" and source is self.fallback and self.fallback_ok:
                self.session.boundary()
            t0 = self.mark()
        except Exception as e:  # noqa: BLE001 (reported; the fetch goes on unmeasured)
            self.session.rt.fail("a step boundary before a fetch", e)
            return fetch(*args)
        self.depth = 1
        self.fetching_since = t0
        item, ok, stop = None, False, False
        try:
            item = fetch(*args)
            ok = True
            return item
        except StopIteration:
            stop = True
            raise
        finally:
            self.depth = 0
            self.fetching_since = None
            try:
                returned = now()
                synced = self.mark() if self.mark is not now else returned
                self.fetched(source, t0, returned, synced, item if ok and batch else None, stop)
            except Exception as e:  # noqa: BLE001 (reported; the batch still goes to the script)
                self.session.rt.fail("measuring a fetch", e)

    def fetched(self, source, t0: int, returned: int, synced: int, item, stop: bool) -> None:
        b = self.bursts.get(id(source))
        if b is None:
            b = self.bursts[id(source)] = Burst(source, t0)
        if source is not self.last_source:
            self.changes.append((t0, source))
            self.last_source = source
        self.seq = b.seq = self.seq + 1
        b.last_end = synced
        b.wait += returned - t0
        b.synced += synced - t0
        if not self.grad_enabled():
            b.no_grad = True
        samples = nbytes = None
        if item is not None:
            b.batches += 1
            samples, nbytes = batch_size_and_bytes(item, self.tensor)
            if samples is not None:
                b.samples += samples
                b.sized += 1
            b.bytes += nbytes
        if source.kind != "loader":
            return
        if stop:
            source.stopped = True
        elif item is not None:
            source.stopped = False
            session = self.session
            if session.counting:  # the loader's own count (other threads': calls.py)
                source.count(samples, nbytes, session.phase == "window")
        if source is self.fallback:
            self.fallback_ok = not stop and item is not None

    def pending_get(self, info, t0: int, returned: int, synced: int) -> None:
        """A get on a queue not (yet) known to carry data: kept, in case a feeder puts into it later
        in this burst (a new epoch's queue, before its first batch)."""
        p = info.pending
        if p is None or p[0] != self.events:
            info.pending = [self.events, t0, returned - t0, synced - t0]
        else:
            p[2] += returned - t0
            p[3] += synced - t0

    def adopt_pending(self, info) -> None:
        """The queue carries data now: its earlier gets of this burst were waits for data."""
        p, info.pending = info.pending, None
        if p is None or p[0] != self.events:
            return
        b = self.bursts.get(id(info))
        if b is None:
            b = self.bursts[id(info)] = Burst(info, p[1])
            self.seq += 1
            b.seq = self.seq
            self.changes.append((p[1], info))
        b.first = min(b.first, p[1])
        b.wait += p[2]
        b.synced += p[3]

    def copied(self, start: int, ns: int) -> None:
        self.copy_spans.append((start, ns))

    # ------------------------------------------------------------------ backward and optimizer steps

    def backward(self) -> None:
        if self.mode == "optimizer" and get_ident() == self.tid:
            if self.session.rt.exit_pending:
                self.session.rt.exit_now()
            self.resolve(now())

    def optimizer_step(self, optimizer) -> None:
        tid = get_ident()
        if self.mode is None:
            self._identify(tid, optimizer)
        if self.mode != "optimizer" or tid != self.tid:
            return
        if self.session.rt.exit_pending:
            self.session.rt.exit_now()
        if id(optimizer) not in self.optimizers:
            self.optimizers[id(optimizer)] = type(optimizer).__module__ + "." + type(optimizer).__qualname__
        if optimizer is self.lead:
            self.session.boundary()
        else:
            self.resolve(now())

    def _identify(self, tid: int, optimizer) -> None:
        self.mode, self.tid, self.lead = "optimizer", tid, optimizer
        self.feeders.pop(tid, None)
        self._reset_bursts()

    def enter_fallback(self, source, tid: int) -> None:
        """No optimizer stepped: time the loop of `source`'s consumer, as protocol 1 did."""
        self.mode, self.tid, self.fallback, self.fallback_ok = "loader", tid, source, True
        self.feeders.pop(tid, None)
        self._reset_bursts()

    # ------------------------------------------------------------------ classification

    def _classify(self, items: list[Burst]) -> None:
        if len(items) == 1:  # the usual step: one source, no other to be validation against
            b = items[0]
            if self.mode == "loader":
                b.why = None if b.source is self.fallback else sources.FALLBACK
            elif b.no_grad:
                b.why = sources.NO_GRAD
            elif b.batches >= 1 and b.source.ended():
                b.why = sources.ONLY  # rules 3 then 5: the only data before the event
            return
        last = max(items, key=lambda b: b.seq)
        for b in items:
            if self.mode == "loader":
                b.why = None if b.source is self.fallback else sources.FALLBACK
            elif b.no_grad:
                b.why = sources.NO_GRAD
            elif b.batches >= 2 and b is not last:
                b.why = sources.SEVERAL
            elif b.batches >= 1 and b.source.ended():
                b.why = sources.ENDED
        if self.mode == "optimizer" and all(b.why for b in items):
            rescued = [b for b in items if b.why != sources.NO_GRAD]
            if rescued:
                max(rescued, key=lambda b: b.seq).why = sources.ONLY

    def _span_end(self, b: Burst, t: int) -> int:
        """A validation burst's span ends where the training thread next fetches another source, or
        at the event that resolves it."""
        for start, source in self.changes:
            if start >= b.last_end and source is not b.source:
                return start
        return t

    def resolve(self, t: int) -> None:
        """A backward or optimizer step at `t`: classify the bursts since the last one, add them and
        the copies to the step in progress."""
        self.events += 1
        bursts = self.bursts
        if not bursts:
            if self.copy_spans:
                self._copies([])
                self.copy_spans.clear()
            return
        if len(bursts) == 1 and self.mode == "optimizer" and not self.copy_spans:
            (b,) = bursts.values()
            if not b.no_grad:  # the usual step: its one source's batches are the training data
                why = sources.ONLY if b.batches and b.source.ended() else sources.TRAINED
                self._train(b, self.step)
                b.source.note(self.session.phase, "training", why, b.batches)
                bursts.clear()
                self.changes.clear()
                self.last_source = None
                self.seq = 0
                return
        step, phase = self.step, self.session.phase
        items = list(self.bursts.values())
        spans = []
        self._classify(items)
        for b in items:
            if b.why is None or b.why is sources.ONLY:
                why = b.why or (sources.TRAINING_FALLBACK if self.mode == "loader" else sources.TRAINED)
                self._train(b, step)
                b.source.note(phase, "training", why, b.batches)
            else:
                spans.append((b.first, self._span_end(b, t)))
                b.source.note(phase, "validation", b.why, b.batches)
        merged = _merge(spans) if spans else spans
        if step is not None and merged:
            step.apart += sum(b - a for a, b in merged)
        if self.copy_spans:
            self._copies(merged)
        self._clear_bursts()

    def _copies(self, merged: list[tuple[int, int]]) -> None:
        """The diagnostic copies since the last event, but those inside a validation span."""
        step = self.step
        if step is None:
            return
        for start, ns in self.copy_spans:
            if not any(a <= start < b for a, b in merged):
                step.transfer += ns
                step.copies += 1

    def _train(self, b: Burst, step: Step | None) -> None:
        if b.source.kind == "queue":
            for loader in b.source.loaders:
                loader.note(self.session.phase, "training", f"fed {b.source.label()}", b.batches)
        if step is None:
            return
        step.wait += b.wait
        step.synced += b.synced
        step.batches += b.batches
        step.samples += b.samples
        step.sized += b.sized
        step.bytes += b.bytes

    def close_step(self, t: int) -> tuple | None:
        """The step in progress ends at `t` (its bursts resolved); the next one starts there."""
        step, self.step = self.step, Step(t)
        return None if step is None else step.row(t, self.session.diagnostic)

    def restart(self, t: int) -> None:
        """The window opens at `t`: the first step of the window starts there."""
        self.step = Step(t)
        self._clear_bursts()
