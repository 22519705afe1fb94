"""The accelerator a process has initialised: wait for it, and name it (nothing on the CPU)."""

from __future__ import annotations

import sys


def sync() -> None:
    """Wait for the accelerator this process has initialised (its current device); nothing on the CPU.

    Only an accelerator already initialised is waited for, so this never starts CUDA in a process
    (a forked DataLoader worker could not use it then)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    if torch.cuda.is_initialized():
        torch.cuda.synchronize()
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_initialized():
        xpu.synchronize()


def accelerator() -> str | None:
    """`cuda:N (<name>)` or `xpu:N` of the initialised accelerator, or None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if torch.cuda.is_initialized():
        return f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_initialized():
        return f"xpu:{xpu.current_device()}"
    return None
