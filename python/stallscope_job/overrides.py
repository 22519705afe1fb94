"""Apply the config's DataLoader overrides to one constructor call, refusing what DataLoader would reject."""

from __future__ import annotations

import multiprocessing

# Order matters: num_workers first, the others are judged against the resulting worker count.
ORDER = ("num_workers", "prefetch_factor", "persistent_workers", "multiprocessing_context",
         "pin_memory", "in_order", "batch_size")


def _context_name(value):
    """A multiprocessing_context argument as a start-method name (or None)."""
    if value is None or isinstance(value, str):
        return value
    get = getattr(value, "get_start_method", None)
    return get() if get is not None else repr(value)


def _refusal(key: str, want, args: dict, workers: int, signature) -> str | None:
    """Why DataLoader would reject `key=want` in this call, or None."""
    if key == "prefetch_factor" and want is not None and workers == 0:
        return "prefetch_factor needs num_workers > 0 (DataLoader requires None with num_workers=0)"
    if key == "persistent_workers" and want and workers == 0:
        return "persistent_workers needs num_workers > 0"
    if key == "multiprocessing_context" and want is not None:
        if workers == 0:
            return "multiprocessing_context needs num_workers > 0"
        if want not in multiprocessing.get_all_start_methods():
            return f"start method {want!r} is not available here ({', '.join(multiprocessing.get_all_start_methods())})"
    if key == "in_order" and "in_order" not in signature.parameters:
        return "this torch's DataLoader has no in_order parameter (added in torch 2.6)"
    if key == "batch_size":
        if args.get("batch_sampler") is not None:
            return "the script passes a batch_sampler, which is mutually exclusive with batch_size"
        if args.get("batch_size", 1) is None:
            return "the script turned automatic batching off (batch_size=None)"
    return None


def apply(signature, loader, args: tuple, kwargs: dict, requested: dict):
    """Return (args, kwargs, decisions) for the original __init__; decisions say what happened to each key."""
    bound = signature.bind(loader, *args, **kwargs)
    given = bound.arguments

    def value(key):
        if key in given:
            return given[key]
        return signature.parameters[key].default if key in signature.parameters else None

    decisions = []
    workers = value("num_workers")
    for key in ORDER:
        if key not in requested:
            continue
        want, before = requested[key], value(key)
        shown = _context_name(before) if key == "multiprocessing_context" else before
        decision = {"key": key, "requested": want, "script": shown}
        why = _refusal(key, want, given, workers, signature)
        if why is not None:
            decision.update(status="refused", reason=why)
        elif shown == want:
            decision.update(status="unchanged", reason=None)
        else:
            given[key] = want
            decision.update(status="applied", reason=None)
            if key == "num_workers":
                workers = want
        if key == "batch_size" and decision["status"] == "applied":
            decision["changes_training"] = True
        decisions.append(decision)
    decisions.extend(_implied(given, value, workers, requested))
    return bound.args[1:], bound.kwargs, decisions


def _implied(given: dict, value, workers: int, requested: dict) -> list[dict]:
    """With no workers, the script's own multi-process settings must go, or DataLoader would raise."""
    if workers != 0 or "num_workers" not in requested:
        return []
    out = []
    for key, clear in (("prefetch_factor", None), ("persistent_workers", False),
                       ("multiprocessing_context", None)):
        if key in requested:
            continue
        before = value(key)
        if before is not None and before is not False:
            given[key] = clear
            out.append({"key": key, "requested": clear, "script": _context_name(before)
                        if key == "multiprocessing_context" else before, "status": "implied",
                        "reason": f"num_workers is 0 now, so {key} must be {clear!r}"})
    return out
