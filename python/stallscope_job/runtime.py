"""Per-process state: activation on the first DataLoader, the loader registry, and the patched DataLoader methods."""

from __future__ import annotations

import functools
import os
import sys
import traceback
import weakref

from . import PROTOCOL, lifecycle, overrides, records
from .config import Config

RUNTIME: "Runtime | None" = None


def init(config: Config, cwd: str) -> None:
    global RUNTIME
    RUNTIME = Runtime(config, cwd)


def on_dataloader_module(module) -> None:
    """Patch DataLoader.__init__ and __iter__ on the base class (subclasses and frameworks' loaders too)."""
    try:
        _patch(module.DataLoader)
    except Exception as e:  # noqa: BLE001 (reported: an error record and one stderr line)
        RUNTIME.fail("patching torch.utils.data.DataLoader", e)


def _patch(cls) -> None:
    import inspect

    orig_init, orig_iter = cls.__init__, cls.__iter__
    signature = inspect.signature(orig_init)

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        RUNTIME.construct(self, orig_init, signature, args, kwargs)

    @functools.wraps(orig_iter)
    def __iter__(self):
        return RUNTIME.iterate(self, orig_iter)

    cls.__init__ = __init__
    cls.__iter__ = __iter__


class LoaderInfo:
    """What the runtime knows of one DataLoader object."""

    __slots__ = ("ref", "index", "iteration", "decisions")

    def __init__(self, loader, index: int | None, decisions: list) -> None:
        self.ref = weakref.ref(loader)
        self.index = index
        self.iteration = None
        self.decisions = decisions


class Runtime:
    def __init__(self, config: Config, cwd: str) -> None:
        self.config = config
        self.boot_cwd = cwd
        self.hooks_installed = False
        self._reset()

    def _reset(self) -> None:
        self.pid = os.getpid()
        self.writer = None
        self.active = False
        self.disabled = False
        self.constructed = 0
        self.iterated = 0
        self.loaders: dict[int, LoaderInfo] = {}
        self.iterators = weakref.WeakKeyDictionary()  # live iterator -> its loader's construction index
        self.session = None
        self.over = False  # `done` or `end` written: nothing more from this process
        self.exit_status = None
        self.exception = None

    def after_fork_in_child(self) -> None:
        """A forked child (a DataLoader worker, a forked rank) starts with a clean slate of its own."""
        self._reset()

    # ----------------------------------------------------------------- activation

    def owner(self) -> bool:
        return self.active and not self.disabled and self.pid == os.getpid()

    def _usable(self, activated_by: str) -> bool:
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
        self.writer = records.Writer(self.config.out_dir, self.pid)
        self.active = True
        sigterm = lifecycle.install(self)
        self.hooks_installed = True
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
            "torch_threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
            "affinity_cpus": len(os.sched_getaffinity(0)),
            "clock": "time.perf_counter_ns for durations, time.monotonic_ns for mono_ns (both CLOCK_MONOTONIC on Linux)",
            "activated_by": activated_by, "sigterm": sigterm,
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
        if self.writer is None:
            try:
                self.writer = records.Writer(self.config.out_dir, os.getpid())
            except OSError as e:
                sys.stderr.write(f"stallscope: cannot write records in {self.config.out_dir}: {e}\n")
                return
        self.writer.write({"type": "error", "where": where, "message": records.clip(message),
                           "traceback_tail": "".join(tail)[-2000:], "pid": os.getpid()})

    # ----------------------------------------------------------------- the patched methods

    def info(self, loader) -> LoaderInfo | None:
        info = self.loaders.get(id(loader))
        return info if info is not None and info.ref() is loader else None

    def construct(self, loader, orig_init, signature, args, kwargs) -> None:
        if not self._usable("DataLoader.__init__"):
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

    def iterate(self, loader, orig_iter):
        if not self._usable("DataLoader.__iter__") or self.over:
            return orig_iter(loader)
        info = self.info(loader)
        if info is None:  # built before the patch, or while the runtime passed through
            info = LoaderInfo(loader, None, [])
            self.loaders[id(loader)] = info
        if info.iteration is None:
            info.iteration = self.iterated
            self.iterated += 1
        if info.iteration != self.config.loader:
            it = orig_iter(loader)
            self.iterators[it] = info.index
            return it
        if self.session is None:
            from .window import Session

            self.session = Session(self, info)
        return self.session.iterate(loader, orig_iter)

    # ----------------------------------------------------------------- the end of the process

    def workers(self) -> list[dict]:
        """Live DataLoader worker processes of every iterator seen: pid, loader index, worker id."""
        out = []
        for it, index in list(self.iterators.items()):
            if getattr(it, "_shutdown", False):
                continue
            for worker_id, w in enumerate(getattr(it, "_workers", None) or []):
                if w.pid is not None:
                    out.append({"pid": w.pid, "loader": index, "worker_id": worker_id})
        return out

    def end(self, reason: str, status=None, **extra) -> None:
        """The `end` record of a process whose window did not complete (once)."""
        if not self.owner() or self.over:
            return
        self.over = True
        try:
            record = {"type": "end", "reason": reason, "status": status, **extra}
            if self.session is not None:
                record.update(self.session.close_for_end())
            else:
                record.update(steps=0, phase_at_end="measured loader never iterated")
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
