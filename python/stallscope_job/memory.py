"""The `memory` record: each process's peak within the window (stallscope_steps.peaks), its RSS, PSS and
USS at the window's end, the workers' USS when it opened, and what each DataLoader delivered in it
(for the memory forecast: a worker's growth per sample read)."""

from __future__ import annotations

import os

from stallscope_steps import peaks

ENDED = "ended inside the window (its peak was read as its DataLoader stopped it)"
_NO_ROLLUP = {"rss_bytes": None, "pss_bytes": None, "uss_bytes": None, "shared_bytes": None,
              "swap_bytes": None, "source": None}


def _worker(entry: dict) -> dict:
    out = {"pid": entry["pid"], "role": "worker", "loader": entry.get("loader"),
           "worker_id": entry.get("worker_id"), "iterator": entry.get("group"),
           "peak_rss_bytes": entry.get("peak_rss_bytes"), "peak_since": entry["peak_since"],
           "alive_at_open": entry["at_open"], "ended_in_window": entry["ended"],
           "uss_open_bytes": entry.get("uss_open_bytes")}
    if entry["ended"]:
        out.update(_NO_ROLLUP, why=ENDED)
    else:
        out.update({k: entry.get(k) for k in (*_NO_ROLLUP, "why")})
    return out


def _children(known: set[int]) -> list[dict]:
    """Other children of this process: a forkserver, the resource tracker, the script's own."""
    out = []
    for pid in peaks.children_of(os.getpid()):
        if pid not in known:
            out.append({"pid": pid, "role": "child", "loader": None, "worker_id": None,
                        "command": peaks.command(pid), "peak_rss_bytes": peaks.peak(pid),
                        "peak_since": "process start (not reset)", **peaks.rollup(pid)})
    return out


def _loader(info) -> dict:
    batches, samples, nbytes = info.window
    loader = info.ref() if info.ref is not None else None
    workers = getattr(loader, "num_workers", None)
    return {"loader": info.index, "iteration_index": info.iteration, "batches": batches,
            "samples": samples, "bytes": nbytes, "batch_bytes": nbytes // batches if batches else None,
            "batches_since_uss_open": info.since_uss[0], "samples_since_uss_open": info.since_uss[1],
            "num_workers": workers,
            "prefetch_factor": getattr(loader, "prefetch_factor", None) if workers else None}


def record(window: dict, loaders: list) -> dict:
    """The `memory` record from the window's peaks (`peaks.Window.close`)."""
    main = window["main"]
    entries = [{"pid": main["pid"], "role": "main", "loader": None, "worker_id": None,
                **{k: v for k, v in main.items() if k != "pid"}}]
    entries += [_worker(w) for w in window["workers"]]
    entries += _children({e["pid"] for e in entries})
    return {"type": "memory", "processes": entries, "main_peak_rss_bytes": main["peak_rss_bytes"],
            "main_peak_since": main["peak_since"],
            "workers_peak_rss_bytes": window["workers_peak_rss_bytes"],
            "loaders": [_loader(i) for i in loaders if i.delivered or i.window[0]]}
