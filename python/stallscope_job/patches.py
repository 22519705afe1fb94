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
"""

from __future__ import annotations

import functools


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
    """The patches on the training path, installed when the process activates."""
    import queue

    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.data import dataloader as dl

    from stallscope_steps import peaks

    base = dl._BaseDataLoaderIter
    orig_next = base.__next__

    @functools.wraps(orig_next)
    def __next__(self):
        if not rt.live:
            return orig_next(self)
        return rt.next(self, orig_next)

    patches.replace(base, "__next__", __next__)

    orig_get, orig_put = queue.Queue.get, queue.Queue.put

    @functools.wraps(orig_get)
    def get(self, block=True, timeout=None):
        if not rt.live:
            return orig_get(self, block, timeout)
        return rt.queue_get(self, orig_get, block, timeout)

    @functools.wraps(orig_put)
    def put(self, item, block=True, timeout=None):
        if rt.live:
            rt.queue_put(self)
        return orig_put(self, item, block, timeout)

    patches.replace(queue.Queue, "get", get)
    patches.replace(queue.Queue, "put", put)

    orig_backward = torch.autograd.backward

    @functools.wraps(orig_backward)
    def backward(*args, **kwargs):
        if rt.live:
            rt.backward()
        return orig_backward(*args, **kwargs)

    patches.replace(torch.autograd, "backward", backward)

    def optimizer_post_hook(optimizer, _args, _kwargs):
        if rt.live:
            rt.optimizer_step(optimizer)

    patches.add(register_optimizer_step_post_hook(optimizer_post_hook).remove)
    patches.add(peaks.watch_shutdowns(rt.workers_ending))
