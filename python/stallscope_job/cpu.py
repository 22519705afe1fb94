"""CPU time of the process tree over the window: this process and every live descendant (DataLoader
workers, whatever the start method, a forkserver and its children), from /proc, with what ended children
used counted through their parent's reaped-children times."""

from __future__ import annotations

import os
import resource

from stallscope_steps import peaks

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, user s, system s) of a process, its reaped children included; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    # fields[1] is the parent; [11], [12] utime, stime; [13], [14] cutime, cstime (clock ticks)
    user = (int(fields[11]) + int(fields[13])) * _TICK_S
    system = (int(fields[12]) + int(fields[14])) * _TICK_S
    return int(fields[1]), user, system


def _self() -> tuple[float, float]:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + kids.ru_utime, me.ru_stime + kids.ru_stime


def snapshot(closing: bool) -> dict[int, tuple[float, float, int]]:
    """pid -> (user s, system s, parent pid) of this process and each live descendant, each with its
    reaped children. This process is read after the walk of /proc when the window opens and before it
    when it closes, so the walk's own CPU falls outside."""
    me = os.getpid()
    mine = (*_self(), os.getppid()) if closing else None
    times: dict[int, tuple[float, float, int]] = {}
    for pid, parent in peaks.tree(me).items():
        got = _stat(pid)
        if got is not None:
            times[pid] = (got[1], got[2], parent)
    times[me] = mine or (*_self(), os.getppid())
    return times


def window_cost(before: dict, after: dict, wall_s: float, workers: list[dict]) -> dict:
    """The `cpu` object of `done`: CPU-seconds of the tree between two snapshots, and its parts.

    A process alive at both ends counts its difference; one started in the window, all of its time. One
    that ended was reaped by its parent, whose children's times now hold all of it: what it had used
    before the window is taken back from that parent's part (the main process's when the parent is gone
    too)."""
    me = os.getpid()
    names = {w["pid"]: f"worker {w['worker_id']} (loader {w['loader']})" for w in workers}
    taken: dict[int, list[float]] = {}
    for pid, (user, system, parent) in before.items():
        if pid not in after:
            owner = taken.setdefault(parent if parent in after else me, [0.0, 0.0])
            owner[0] += user
            owner[1] += system
    parts = []
    for pid, (user, system, _) in sorted(after.items(), key=lambda kv: kv[0] != me):
        u0, s0, _ = before.get(pid, (0.0, 0.0, 0))
        back = taken.get(pid, [0.0, 0.0])
        name = "main" if pid == me else names.get(pid, f"child {pid}")
        if pid in taken:
            name += " (with its children that ended in the window)"
        parts.append({"name": name, "pid": pid, "user_s": max(user - u0 - back[0], 0.0),
                      "system_s": max(system - s0 - back[1], 0.0), "peak_rss_bytes": peaks.peak(pid)})
    total = sum(u + s for u, s, _ in after.values()) - sum(u + s for u, s, _ in before.values())
    return {"wall_s": wall_s, "cpu_s": max(total, 0.0), "parts": parts,
            "clock": "user + system from getrusage (this process) and /proc/PID/stat (the others), "
                     "reaped children included"}
