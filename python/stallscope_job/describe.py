"""What a DataLoader and its iterator actually use, read back after construction (the `loader` record and epoch facts)."""

from __future__ import annotations

import multiprocessing
import sys

from .records import qualname

ITERABLE_NOTE = ("an IterableDataset: with num_workers > 1 every worker runs the whole iterator, so the data "
                 "is duplicated unless the dataset shards with torch.utils.data.get_worker_info()")


def start_method(context) -> tuple[str, str]:
    """(the start method workers of this loader would use now, where it comes from)."""
    if context is not None:
        return context.get_start_method(), "multiprocessing_context"
    chosen = multiprocessing.get_start_method(allow_none=True)
    if chosen is not None:
        return chosen, "set_start_method"
    return multiprocessing.get_all_start_methods()[0], "default"


def _length(obj) -> tuple[int | None, str | None]:
    try:
        return len(obj), None
    except Exception as e:  # noqa: BLE001 (recorded as the reason the length is null)
        return None, f"{type(e).__name__}: {e}"


def _actual(loader, key: str):
    if key == "multiprocessing_context":
        context = loader.multiprocessing_context
        return None if context is None else context.get_start_method()
    return getattr(loader, key, None)


def _accelerator_available() -> bool:
    """What PyTorch's DataLoader iterator asks before it pins (torch.accelerator, else CUDA)."""
    torch = sys.modules["torch"]
    acc = getattr(torch, "accelerator", None)
    if acc is not None and hasattr(acc, "is_available"):
        return bool(acc.is_available())
    return bool(torch.cuda.is_available())


def in_effect(loader) -> tuple[dict, list[dict]]:
    """(the settings PyTorch will run this loader with, the ones PyTorch itself changes and why).

    Read the way PyTorch's iterator reads them: `pin_memory` only with an accelerator available (its
    `_BaseDataLoaderIter` sets `_pin_memory = pin_memory and torch.accelerator.is_available()`, and
    never on MPS), `prefetch_factor` and the start method only with workers. The accelerator is
    asked only when pinning was asked for (then PyTorch asks it at every iter() anyway)."""
    workers = loader.num_workers
    changed = []
    pin = bool(loader.pin_memory)
    if pin and not _accelerator_available():
        pin = False
        changed.append({"key": "pin_memory", "asked": True, "in_effect": False, "by": "pytorch",
                        "why": "no accelerator is available, so PyTorch does not pin"})
    elif pin:
        current = sys.modules["torch"].accelerator.current_accelerator() \
            if hasattr(sys.modules["torch"], "accelerator") else None
        if current is not None and current.type == "mps":
            pin = False
            changed.append({"key": "pin_memory", "asked": True, "in_effect": False, "by": "pytorch",
                            "why": "PyTorch does not pin on MPS"})
    method = start_method(loader.multiprocessing_context)[0] if workers else None
    effect = {"num_workers": workers, "batch_size": loader.batch_size, "pin_memory": pin,
              "prefetch_factor": loader.prefetch_factor if workers else None,
              "persistent_workers": bool(loader.persistent_workers) and workers > 0,
              "start_method": method, "in_order": getattr(loader, "in_order", None),
              "timeout": loader.timeout, "drop_last": loader.drop_last}
    return effect, changed


def adjustments(decisions: list, by_pytorch: list) -> list[dict]:
    """Every change made to what the script asked, by stallscope's overrides or by PyTorch, in one
    list the runner prints: refused and implied overrides, a training-changing batch size, and
    settings PyTorch does not apply."""
    out = []
    for d in decisions:
        if d["status"] == "refused":
            out.append({"key": d["key"], "asked": d["requested"], "in_effect": d.get("actual"),
                        "by": "stallscope", "why": f"override refused: {d['reason']}"})
        elif d["status"] == "implied":
            out.append({"key": d["key"], "asked": d["script"], "in_effect": d.get("actual"),
                        "by": "stallscope", "why": d["reason"]})
        elif d["status"] == "applied" and d.get("changes_training"):
            out.append({"key": d["key"], "asked": d["script"], "in_effect": d.get("actual"),
                        "by": "stallscope", "why": "override applied: it changes the training itself"})
    return out + by_pytorch


def loader_record(loader, index: int, decisions: list, target: bool) -> dict:
    from torch.utils.data import IterableDataset

    dataset = loader.dataset
    iterable = isinstance(dataset, IterableDataset)
    length, length_error = _length(dataset)
    batches, batches_error = (None, "an IterableDataset (len() of its loader is only a hint)") if iterable \
        else _length(loader)
    method, source = start_method(loader.multiprocessing_context)
    for d in decisions:
        d["actual"] = _actual(loader, d["key"])
    notes = []
    if iterable and loader.num_workers > 1:
        notes.append(ITERABLE_NOTE)
    batch_sampler = loader.batch_sampler
    effect, by_pytorch = in_effect(loader)
    return {
        "type": "loader", "index": index, "class": qualname(type(loader)),
        "num_workers": loader.num_workers, "batch_size": loader.batch_size,
        "pin_memory": loader.pin_memory, "pin_memory_device": getattr(loader, "pin_memory_device", None),
        "prefetch_factor": loader.prefetch_factor, "persistent_workers": loader.persistent_workers,
        "multiprocessing_context": _actual(loader, "multiprocessing_context"),
        "start_method": method, "start_method_source": source,
        "in_order": getattr(loader, "in_order", None), "timeout": loader.timeout,
        "drop_last": loader.drop_last, "sampler": qualname(type(loader.sampler)),
        "batch_sampler": None if batch_sampler is None else qualname(type(batch_sampler)),
        "dataset": qualname(type(dataset)), "dataset_len": length, "dataset_len_error": length_error,
        "iterable_dataset": iterable,
        "batches_per_epoch": batches, "batches_per_epoch_error": batches_error,
        "collate_fn": qualname(loader.collate_fn) if loader.collate_fn is not None else None,
        "worker_init_fn": None if loader.worker_init_fn is None else qualname(loader.worker_init_fn),
        "overrides_target": target, "overrides": decisions, "notes": notes,
        "in_effect": effect, "adjustments": adjustments(decisions, by_pytorch),
    }


def iterator_facts(it) -> dict:
    """What the iterator really runs with: workers started, their pids and start method, pinning."""
    workers = list(getattr(it, "_workers", None) or [])
    method = None
    if workers:  # a context's Process names its method; the default context's is the global one
        method = getattr(workers[0], "_start_method", None) or multiprocessing.get_start_method(allow_none=True)
    return {
        "iterator": qualname(type(it)), "workers": len(workers),
        "worker_pids": [w.pid for w in workers],
        "start_method": method,
        "pin_memory": getattr(it, "_pin_memory", None),
        "prefetch_factor": getattr(it, "_prefetch_factor", None),
        "persistent_workers": getattr(it, "_persistent_workers", None),
        "in_order": getattr(it, "_in_order", None),
    }
