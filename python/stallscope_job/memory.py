"""Per-process memory from /proc (RSS, PSS, USS, shared): how copy-on-read growth in forked workers shows."""

from __future__ import annotations

import os
import resource

_KB = 1024


def _fields(path: str) -> dict[str, int]:
    out = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            parts = rest.split()
            if len(parts) == 2 and parts[1] == "kB":
                out[key] = int(parts[0]) * _KB
    return out


def process(pid: int) -> dict:
    """RSS, PSS, USS (Private_Clean + Private_Dirty), shared and swap bytes of one process."""
    try:
        f = _fields(f"/proc/{pid}/smaps_rollup")
        return {"rss_bytes": f["Rss"], "pss_bytes": f["Pss"],
                "uss_bytes": f["Private_Clean"] + f["Private_Dirty"],
                "shared_bytes": f["Shared_Clean"] + f["Shared_Dirty"], "swap_bytes": f.get("Swap"),
                "source": "smaps_rollup", "why": None}
    except (OSError, KeyError) as e:
        rollup_error = f"{type(e).__name__}: {e}"
    try:
        f = _fields(f"/proc/{pid}/status")
        return {"rss_bytes": f["VmRSS"], "pss_bytes": None, "uss_bytes": None,
                "shared_bytes": f.get("RssFile", 0) + f.get("RssShmem", 0) if "RssFile" in f else None,
                "swap_bytes": f.get("VmSwap"), "source": "status",
                "why": f"/proc/{pid}/smaps_rollup unreadable ({rollup_error}): PSS and USS unknown"}
    except (OSError, KeyError) as e:
        return {"rss_bytes": None, "pss_bytes": None, "uss_bytes": None, "shared_bytes": None,
                "swap_bytes": None, "source": None,
                "why": f"/proc/{pid}: {type(e).__name__}: {e} (the process has probably ended)"}


def command(pid: int) -> str | None:
    """The start of a process's command line (what a child is: a forkserver, a resource tracker...)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(300).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    """Direct children of `pid`, from each /proc/N/stat's parent field."""
    kids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue  # ended between listdir and open: not a child any more
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            kids.append(int(name))
    return sorted(kids)


def snapshot(workers: list[dict]) -> dict:
    """The `memory` record: this process, the given DataLoader workers, then any other child."""
    me = os.getpid()
    entries = [{"pid": me, "role": "main", "loader": None, "worker_id": None, **process(me)}]
    known = {me}
    for w in workers:
        known.add(w["pid"])
        entries.append({"pid": w["pid"], "role": "worker", "loader": w["loader"],
                        "worker_id": w["worker_id"], **process(w["pid"])})
    for pid in children_of(me):
        if pid not in known:
            entries.append({"pid": pid, "role": "child", "loader": None, "worker_id": None,
                            "command": command(pid), **process(pid)})
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * _KB
    return {"type": "memory", "processes": entries, "main_peak_rss_bytes": peak}
