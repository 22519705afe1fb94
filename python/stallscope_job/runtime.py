"""Per-process state: activation on the first DataLoader, the registries, records, failures and the exit.

The patched calls themselves (a DataLoader built, iterated, a batch taken, a queue get, a backward,
an optimizer step) are `calls.Calls`, which `Runtime` extends; `patches.py` installs them.
"""

from __future__ import annotations

import os
import sys
import traceback
import weakref

from . import PROTOCOL, lifecycle, native, patches, records
from .calls import Calls
from .config import Config

RUNTIME: "Runtime | None" = None


def init(config: Config, cwd: str) -> None:
    global RUNTIME
    RUNTIME = Runtime(config, cwd)


def on_dataloader_module(module) -> None:
    """Patch DataLoader.__init__ and __iter__ on the base class (subclasses and frameworks' loaders too)."""
    try:
        patches.dataloader(RUNTIME, module, RUNTIME.patches)
    except Exception as e:  # noqa: BLE001 (reported: an error record and one stderr line)
        RUNTIME.fail("patching torch.utils.data.DataLoader", e)


class Runtime(Calls):
    def __init__(self, config: Config, cwd: str, lifecycle_hooks: bool = True) -> None:
        self.config = config
        self.boot_cwd = cwd
        # In-process users (the contract test, the overhead micro-benchmark) leave exits alone.
        self.hooks_installed = not lifecycle_hooks
        self.patches = patches.Patches()
        self.hot_installed = False  # class-level patches survive fork: installed once per interpreter
        self._reset()

    def _reset(self) -> None:
        self.pid = os.getpid()
        self.writer = None
        self.active = False
        self.disabled = False
        self.live = False  # the patched calls measure (active, not disabled, window not over)
        self.fast_tid = None  # the training thread, while its fetches and backward take the fast path
        self.tracker = None
        self.constructed = 0
        self.iterated = 0
        self.loaders: dict[int, object] = {}  # id(loader) -> LoaderInfo
        self.orphans: list = []  # LoaderInfo of iterators not made through DataLoader.__iter__
        self.queues: list = []  # QueueInfo, in order seen
        self.iterators = weakref.WeakKeyDictionary()  # live iterator -> its LoaderInfo
        self.session = None
        self.over = False  # `done` or `end` written: nothing more from this process
        self.exit_pending = False  # `done` written: end at the training thread's next call
        self.exit_status = None
        self.exception = None

    def after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker, a forked rank) starts with a clean slate of its own."""
        self._reset()

    # ----------------------------------------------------------------- activation

    def owner(self) -> bool:
        return self.active and not self.disabled and self.pid == os.getpid()

    def usable(self, activated_by: str) -> bool:
        """Activate on first use in a process that is not a DataLoader worker; False means pass through."""
        if self.pid != os.getpid():
            self._reset()
        if self.disabled:
            return False
        if self.active:
            return True
        from torch.utils.data import get_worker_info

        if get_worker_info() is not None:
            return False
        try:
            self._activate(activated_by)
        except Exception as e:  # noqa: BLE001 (reported, then everything passes through)
            self.fail("activation", e)
            return False
        return True

    def _activate(self, activated_by: str) -> None:
        from .window import Session

        self.writer = records.Writer(self.config.out_dir, self.pid)
        self.active = True
        sigterm = lifecycle.install(self)
        self.hooks_installed = True
        self.session = Session(self)
        self.tracker = self.session.tracker
        if not self.hot_installed:
            patches.hot(self, self.patches)
            self.hot_installed = True
        self.live = True
        self.write(self._hello(activated_by, sigterm))

    def _hello(self, activated_by: str, sigterm: str) -> dict:
        import multiprocessing
        import platform
        import socket

        torch = sys.modules["torch"]
        return {
            "type": "hello", "protocol": PROTOCOL, "pid": self.pid, "ppid": os.getppid(),
            "unit": self.config.unit, "mode": self.config.mode, "config": self.config.raw,
            "python": platform.python_version(), "torch": torch.__version__,
            "executable": sys.executable, "argv": list(sys.argv),
            "orig_argv": list(getattr(sys, "orig_argv", [])), "cwd": self.boot_cwd,
            "script": records.script_facts(sys.argv[0] if sys.argv else None, self.boot_cwd),
            "rank_env": records.rank_env(), "hostname": socket.gethostname(),
            "start_method_default": multiprocessing.get_all_start_methods()[0],
            "start_method_set": multiprocessing.get_start_method(allow_none=True),
            "sharing_strategy": torch.multiprocessing.get_sharing_strategy(),
            "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "affinity_cpus": len(os.sched_getaffinity(0)),
            "clock": "time.perf_counter_ns for durations, time.monotonic_ns for mono_ns (both CLOCK_MONOTONIC on Linux)",
            "activated_by": activated_by, "sigterm": sigterm, "hooks": native.hooks(),
        }

    # ----------------------------------------------------------------- records and failures

    def write(self, record: dict) -> None:
        self.writer.write(record)

    def fail(self, where: str, error: BaseException) -> None:
        """An instrumentation failure: an `error` record, one stderr line, then pass everything through."""
        message = f"{type(error).__name__}: {error}"
        tail = traceback.format_exception(type(error), error, error.__traceback__)[-6:]
        sys.stderr.write(f"stallscope: instrumentation failed in {where}: {message}; "
                         f"the script goes on unmeasured\n")
        sys.stderr.flush()
        self.disabled = True
        self.live = False
        self.fast_tid = None
        if self.writer is None:
            try:
                self.writer = records.Writer(self.config.out_dir, os.getpid())
            except OSError as e:
                sys.stderr.write(f"stallscope: cannot write records in {self.config.out_dir}: {e}\n")
                return
        self.writer.write({"type": "error", "where": where, "message": records.clip(message),
                           "traceback_tail": "".join(tail)[-2000:], "pid": os.getpid()})

    # ----------------------------------------------------------------- registries

    def loader_infos(self) -> list:
        """Every DataLoader seen, in construction order (those built unseen last)."""
        known = sorted((i for i in self.loaders.values()), key=lambda i: (i.index is None, i.index or 0))
        return known + self.orphans

    def queue_infos(self) -> list:
        return list(self.queues)

    def workers(self) -> list[dict]:
        """Live DataLoader worker processes of every iterator seen: pid, loader index, worker id."""
        out = []
        for it, info in list(self.iterators.items()):
            if getattr(it, "_shutdown", False):
                continue
            for worker_id, w in enumerate(getattr(it, "_workers", None) or []):
                if w.pid is not None:
                    out.append({"pid": w.pid, "loader": info.index, "worker_id": worker_id,
                                "iterator": getattr(it, "_stallscope_epoch", None)})
        return out

    def worker_meta(self) -> dict[int, dict]:
        """The same, keyed by pid, as stallscope_steps.peaks wants it (the group: the iterator)."""
        return {w["pid"]: {"loader": w["loader"], "worker_id": w["worker_id"], "group": w["iterator"]}
                for w in self.workers()}

    def workers_ending(self, it) -> None:
        """A DataLoader iterator stops its workers: inside the window, read their peaks first."""
        s = self.session
        if s is None or s.phase != "window" or self.pid != os.getpid():
            return
        try:
            info = self.iterators.get(it)
            for w in getattr(it, "_workers", None) or []:
                if w.pid is not None:
                    s.peaks.ending(w.pid, {"loader": None if info is None else info.index,
                                           "worker_id": (it._workers.index(w)),
                                           "group": getattr(it, "_stallscope_epoch", None)})
        except Exception as e:  # noqa: BLE001 (reported; the workers still stop)
            self.fail("reading the peaks of workers that stop", e)

    # ----------------------------------------------------------------- the end of the process

    def close_window(self, exit_pending: bool = False) -> None:
        """Nothing more is measured; with `exit_pending` the hooks stay to end the process at the
        training thread's next fetch, backward or optimizer step (`exit_now`)."""
        self.over = True
        self.exit_pending = exit_pending
        self.live = exit_pending
        self.fast_tid = None

    def exit_now(self) -> None:
        """Called by the tracker at the training thread's first call after `done`."""
        self.exit_pending = False
        self.live = False
        self.shutdown_and_exit(0)

    def end(self, reason: str, status=None, **extra) -> None:
        """The `end` record of a process whose window did not complete (once)."""
        if not self.owner() or self.over:
            return
        self.close_window()
        try:
            record = {"type": "end", "reason": reason, "status": status, **extra}
            if self.session is not None:
                record.update(self.session.close_for_end())
            else:
                record.update(steps=0, phase_at_end="no DataLoader iterated")
            self.write(record)
        except Exception as e:  # noqa: BLE001 (reported; the process goes on ending)
            self.fail("writing the end record", e)

    def shutdown_and_exit(self, status: int) -> None:
        """Stop every DataLoader's workers, end multiprocessing as its atexit step would, flush, os._exit.

        multiprocessing's own exit step (util._exit_function) terminates daemonic children and runs
        the finalizers that unregister semaphores from the resource tracker (spawn/forkserver), which
        would otherwise warn about leaks on stderr. The script's other atexit handlers do not run."""
        try:
            for it in list(self.iterators.keys()):
                stop = getattr(it, "_shutdown_workers", None)
                if stop is not None:
                    stop()
            mp = sys.modules.get("multiprocessing")
            for child in mp.active_children() if mp is not None else []:
                if not child.daemon:  # util._exit_function would join it forever
                    child.terminate()
                    child.join(2)
            util = sys.modules.get("multiprocessing.util")
            if util is not None:
                util._exit_function()
        except Exception as e:  # noqa: BLE001 (reported; the process still ends)
            self.write({"type": "error", "where": "shutting down the workers",
                        "message": records.clip(f"{type(e).__name__}: {e}")})
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError) as e:
                self.write({"type": "error", "where": "flushing the script's output",
                            "message": f"{type(e).__name__}: {e}"})
        lifecycle.real_exit(status)
