"""Every method stallscope replaces in the script's process, each forwarding to the runtime, all undoable.

- at `torch.utils.data.dataloader`'s import: `DataLoader.__init__` (overrides, the `loader` record)
  and `DataLoader.__iter__` (epochs, the iterator's source);
- when the process activates (its first DataLoader): every DataLoader iterator's `__next__`
  (`_BaseDataLoaderIter`, so single- and multi-process iterators, whoever created them),
  `queue.Queue.get` and `.put` (data queues), `torch.autograd.backward`, torch.optim's global step
  post-hook, and the worker shutdown of `_MultiProcessingDataLoaderIter` (peaks of workers that end).

Each patched method checks `rt.live` first and calls the original at once when the runtime is off
(a DataLoader worker, a process that has written `done`, an instrumentation failure). `Patches.undo`
puts everything back (in-process tests and the overhead micro-benchmark use it).

The training thread's own `next()` on a DataLoader with nothing special pending (no first batch
to record, no replay), its `get` on a data queue and its `backward` take a **fast path**
(`rt.fast_tid`, set once the training thread is known): a tuple appended to the tracker's log (a
fetch's carries its batch's size, read as it arrives), nothing else. The lead optimizer's step
resolves the log, or, for the usual step inside the window, takes the quick end
(`Tracker.quick_end`). A known feeder thread's `next()` only counts its batch. It is the same
measurement as the general path, in fewer operations: a step's own cost is what the
instrumentation must not change, and each call the step passes runs with cold caches.
"""

from __future__ import annotations

import functools
import threading
import time

from . import native
from .records import UNSIZED
from .records import batch_size_and_bytes as size

get_ident = threading.get_ident
now = time.perf_counter_ns
NEXT, BACKWARD, HOOK, GET, PUT = 0, 1, 2, 3, 4  # the kinds of fastpath.c's make()


class Patches:
    """The replaced attributes, in order, with what to restore."""

    def __init__(self) -> None:
        self._undo: list = []

    def replace(self, owner, name: str, value) -> None:
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        setattr(owner, name, value)
        self._undo.append(lambda: setattr(owner, name, original))

    def add(self, undo) -> None:
        self._undo.append(undo)

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


def dataloader(rt, module, patches: Patches) -> None:
    """DataLoader.__init__ and __iter__ on the base class (subclasses and frameworks' loaders too)."""
    import inspect

    cls = module.DataLoader
    orig_init, orig_iter = cls.__init__, cls.__iter__
    signature = inspect.signature(orig_init)

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        rt.construct(self, orig_init, signature, args, kwargs)

    @functools.wraps(orig_iter)
    def __iter__(self):
        return rt.iterate(self, orig_iter)

    patches.replace(cls, "__init__", __init__)
    patches.replace(cls, "__iter__", __iter__)


def hot(rt, patches: Patches) -> None:
    """The patches on the training path, installed when the process activates; with the compiled
    fast paths (native.py) in front of the iterators', backward's and the optimizer hook's."""
    import torch

    fast = native.load()
    _iterators(rt, patches, torch.is_grad_enabled, torch.Tensor, fast)
    _queues(rt, patches, torch.is_grad_enabled, torch.Tensor, fast)
    _training(rt, patches, fast)


def _compiled(fast, kind: int, rt, orig, slow):
    """The compiled fast path of `kind` in front of `slow` (its Python wrapper), or `slow` alone."""
    import torch

    if fast is None:
        return slow
    return fast.make(kind, rt, orig, slow, torch.Tensor, torch.is_grad_enabled, now)


def _sized(rt, tensor):
    """The compiled paths' size of an item that is not a tuple or list of tensors (an error
    reported, as the Python paths do)."""

    def sized(item):
        try:
            return size(item, tensor)
        except Exception as e:  # noqa: BLE001 (reported; the batch goes to the script)
            rt.fail("reading a batch's size", e)
            return UNSIZED

    return sized


def _iterators(rt, patches: Patches, grad_enabled, tensor, fast) -> None:
    """Every DataLoader iterator's __next__: the training thread's fast path, a known feeder's, and
    the general one (runtime.Runtime.next)."""
    from torch.utils.data import dataloader as dl

    base = dl._BaseDataLoaderIter
    orig_next = base.__next__

    @functools.wraps(orig_next)
    def __next__(self):
        tid = get_ident()
        fast = rt.fast_tid
        if fast is not None and fast != tid:  # a feeder thread, already known as one
            info = self.__dict__.get("_stallscope_src")
            if info is not None and info.plain and rt.tracker.feeders.get(tid) is info:
                batch = orig_next(self)
                info.delivered += 1
                if rt.session.counting and not info.counted_at_get:
                    rt.count(info, batch)
                return batch
        elif fast == tid:
            tr = rt.tracker
            info = self.__dict__.get("_stallscope_src")
            if info is not None and info.plain and not tr.depth:
                mark = tr.mark
                t0 = tr.depth = mark()
                try:
                    batch = orig_next(self)
                except StopIteration:
                    tr.depth = 0
                    end = now()
                    tr.log.append((t0, end, end if mark is now else mark(), info, None, True,
                                   not grad_enabled()))
                    raise
                finally:
                    tr.depth = 0
                end = now()
                synced = end if mark is now else mark()
                try:  # the batch's size: records.batch_size_and_bytes's usual case, inline (the
                    # call ran cold; `cargo xtask bench job-overhead`, docs/benchmarks.md)
                    got = None
                    if type(batch) is tuple or type(batch) is list:
                        first, total = None, 0
                        for t in batch:
                            if type(t) is not tensor:
                                break
                            if first is None:
                                shape = t.shape
                                if shape:
                                    first = shape[0]
                            total += t.nbytes
                        else:
                            got = (first, total)
                    if got is None:
                        got = size(batch, tensor)
                except Exception as e:  # noqa: BLE001 (reported; the batch goes to the script)
                    got = UNSIZED
                    rt.fail("reading a batch's size", e)
                tr.log.append((t0, end, synced, info, got, False, not grad_enabled()))
                info.delivered += 1
                return batch
        if not rt.live:
            return orig_next(self)
        return rt.next(self, orig_next)

    __next__.sized = _sized(rt, tensor)
    __next__.failed = rt.fail  # (where, error): the compiled path's bookkeeping failed
    patches.replace(base, "__next__", _compiled(fast, NEXT, rt, orig_next, __next__))


def _queues(rt, patches: Patches, grad_enabled, tensor, fast) -> None:
    """queue.Queue.get (the training thread's fast path on a data queue, else the general one) and
    .put (a feeder's put marks a data queue; a put already seen costs a lookup)."""
    import queue

    orig_get, orig_put = queue.Queue.get, queue.Queue.put

    @functools.wraps(orig_get)
    def get(self, block=True, timeout=None):
        if rt.fast_tid == get_ident():
            tr = rt.tracker
            info = self.__dict__.get("_stallscope_q")
            if info is not None and info.data and info.pending is None and not tr.depth:
                mark = tr.mark
                t0 = tr.depth = mark()
                item = None
                try:
                    item = orig_get(self, block, timeout)
                    return item
                finally:
                    tr.depth = 0
                    end = now()
                    synced = end if mark is now else mark()
                    try:
                        got = None if item is None else size(item, tensor)  # records.sizes
                    except Exception as e:  # noqa: BLE001 (reported; the item goes to the script)
                        got = UNSIZED
                        rt.fail("reading a batch's size", e)
                    tr.log.append((t0, end, synced, info, got, False, not grad_enabled()))
                    info.gets += 1
        if not rt.live:
            return orig_get(self, block, timeout)
        return rt.queue_get(self, orig_get, block, timeout)

    @functools.wraps(orig_put)
    def put(self, item, block=True, timeout=None):
        if rt.live:
            info = self.__dict__.get("_stallscope_q")
            if info is None or info.last_feeder is not rt.tracker.feeders.get(get_ident(), info):
                rt.queue_put(self)
        return orig_put(self, item, block, timeout)

    get.sized = _sized(rt, tensor)
    get.failed = rt.fail
    patches.replace(queue.Queue, "get", _compiled(fast, GET, rt, orig_get, get))
    patches.replace(queue.Queue, "put", _compiled(fast, PUT, rt, orig_put, put))


def _training(rt, patches: Patches, fast) -> None:
    """torch.autograd.backward (an event; the training thread's fast path), the optimizer step
    post-hook (the lead's step ends a training step), the worker shutdown (their peaks)."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from stallscope_steps import peaks

    orig_backward = torch.autograd.backward

    @functools.wraps(orig_backward)
    def backward(*args, **kwargs):
        if rt.fast_tid == get_ident():
            tr = rt.tracker
            tr.events += 1
            tr.log.append((now(),))
        elif rt.live:
            rt.backward()
        return orig_backward(*args, **kwargs)

    patches.replace(torch.autograd, "backward", _compiled(fast, BACKWARD, rt, orig_backward, backward))

    def optimizer_post_hook(optimizer, _args, _kwargs):
        if rt.fast_tid != get_ident() or optimizer is not (tr := rt.tracker).lead:
            if rt.live:
                rt.optimizer_step(optimizer)
            return
        if tr.quick and tr.quick_end():  # the usual step, kept for Tracker.drain
            return
        rt.step_ends()

    hook = _compiled(fast, HOOK, rt, None, optimizer_post_hook)
    patches.add(register_optimizer_step_post_hook(hook).remove)
    patches.add(peaks.watch_shutdowns(rt.workers_ending))
