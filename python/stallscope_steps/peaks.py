"""Peak memory over one measured window (or epoch): one meaning for every Python loop of stallscope.

The peak is the highest resident set size (RSS) a process reached **within the window**: Linux
keeps it as `VmHWM` in /proc/PID/status, and writing "5" to /proc/PID/clear_refs resets it to the
current RSS. So a window resets it when it opens, for this process and for each worker alive then,
and reads it when it closes; a worker started inside the window has a peak of its own life, which
lies inside the window; a worker that ends inside it is read just before it ends (`Window.ending`),
since its VmHWM goes with it. Never `ru_maxrss` (never reset) and never a worker's last RSS.

A process may refuse the reset: /proc/PID/clear_refs is writable by the owner of a dumpable
process only (another user's, or a non-dumpable one: EACCES), and a kernel without it gives
ENOENT. Its peak is then the peak since the process started, and `peak_since` says so with the
error: the figure is still a peak, of a longer span.

Workers stallscope cannot watch end (other loaders' processes, which start and stop inside an
epoch) are sampled by a `Sampler` thread every 0.1 s while the window is open: one that ends
between two samples keeps its last, a lower bound of its peak, and `peak_since` says so.

Beside the peak, at the window's end, each process's RSS, PSS (proportional: shared pages split
among their users, so the workers' PSS add up) and USS (private pages) from
/proc/PID/smaps_rollup, where the kernel gives it (Linux 4.14+).
"""

from __future__ import annotations

import os

_KB = 1024
WINDOW = "window"
STARTED_INSIDE = "process start (inside the window)"
SAMPLED = "; ended inside the window: its highest sampled peak, read every 0.1 s"
UNSEEN = "; ended inside the window before its peak could be read"


def _fields(path: str) -> dict[str, int]:
    out = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0]) * _KB
    return out


def _proc(pid: int | None) -> str:
    return "/proc/self" if pid is None else f"/proc/{pid}"


def peak(pid: int | None = None) -> int | None:
    """VmHWM in bytes (this process when `pid` is None), or None once the process is gone."""
    try:
        return _fields(f"{_proc(pid)}/status").get("VmHWM")
    except OSError:
        return None


def reset(pid: int | None = None) -> str | None:
    """Reset VmHWM to the current RSS; None when done, else why not (the error, in words)."""
    path = f"{_proc(pid)}/clear_refs"
    try:
        with open(path, "w") as f:
            f.write("5")
    except OSError as e:
        return f"{path}: {type(e).__name__}: {e.strerror or e}"
    return None


def rollup(pid: int | None = None) -> dict:
    """RSS, PSS, USS (Private_Clean + Private_Dirty), shared and swap bytes of one process."""
    where = _proc(pid)
    try:
        f = _fields(f"{where}/smaps_rollup")
        return {"rss_bytes": f["Rss"], "pss_bytes": f["Pss"],
                "uss_bytes": f["Private_Clean"] + f["Private_Dirty"],
                "shared_bytes": f["Shared_Clean"] + f["Shared_Dirty"], "swap_bytes": f.get("Swap"),
                "source": "smaps_rollup", "why": None}
    except (OSError, KeyError) as e:
        rollup_error = f"{type(e).__name__}: {e}"
    try:
        f = _fields(f"{where}/status")
        return {"rss_bytes": f["VmRSS"], "pss_bytes": None, "uss_bytes": None,
                "shared_bytes": f.get("RssFile", 0) + f.get("RssShmem", 0) if "RssFile" in f else None,
                "swap_bytes": f.get("VmSwap"), "source": "status",
                "why": f"{where}/smaps_rollup unreadable ({rollup_error}): PSS and USS unknown"}
    except (OSError, KeyError) as e:
        return {"rss_bytes": None, "pss_bytes": None, "uss_bytes": None, "shared_bytes": None,
                "swap_bytes": None, "source": None,
                "why": f"{where}: {type(e).__name__}: {e} (the process has probably ended)"}


def uss(pid: int) -> int | None:
    """A process's USS (private bytes), or None where smaps_rollup is unreadable."""
    return rollup(pid)["uss_bytes"]


class Window:
    """The peaks of one window: this process (`main`) and worker processes, keyed by pid.

    A worker's `meta` is what the caller knows of it (`loader`, `worker_id`, and `group`: the
    workers started together, one DataLoader iterator's; the workers' peak sums one group's peaks,
    the largest group per loader, summed over loaders)."""

    def __init__(self) -> None:
        self.main_since = None
        self.workers: dict[int, dict] = {}  # pid -> entry
        self.refused: dict[int, str] = {}  # pid -> why its reset was refused
        self.is_open = False
        self.uss_open = None

    def open(self, workers: dict[int, dict], uss_open: dict[int, int | None] | None = None) -> None:
        """Reset the peaks of this process and of `workers` (pid -> meta). `uss_open`, when given,
        is each worker's USS read as the window opened (or just before): kept beside its entry."""
        self.is_open = True
        self.uss_open = uss_open
        why = reset()
        self.main_since = WINDOW if why is None else f"process start ({why})"
        self.workers, self.refused = {}, {}
        for pid, meta in workers.items():
            why = reset(pid)
            if why is not None:
                self.refused[pid] = why
            entry = {"pid": pid, **meta, "at_open": True, "ended": False,
                     "peak_since": WINDOW if why is None else f"process start ({why})"}
            if uss_open is not None:
                entry["uss_open_bytes"] = uss_open.get(pid)
            self.workers[pid] = entry

    def _entry(self, pid: int, meta: dict) -> dict:
        entry = self.workers.get(pid)
        if entry is None:
            entry = {"pid": pid, **meta, "at_open": False, "ended": False, "peak_since": STARTED_INSIDE}
            if self.uss_open is not None:
                entry["uss_open_bytes"] = None
            self.workers[pid] = entry
        return entry

    def ending(self, pid: int, meta: dict) -> None:
        """A worker is about to end inside the window: read its peak while it still has one."""
        if not self.is_open:
            return
        entry = self._entry(pid, meta)
        if not entry["ended"]:
            entry["peak_rss_bytes"] = peak(pid)
            entry["ended"] = True

    def sample(self, found: dict[int, dict]) -> None:
        """Read the peaks of processes stallscope cannot watch end (a sampler's tick): each keeps the
        highest read; one that ends between two ticks keeps its last (a lower bound of its peak)."""
        if not self.is_open:
            return
        for pid, meta in found.items():
            entry = self._entry(pid, meta)
            if entry["ended"]:
                continue
            now = peak(pid)
            if now is not None:
                entry["peak_rss_bytes"] = max(now, entry.get("peak_rss_bytes") or 0)
                entry["sampled"] = True

    def close(self, alive: dict[int, dict], detail: bool = True) -> dict:
        """The window's peaks: `main` and every worker seen (alive now, or ended inside it). Each
        process's RSS is read before its peak, so the peak (the high-water mark at its read) bounds it."""
        self.is_open = False
        main = {"pid": os.getpid()}
        if detail:
            main.update(rollup())
        main.update(peak_rss_bytes=_bound(peak(), main.get("rss_bytes")), peak_since=self.main_since)
        for pid, meta in alive.items():
            entry = self._entry(pid, meta)
            if detail:
                entry.update(rollup(pid))
            entry["peak_rss_bytes"] = _bound(peak(pid), entry.get("rss_bytes"))
        for entry in self.workers.values():
            sampled = entry.pop("sampled", False)
            if entry["pid"] in alive or entry["ended"]:
                continue
            entry["ended"] = True  # gone before the close, its end not watched
            if sampled:
                entry["peak_since"] += SAMPLED
            else:
                entry["peak_rss_bytes"] = None
                entry["peak_since"] += UNSEEN
        workers = sorted(self.workers.values(), key=lambda e: (not e["ended"], e["pid"]))
        return {"main": main, "workers": workers, "workers_peak_rss_bytes": workers_peak(workers)}


def _bound(peak_bytes: int | None, rss_bytes: int | None) -> int | None:
    """A peak no lower than the RSS read with it: VmHWM (status) and smaps_rollup's Rss count pages
    a little differently, and the second may pass the first by a few KiB."""
    if peak_bytes is None or rss_bytes is None:
        return peak_bytes
    return max(peak_bytes, rss_bytes)


class Sampler:
    """While a window is open, every `interval_s` the peaks of the processes `find()` returns: for
    worker processes that may end inside the window unseen (SPDL's, DALI's, torchdata.nodes' start
    and stop with an epoch). A daemon thread; each tick reads one /proc/PID/status per process."""

    def __init__(self, window: Window, find, interval_s: float = 0.1) -> None:
        import threading

        self.window, self.find, self.interval_s = window, find, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stallscope-peaks", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.window.sample(self.find())

    def __enter__(self) -> "Sampler":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.window.sample(self.find())  # a last tick: what is alive at the end


def workers_peak(workers: list[dict]) -> int | None:
    """The workers' peak: per loader, the largest sum of one group's peaks (one set of workers
    started together); summed over loaders. None with no worker or no peak read."""
    groups: dict[tuple, int] = {}
    for w in workers:
        if w.get("peak_rss_bytes") is None:
            continue
        key = (w.get("loader"), w.get("group"))
        groups[key] = groups.get(key, 0) + w["peak_rss_bytes"]
    if not groups:
        return None
    best: dict = {}
    for (loader, _), total in groups.items():
        best[loader] = max(best.get(loader, 0), total)
    return sum(best.values())


# --------------------------------------------------------------------------- the processes to read


def command(pid: int) -> str | None:
    """The start of a process's command line (what a child is: a forkserver, a resource tracker...)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(300).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def _children_files(pid: int) -> list[int] | None:
    """Children of `pid` from /proc/PID/task/TID/children (every thread's), or None where the kernel
    has no such file (CONFIG_PROC_CHILDREN) or the process is gone."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    out = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(c) for c in f.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task"):
                return None  # the process ended
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # that thread ended
            return None  # no children files in this kernel
        except OSError:
            continue
    return out


def tree(pid: int | None = None) -> dict[int, int]:
    """Every descendant of `pid` (this process by default) -> its parent. From the children files
    (a few reads), else from one scan of every process's /proc/N/stat."""
    root = os.getpid() if pid is None else pid
    out: dict[int, int] = {}
    todo = [root]
    while todo:
        p = todo.pop()
        kids = _children_files(p)
        if kids is None:
            if p == root:
                return _tree_by_scan(root)
            continue
        for k in kids:
            if k not in out and k != root:
                out[k] = p
                todo.append(k)
    return out


def _tree_by_scan(root: int) -> dict[int, int]:
    kids: dict[int, list[int]] = {}
    for child, parent in parents().items():
        kids.setdefault(parent, []).append(child)
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out[k] = p
            todo.append(k)
    return out


def parents() -> dict[int, int]:
    """pid -> parent pid of every process readable in /proc (one scan)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # ended between listdir and open
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`."""
    kids = _children_files(pid)
    if kids is None:
        kids = [p for p, parent in parents().items() if parent == pid]
    return sorted(kids)


HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def descendants(pid: int | None = None) -> dict[int, dict]:
    """Every descendant of `pid` (this process by default) that is not one of multiprocessing's
    helpers (its resource tracker, its forkserver): pid -> {"group": "descendants"}. For loaders
    whose worker processes stallscope cannot name (SPDL's, DALI's, torchdata.nodes')."""
    out = {}
    for p in tree(pid):
        cmd = command(p) or ""
        if not any(h in cmd for h in HELPERS):
            out[p] = {"group": "descendants"}
    return out


def dataloader_workers(it) -> dict[int, dict]:
    """The live worker processes of one DataLoader iterator: pid -> {"worker_id", "group"} (the
    group is the iterator: the workers it started together)."""
    if getattr(it, "_shutdown", False):
        return {}
    out = {}
    for worker_id, w in enumerate(getattr(it, "_workers", None) or []):
        if w.pid is not None:
            out[w.pid] = {"worker_id": worker_id, "group": id(it)}
    return out


def watch_shutdowns(on_shutdown):
    """Call `on_shutdown(iterator)` before any DataLoader iterator stops its worker processes (the
    end of a non-persistent epoch, the iterator's deletion), while their peaks can still be read.
    Returns the function that undoes the patch."""
    from torch.utils.data import dataloader

    cls = dataloader._MultiProcessingDataLoaderIter
    original = cls._shutdown_workers

    def _shutdown_workers(self):
        if not getattr(self, "_shutdown", True):
            on_shutdown(self)
        return original(self)

    _shutdown_workers.__wrapped__ = original
    cls._shutdown_workers = _shutdown_workers

    def undo() -> None:
        cls._shutdown_workers = original

    return undo
