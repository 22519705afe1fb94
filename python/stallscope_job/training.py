"""The training thread's steps: which thread trains, where its steps end, and how long it waits for data.

docs/job-protocol.md ("The step") is the contract; in short:

- the **training thread** is the thread that runs the optimizer step (torch.optim's global
  step post-hook); the **lead optimizer** is the first one it steps, and each of its steps ends a
  training step (other optimizers' steps do not: a GAN's two optimizers make one step);
- the step's **wait** is the time that thread is blocked getting batches: its own calls into any
  DataLoader iterator (`next()`, and `iter()`, which restarts non-persistent workers), however deep
  in generators and wrappers of its own, and its `get` on a **data queue** (a `queue.Queue` that a
  thread iterating a DataLoader put into). Calls nested inside one of these count once;
- fetches are classified in **bursts** (a source's fetches between two events: a backward or an
  optimizer step), as training data or a validation pass, whose span (`apart_ns`) is taken out of
  the step (sources.py names the rules);
- with no optimizer stepping, the **fallback** times the loop that consumes DataLoader
  `config.loader` (iteration index), as protocol 1 did.

The hooks on the training path only append to `log` (a fetch: `(t0, returned, synced, source,
(samples, bytes) of its batch or None, stopped, gradients off)`, the batch's size read as it
arrives, the batch never kept; an event: `(t,)`); the lead optimizer's step resolves the log in one
pass. Inside the window, the usual step (one fetch with gradients on, then maybe a backward) takes
the **quick end** instead: one tuple of what the resolution needs, resolved with the rest by
`drain` at the window's next flush (every half second, FLUSH_NS) or at its close. The figures are
the same; the step's own cost is what the instrumentation must not change, and a resolution run
cold at every step cost more than a warm one per flush (docs/benchmarks.md, job-overhead).
Everything here runs in the script's threads; `Session` (window.py) owns the window around it.
"""

from __future__ import annotations

import threading
import time

from . import sources
from .records import sizes

now = time.perf_counter_ns
get_ident = threading.get_ident
# With no optimizer step by then, the fallback takes over after this many batches past the warm-up
# of DataLoader `config.loader` (room for gradient accumulation of up to this many micro-batches).
FALLBACK_AFTER = 64


class Burst:
    """One source's fetches by the training thread between two events."""

    __slots__ = ("source", "first", "last_end", "seq", "wait", "synced", "batches", "samples",
                 "sized", "bytes", "no_grad", "stopped", "why")

    def __init__(self, source, first: int) -> None:
        self.source, self.first = source, first
        self.last_end = self.seq = self.wait = self.synced = 0
        self.batches = self.samples = self.sized = self.bytes = 0
        self.no_grad = self.stopped = False
        self.why = None

    def ended(self) -> bool:
        """Its source ended before the event: its last fetch raised StopIteration (and no batch came
        after it), or its iterator (a data queue) is gone."""
        return self.stopped or self.source.ended()


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
        self.depth = 0  # while the training thread is inside a fetch: when it began (else 0)
        self.mark = now  # the stage clock's mark once the window is open (diagnostic: it syncs)
        self.step = None  # the step in progress (None before the first boundary)
        self.events = 0  # events so far (a pending queue get belongs to the burst of its event)
        self.log: list[tuple] = []  # fetches and events since the last resolution
        self.copy_spans: list[tuple[int, int]] = []  # (start, ns) of diagnostic copies
        self.quick = 0  # window steps that may still take the quick end (0: each resolves at once)
        self.flush_at = 0  # the quick end stops here: the window's next flush is due
        self.ended_quick: list[tuple] = []  # quick ends not drained yet, in order (see drain)

    @property
    def fetching_since(self) -> int | None:
        return self.depth or None

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
        self.depth = t0
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
            try:
                returned = now()
                synced = self.mark() if self.mark is not now else returned
                got = sizes(item, self.tensor) if ok and batch else None
                self.log.append((t0, returned, synced, source, got, stop, not self.grad_enabled()))
                if source is self.fallback:
                    self.fallback_ok = not stop and got is not None
            except Exception as e:  # noqa: BLE001 (reported; the batch still goes to the script)
                self.session.rt.fail("measuring a fetch", e)

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
        if p is not None and p[0] == self.events:
            self.log.append((p[1], p[1] + p[2], p[1] + p[3], info, None, False, not self.grad_enabled()))

    def copied(self, start: int, ns: int) -> None:
        self.copy_spans.append((start, ns))

    # ------------------------------------------------------------------ backward and optimizer steps

    def event(self) -> None:
        """A backward (or another optimizer's step) in the training thread: bursts end here."""
        self.events += 1
        self.log.append((now(),))

    def backward(self) -> None:
        if self.mode == "optimizer" and get_ident() == self.tid:
            if self.session.rt.exit_pending:
                self.session.rt.exit_now()
            self.event()

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
            self.event()

    def _identify(self, tid: int, optimizer) -> None:
        self.mode, self.tid, self.lead = "optimizer", tid, optimizer
        self.feeders.pop(tid, None)
        self.log.clear()
        self.session.rt.fast_tid = tid

    def enter_fallback(self, source, tid: int) -> None:
        """No optimizer stepped: time the loop of `source`'s consumer, as protocol 1 did."""
        self.mode, self.tid, self.fallback, self.fallback_ok = "loader", tid, source, True
        self.feeders.pop(tid, None)
        self.log.clear()

    # ------------------------------------------------------------------ resolution

    def resolve(self, t: int) -> None:
        """The lead optimizer's step (or the fallback's boundary) at `t`: the log's fetches, burst by
        burst between its events, classified and added to the step in progress, with the copies."""
        self.events += 1
        log, step = self.log, self.step
        if step is not None and not self.copy_spans and self._usual(log, step):
            log.clear()
            return
        spans: list[tuple[int, int]] = []
        start = 0
        for i, entry in enumerate(log):
            if len(entry) == 1:
                if i > start:
                    self._segment(log, start, i, entry[0], step, spans)
                start = i + 1
        if start < len(log):
            self._segment(log, start, len(log), t, step, spans)
        log.clear()
        merged = _merge(spans) if spans else spans
        if step is not None:
            step.apart += sum(b - a for a, b in merged)
            for begin, ns in self.copy_spans:
                if not any(a <= begin < b for a, b in merged):
                    step.transfer += ns
                    step.copies += 1
        self.copy_spans.clear()

    @staticmethod
    def _usual_fetch(log: list) -> tuple | None:
        """The fetch of the usual step's log (one fetch of a batch with gradients on, then maybe a
        backward), or None: not the usual step."""
        n = len(log)
        if not (n == 1 or (n == 2 and len(log[1]) == 1)):
            return None
        entry = log[0]
        return None if len(entry) == 1 or entry[6] or entry[4] is None else entry

    def _usual(self, log: list, step: Step) -> bool:
        """The usual step's log added straight to the step (what `_segment` would do, in fewer
        operations). False: not it."""
        entry = self._usual_fetch(log) if self.mode == "optimizer" else None
        if entry is None:
            return False
        t0, returned, synced, source, (samples, nbytes), _, _ = entry
        session = self.session
        self._credit(step, returned - t0, synced - t0, samples, nbytes, source, source.ended(),
                     session.phase, session.counting)
        return True

    @staticmethod
    def _credit(step: Step, wait: int, synced: int, samples: int | None, nbytes: int, source,
                ended: bool, phase: str, counting: bool) -> None:
        """One usual step's fetch: added to the step, counted by its source, classified."""
        step.wait += wait
        step.synced += synced
        step.batches += 1
        step.bytes += nbytes
        if samples is not None:
            step.samples += samples
            step.sized += 1
        if source.kind == "loader":
            if counting:
                source.count(samples, nbytes, phase == "window")
        else:
            for loader in source.loaders:
                loader.note(phase, "training", source.fed_note, 1)
            if counting and source.counts_for is not None:  # its feeder leaves the count to us
                source.counts_for.count(samples, nbytes, phase == "window")
        source.note(phase, "training", sources.ONLY if ended else sources.TRAINED, 1)

    # ------------------------------------------------------------------ the quick end

    def quick_end(self) -> bool:
        """The lead optimizer's step ends the usual step inside the window (while `quick` lasts),
        with no copy to place and the flush not due: `ended_quick` gets `(end, wait, synced wait,
        (samples, bytes), source, source ended)`, the log is cleared, `quick` counts down, and
        `drain` makes the rows later. False: the step resolves the usual way (`resolve`)."""
        try:
            log = self.log
            # `_usual_fetch` and `Source.ended`, inline: each call the hook makes runs cold (about
            # 1.5 us on the 2.5 ms CPU step of `cargo xtask bench job-overhead`).
            n = len(log)
            if n != 1 and (n != 2 or len(log[1]) != 1) or self.copy_spans:
                return False
            entry = log[0]
            if len(entry) == 1 or entry[6] or entry[4] is None:
                return False
            t = self.mark()
            if t >= self.flush_at:
                return False
            t0, source, ref = entry[0], entry[3], entry[3].it_ref
            self.ended_quick.append((t, entry[1] - t0, entry[2] - t0, entry[4], source,
                                     ref is not None and ref() is None))
            log.clear()
            self.events += 1
            self.quick -= 1
            return True
        except Exception as e:  # noqa: BLE001 (reported; the step resolves the usual way)
            self.quick = 0
            self.session.rt.fail("a quick step end", e)
            return False

    def drain(self, rows: list) -> None:
        """The quick ends so far, in order, made into the window's rows (what `resolve` and
        `close_step` made of each at its end). The first ends the step in progress; each after it
        is a step of one fetch, whose row is made here directly and whose counts and notes are
        added per source at once (a flush drains about a hundred; docs/benchmarks.md)."""
        quick = self.ended_quick
        if not quick:
            return
        s = self.session
        counting = s.counting
        t, wait, synced, (samples, nbytes), source, ended = quick[0]
        step = self.step
        self._credit(step, wait, synced, samples, nbytes, source, ended, "window", counting)
        rows.append(step.row(t, s.diagnostic))
        start = t
        if s.diagnostic:  # (its quick ends read the syncing mark: Python's; ten columns each)
            for t, wait, synced, (samples, nbytes), source, ended in quick[1:]:
                step = Step(start)
                self._credit(step, wait, synced, samples, nbytes, source, ended, "window", counting)
                rows.append(step.row(t, True))
                start = t
            self.step = Step(start)
            quick.clear()
            return
        tally: dict[tuple[int, bool], list] = {}
        for t, wait, _, (samples, nbytes), source, ended in quick[1:]:
            rows.append((t - start, wait, samples, nbytes, 1, 0))
            start = t
            got = tally.get((id(source), ended))
            if got is None:
                tally[(id(source), ended)] = [source, 1, samples or 0, nbytes]
            else:
                got[1] += 1
                got[2] += samples or 0
                got[3] += nbytes
        for (_, ended), (source, n, samples, nbytes) in tally.items():
            self._credit_many(source, ended, n, samples, nbytes, counting)
        self.step = Step(start)
        quick.clear()

    @staticmethod
    def _credit_many(source, ended: bool, n: int, samples: int, nbytes: int, counting: bool) -> None:
        """`_credit`'s counts and notes of `n` one-fetch steps of `source` inside the window."""
        if source.kind == "loader":
            if counting:
                source.count_many(n, samples, nbytes, True)
        else:
            for loader in source.loaders:
                loader.note_many("window", "training", source.fed_note, n, n)
            if counting and source.counts_for is not None:
                source.counts_for.count_many(n, samples, nbytes, True)
        source.note_many("window", "training", sources.ONLY if ended else sources.TRAINED, n, n)

    def _segment(self, log: list, i: int, j: int, t: int, step: Step | None, spans: list) -> None:
        """The fetches log[i:j], all between two events (the second at `t`)."""
        phase = self.session.phase
        first = log[i]
        if j - i == 1 and not first[6] and self.mode == "optimizer":
            b = Burst(first[3], first[0])  # the usual: one fetch, one source, then backward
            self._add(b, first, 1)
            why = sources.ONLY if b.batches and b.ended() else sources.TRAINED
            self._train(b, step, why, phase)
            return
        bursts: dict[int, Burst] = {}
        changes: list[tuple[int, object]] = []
        last = None
        for seq in range(i, j):
            entry = log[seq]
            source = entry[3]
            b = bursts.get(id(source))
            if b is None:
                b = bursts[id(source)] = Burst(source, entry[0])
            if source is not last:
                changes.append((entry[0], source))
                last = source
            self._add(b, entry, seq)
        items = list(bursts.values())
        self._classify(items)
        for b in items:
            if b.why is None or b.why is sources.ONLY:
                why = b.why or (sources.TRAINING_FALLBACK if self.mode == "loader" else sources.TRAINED)
                self._train(b, step, why, phase)
            else:
                spans.append((b.first, self._span_end(b, changes, t)))
                b.source.note(phase, "validation", b.why, b.batches)

    def _add(self, b: Burst, entry: tuple, seq: int) -> None:
        t0, returned, synced, _, got, stopped, no_grad = entry
        b.seq, b.last_end = seq, synced
        b.wait += returned - t0
        b.synced += synced - t0
        b.no_grad = b.no_grad or no_grad
        if stopped:
            b.stopped = True
        elif got is not None:
            b.stopped = False
            b.batches += 1
            samples, nbytes = got
            if samples is not None:
                b.samples += samples
                b.sized += 1
            b.bytes += nbytes
            source = b.source
            if self.session.counting:  # the loader's own count, or its queue's for it
                counted = source if source.kind == "loader" else source.counts_for
                if counted is not None:
                    counted.count(samples, nbytes, self.session.phase == "window")

    def _classify(self, items: list[Burst]) -> None:
        last = max(items, key=lambda b: b.seq)
        for b in items:
            if self.mode == "loader":
                b.why = None if b.source is self.fallback else sources.FALLBACK
            elif b.no_grad:
                b.why = sources.NO_GRAD
            elif b.batches >= 2 and b is not last:
                b.why = sources.SEVERAL
            elif b.batches >= 1 and b.ended():
                b.why = sources.ENDED
        if self.mode == "optimizer" and all(b.why for b in items):
            rescued = [b for b in items if b.why != sources.NO_GRAD]
            if rescued:
                max(rescued, key=lambda b: b.seq).why = sources.ONLY

    @staticmethod
    def _span_end(b: Burst, changes: list, t: int) -> int:
        """A validation burst's span ends where the training thread next fetches another source, or
        at the event that resolves it."""
        for start, source in changes:
            if start >= b.last_end and source is not b.source:
                return start
        return t

    def _train(self, b: Burst, step: Step | None, why: str, phase: str) -> None:
        b.source.note(phase, "training", why, b.batches)
        if b.source.kind == "queue":
            for loader in b.source.loaders:
                loader.note(phase, "training", b.source.fed_note, b.batches)
        if step is None:
            return
        step.wait += b.wait
        step.synced += b.synced
        step.batches += b.batches
        step.samples += b.samples
        step.sized += b.sized
        step.bytes += b.bytes

    def close_step(self, t: int) -> tuple | None:
        """The step in progress ends at `t` (its log resolved); the next one starts there."""
        step, self.step = self.step, Step(t)
        return None if step is None else step.row(t, self.session.diagnostic)

    def restart(self, t: int) -> None:
        """The window opens at `t`: the first step of the window starts there."""
        self.step = Step(t)
        self.log.clear()
        self.copy_spans.clear()
