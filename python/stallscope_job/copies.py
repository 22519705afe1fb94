"""Diagnostic mode only: time every host-to-device copy the loop makes (Tensor.to, .cuda, .copy_), synchronised."""

from __future__ import annotations

import sys
import threading
import time

_ns = time.perf_counter_ns
_HOST = ("cpu", "meta")


class CopyClock:
    """Wraps the copy methods; a copy counts when the window is open, outside next(), in the consumer thread."""

    def __init__(self, session) -> None:
        self.session = session
        self.total = 0
        self._depth = threading.local()

    def _watching(self) -> bool:
        s = self.session
        return (s.phase == "window" and s.in_next_since is None
                and threading.get_ident() == s.consumer and not getattr(self._depth, "n", 0))

    def _timed(self, call, *args, **kwargs):
        from .window import sync

        s = self.session
        self._depth.n = 1
        try:
            sync()
            start = _ns()
            out = call(*args, **kwargs)
            sync()
            s.transfer_acc += _ns() - start
        finally:
            self._depth.n = 0
        s.copies_acc += 1
        self.total += 1
        return out

    def install(self) -> None:
        torch = sys.modules["torch"]
        tensor = torch.Tensor
        parse_to = torch._C._nn._parse_to
        orig_to, orig_cuda, orig_copy = tensor.to, tensor.cuda, tensor.copy_
        clock = self

        def to(self, *args, **kwargs):
            if self.is_cpu and clock._watching():
                device = parse_to(*args, **kwargs)[0]
                if device is not None and device.type not in _HOST:
                    return clock._timed(orig_to, self, *args, **kwargs)
            return orig_to(self, *args, **kwargs)

        def cuda(self, *args, **kwargs):
            if self.is_cpu and clock._watching():
                return clock._timed(orig_cuda, self, *args, **kwargs)
            return orig_cuda(self, *args, **kwargs)

        def copy_(self, src, *args, **kwargs):
            if (isinstance(src, torch.Tensor) and src.is_cpu and self.device.type not in _HOST
                    and clock._watching()):
                return clock._timed(orig_copy, self, src, *args, **kwargs)
            return orig_copy(self, src, *args, **kwargs)

        for name, fn, orig in (("to", to, orig_to), ("cuda", cuda, orig_cuda), ("copy_", copy_, orig_copy)):
            fn.__name__ = fn.__qualname__ = name
            fn.__doc__ = orig.__doc__
            setattr(tensor, name, fn)
