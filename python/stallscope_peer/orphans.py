"""Worker processes that die with the harness: DALI's and torchdata's would otherwise outlive a killed harness."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_armed_in: int | None = None  # the worker process that asked already


def die_with_harness(harness_pid: int) -> None:
    """In a worker process of the harness (a no-op in the harness itself): be SIGKILLed when the harness dies.

    DataLoader workers watch their parent and SPDL's pool sees its pipe
    close, but DALI's Python workers and torchdata's process workers wait on
    queues that stay open when the harness is SIGKILLed, and keep its stderr
    open, so whoever reads the harness's output to the end waits for them.
    Both pools fork or spawn from the harness's main thread, so the signal is
    not sent early by a thread ending. Called from the worker's callable, so
    it works with fork and spawn alike; only the first call in a process
    does anything.
    """
    global _armed_in
    pid = os.getpid()
    if pid == harness_pid or pid == _armed_in or sys.platform != "linux":
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed in worker {pid}: {os.strerror(errno)}")
    _armed_in = pid
    if os.getppid() != harness_pid:  # the harness died before the prctl
        os._exit(1)
