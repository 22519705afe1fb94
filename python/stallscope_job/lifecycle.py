"""Exit hooks of an active process: every way out writes `end` (atexit, excepthook, sys.exit, os._exit, SIGTERM)."""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading

from . import failure

real_exit = os._exit
TAIL_LINES = 12


def _status_of(code) -> int:
    """The exit status Python gives sys.exit(code)."""
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    return 1


def install(rt) -> str:
    """Install the hooks once per interpreter (forked children inherit them; each checks its owner).

    Returns what became of SIGTERM, for the `hello` record."""
    if rt.hooks_installed:
        return _install_sigterm(rt)
    os.register_at_fork(after_in_child=rt.after_fork_in_child)
    atexit.register(_at_exit, rt)
    _chain_excepthook(rt)
    _patch_exits(rt)
    return _install_sigterm(rt)


def _at_exit(rt) -> None:
    if not rt.owner() or rt.over:
        return
    if rt.exception is not None:
        rt.end("exception", **rt.exception)
    elif rt.exit_status is not None:
        rt.end("sys.exit", status=rt.exit_status)
    else:
        rt.end("exit", status=None,
               note="the interpreter exited (end of script, or SystemExit raised without sys.exit); "
                    "the status is the process's")


def _chain_excepthook(rt) -> None:
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        if rt.owner():
            try:
                rt.exception = failure.describe(kind, value, tb, TAIL_LINES)
            except Exception as e:  # noqa: BLE001 (the record says so; the traceback still prints)
                rt.exception = {"exception": kind.__name__, "message": str(value)[:2000],
                                "describe_error": f"{type(e).__name__}: {e}"}
            # Python dies of SIGINT after an uncaught KeyboardInterrupt
            rt.exception["status"] = None if issubclass(kind, KeyboardInterrupt) else 1
            # The script's own traceback, as it would print without stallscope.
            try:
                tb = failure.without_ours(tb)
                value = value.with_traceback(tb)
            except Exception:  # noqa: BLE001 (the traceback then prints as it is)
                pass
        previous(kind, value, tb)

    sys.excepthook = excepthook


def _patch_exits(rt) -> None:
    original_sys_exit = sys.exit

    def exit(code=None):
        if rt.owner():
            rt.exit_status = _status_of(code)
        original_sys_exit(code)

    def _exit(status):
        if rt.owner():
            rt.end("os._exit", status=status)
        real_exit(status)

    sys.exit = exit
    os._exit = _exit


def _install_sigterm(rt) -> str:
    if threading.current_thread() is not threading.main_thread():
        return "not installed: the first DataLoader was made outside the main thread"
    previous = signal.getsignal(signal.SIGTERM)
    if getattr(previous, "_stallscope", False):
        return "installed"
    if previous is signal.SIG_IGN:
        return "not installed: the script ignores SIGTERM"
    if previous is None:
        return "not installed: a handler not set from Python is in place"

    def on_sigterm(signum, frame):
        if rt.owner():
            rt.end("signal", status=None, signal="SIGTERM")
        if callable(previous):
            return previous(signum, frame)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return None

    on_sigterm._stallscope = True
    signal.signal(signal.SIGTERM, on_sigterm)
    return "installed" if previous is signal.SIG_DFL else "installed, chaining the script's handler"
