"""The runtime's side of each patched call: a DataLoader built or iterated, a batch taken, a queue's get
and put, a backward, an optimizer step. Mixed into `runtime.Runtime`.

Whatever fails here is the instrumentation's: it is reported (`fail`: an `error` record, one stderr
line) and the call completes as the script made it; the loader's own exceptions (StopIteration
included) and the queue's (`queue.Empty`) reach the script unchanged.
"""

from __future__ import annotations

import threading
import time
import weakref

from . import overrides, records
from .describe import iterator_facts
from .replay import PENDING, Replay
from .sources import LoaderInfo, QueueInfo
from .training import FALLBACK_AFTER

now = time.perf_counter_ns
get_ident = threading.get_ident


class Calls:
    """What each patched call does once the process is active (`self` is the Runtime)."""

    # ----------------------------------------------------------------- DataLoader.__init__

    def info(self, loader) -> LoaderInfo | None:
        info = self.loaders.get(id(loader))
        return info if info is not None and info.ref() is loader else None

    def construct(self, loader, orig_init, signature, args, kwargs) -> None:
        if not self.usable("DataLoader.__init__"):
            orig_init(loader, *args, **kwargs)
            return
        index = self.constructed
        self.constructed += 1
        target = self.config.overrides_loader in (None, index)
        decisions = []
        call_args, call_kwargs = args, kwargs
        if self.config.overrides and target:
            try:
                call_args, call_kwargs, decisions = overrides.apply(signature, loader, args, kwargs,
                                                                    self.config.overrides)
            except Exception as e:  # noqa: BLE001 (reported; the loader is built as the script asked)
                self.fail(f"DataLoader #{index}: applying the overrides", e)
                orig_init(loader, *args, **kwargs)
                return
        try:
            orig_init(loader, *call_args, **call_kwargs)
        except Exception as e:
            if any(d["status"] in ("applied", "implied") for d in decisions):
                self.write({"type": "error", "where": f"DataLoader #{index}: __init__",
                            "message": records.clip(f"the DataLoader rejected the overrides "
                                                    f"{decisions}: {type(e).__name__}: {e}")})
            raise
        self.loaders[id(loader)] = LoaderInfo(loader, index, decisions)
        try:
            from .describe import loader_record

            self.write(loader_record(loader, index, decisions, target))
        except Exception as e:  # noqa: BLE001
            self.fail(f"DataLoader #{index}: the loader record", e)

    # ----------------------------------------------------------------- DataLoader.__iter__

    def _after_done(self) -> None:
        """`done` is written: the training thread's first fetch ends the process."""
        if self.exit_pending and get_ident() == self.session.tracker.tid:
            self.exit_now()

    def iterate(self, loader, orig_iter):
        if not self.usable("DataLoader.__iter__") or self.over:
            if self.over:
                self._after_done()
            return orig_iter(loader)
        try:
            info = self.info(loader)
            if info is None:  # built before the patch, or while the runtime passed through
                info = LoaderInfo(loader, None, [])
                self.loaders[id(loader)] = info
            if info.iteration is None:
                info.iteration = self.iterated
                self.iterated += 1
            tr = self.session.tracker
            tid = get_ident()
            training = tid == tr.tid and not tr.depth
            if tid != tr.tid:
                tr.feeders[tid] = info
        except Exception as e:  # noqa: BLE001 (reported; the loader is iterated unmeasured)
            self.fail("measuring a DataLoader's iter()", e)
            return orig_iter(loader)
        if training:
            return tr.timed(info, self._iter, (loader, orig_iter, info, "training"), batch=False)
        return self._iter(loader, orig_iter, info, "other" if tid != tr.tid else "training")

    def _iter(self, loader, orig_iter, info: LoaderInfo, thread: str):
        start = now()
        it = orig_iter(loader)
        end = now()
        try:
            info.iter_start, info.iter_ns = start, end - start
            info.epoch += 1
            info.first_pending = True
            info.refresh()
            info.threads.add(thread)
            info.it_ref = weakref.ref(it)
            if "_stallscope_src" not in it.__dict__:
                it._stallscope_src = info
                it._stallscope_epoch = info.epoch
            self.iterators[it] = info
        except Exception as e:  # noqa: BLE001 (reported; the iterator goes to the script as it is)
            self.fail("registering a DataLoader iterator", e)
        return it

    def _adopt(self, it) -> LoaderInfo:
        """An iterator not made through DataLoader.__iter__ (a framework called `_get_iterator()`)."""
        info = LoaderInfo(None, None, [])
        info.epoch, info.it_ref = 0, weakref.ref(it)
        it._stallscope_src = info
        it._stallscope_epoch = 0
        self.orphans.append(info)
        self.iterators[it] = info
        return info

    # ----------------------------------------------------------------- a DataLoader iterator's next()

    def next(self, it, orig):
        if self.over:
            self._after_done()
            return orig(it)
        try:
            info = it.__dict__.get("_stallscope_src") or self._adopt(it)
            tr = self.session.tracker
            tid = get_ident()
            if tid != tr.tid:
                feeders = tr.feeders
                if feeders.get(tid) is not info:
                    feeders[tid] = info
                if tr.mode is None and self._fallback_due(info):
                    tr.enter_fallback(info, tid)
            training = tid == tr.tid and not tr.depth
        except Exception as e:  # noqa: BLE001 (reported; the batch is taken unmeasured)
            self.fail("measuring a DataLoader's next()", e)
            return orig(it)
        if training:  # the tracker counts the batch (it walks it anyway)
            return tr.timed(info, self.deliver, (it, info, orig, False))
        return self.deliver(it, info, orig, True)

    def _fallback_due(self, info: LoaderInfo) -> bool:
        return (info.iteration == self.config.loader
                and info.delivered >= self.config.warmup + FALLBACK_AFTER)

    def deliver(self, it, info: LoaderInfo, orig, count: bool):
        """The batch: replayed, or the loader's own; and the epoch's first-batch record."""
        if info.replay is not None:
            return self._replayed(it, info, orig, count)
        try:
            batch = orig(it)
        except StopIteration:
            if info.first_pending:
                self._epoch_record(it, info, None)
            raise
        try:
            info.delivered += 1
            if info.first_pending:
                self._epoch_record(it, info, now() - info.iter_start)
            if count and self.session.counting and not info.counted_at_get:
                self._count(info, batch)
        except Exception as e:  # noqa: BLE001 (reported; the batch still goes to the script)
            self.fail("recording a batch", e)
        return batch

    def _replayed(self, it, info: LoaderInfo, orig, count: bool):
        s = self.session
        if info.replay is PENDING:
            s.replay.gather(it, info, orig, s.torch.Tensor)
        batch = Replay.take(info)
        info.delivered += 1
        if count and s.counting and not info.counted_at_get:
            self._count(info, batch)
        return batch

    def count(self, info: LoaderInfo, batch) -> None:
        """A batch another thread took (the feeders' fast path): counted for the memory record."""
        try:
            self._count(info, batch)
        except Exception as e:  # noqa: BLE001 (reported; the batch still goes to the script)
            self.fail("recording a batch", e)

    def _count(self, info: LoaderInfo, batch) -> None:
        s = self.session
        info.count(*records.batch_size_and_bytes(batch, s.torch.Tensor), s.phase == "window")

    def _epoch_record(self, it, info: LoaderInfo, first_ns: int | None) -> None:
        info.first_pending = False
        info.refresh()
        tr, s = self.session.tracker, self.session
        try:
            thread = "unknown" if tr.tid is None else "training" if get_ident() == tr.tid else "other"
            s._emit({"type": "cold" if info.epoch == 0 else "epoch", "epoch": info.epoch,
                     "loader": info.index, "iteration_index": info.iteration,
                     "iterator_creation_s": info.iter_ns / 1e9,
                     "time_to_first_batch_s": None if first_ns is None else first_ns / 1e9,
                     "empty": first_ns is None, **iterator_facts(it), "phase": s.phase,
                     "at_step": s.drained_count() if s.phase == "window" else None, "thread": thread})
        except Exception as e:  # noqa: BLE001 (reported; the batch still goes to the script)
            self.fail("the epoch record", e)

    # ----------------------------------------------------------------- queue.Queue

    def _queue(self, q) -> QueueInfo:
        info = q.__dict__.get("_stallscope_q")
        if info is None:
            info = QueueInfo(q, len(self.queues))
            q._stallscope_q = info
            self.queues.append(info)
        return info

    def queue_put(self, q) -> None:
        """A thread that iterates a DataLoader (or takes from a data queue) puts: a data queue."""
        if self.over:
            return
        try:
            feeder = self.session.tracker.feeders.get(get_ident(), self)
            if feeder is not self:
                info = self._queue(q)
                info.data = True
                info.fed_by(feeder)
        except Exception as e:  # noqa: BLE001 (reported; the item is put all the same)
            self.fail("watching a queue's put()", e)

    def queue_get(self, q, orig, block, timeout):
        if self.over:
            self._after_done()
            return orig(q, block, timeout)
        tr = self.session.tracker
        tid = get_ident()
        if tid != tr.tid or tr.depth:
            info = q.__dict__.get("_stallscope_q")
            if tid != tr.tid and info is not None and info.data:  # a thread that passes data on
                tr.feeders[tid] = info.loaders[0] if info.loaders else None
                if info.counts_for is not None:
                    info.uncount()
            return orig(q, block, timeout)
        try:
            info = self._queue(q)
            info.gets += 1
            t0 = tr.mark()
        except Exception as e:  # noqa: BLE001 (reported; the get goes on unmeasured)
            self.fail("measuring a queue's get()", e)
            return orig(q, block, timeout)
        tr.depth = t0
        item, ok = None, False
        try:
            item = orig(q, block, timeout)
            ok = True
            return item
        finally:
            tr.depth = 0
            self._got(tr, info, t0, item if ok else None)

    def _got(self, tr, info: QueueInfo, t0: int, item) -> None:
        try:
            returned = now()
            synced = tr.mark() if tr.mark is not now else returned
            if info.data:
                if info.pending is not None:
                    tr.adopt_pending(info)
                got = records.sizes(item, tr.tensor)
                tr.log.append((t0, returned, synced, info, got, False, not tr.grad_enabled()))
            else:
                tr.pending_get(info, t0, returned, synced)
        except Exception as e:  # noqa: BLE001 (reported; the item still goes to the script)
            self.fail("measuring a queue's get()", e)

    # ----------------------------------------------------------------- backward and optimizer steps

    def backward(self) -> None:
        try:
            self.session.tracker.backward()
        except Exception as e:  # noqa: BLE001 (reported; backward runs all the same)
            self.fail("watching backward()", e)

    def optimizer_step(self, optimizer) -> None:
        try:
            self.session.tracker.optimizer_step(optimizer)
        except Exception as e:  # noqa: BLE001 (reported; the step is done all the same)
            self.fail("watching an optimizer step", e)

    def step_ends(self) -> None:
        """The lead optimizer's step in the training thread (the fast path of optimizer_step)."""
        try:
            self.session.boundary()
        except Exception as e:  # noqa: BLE001 (reported; the step is done all the same)
            self.fail("ending a training step", e)
