"""Diagnostic mode only: time every host-to-device copy the training thread makes (Tensor.to, .cuda, .copy_).

A copy counts when the window is open, in the training thread, outside a fetch (a DataLoader's own
pinning and copies are the loader's); each is timed between two stage-clock marks (the device
waited for before and after), and handed to the tracker, which drops those that fall inside a
validation pass.
"""

from __future__ import annotations

import sys
import threading

_HOST = ("cpu", "meta")


class CopyClock:
    """Wraps the copy methods while installed; `uninstall` puts the originals back."""

    def __init__(self, session) -> None:
        self.session = session
        self.total = 0
        self._inside = threading.local()
        self._originals = None

    def _watching(self) -> bool:
        s = self.session
        tr = s.tracker
        return (s.phase == "window" and tr.depth == 0 and threading.get_ident() == tr.tid
                and not getattr(self._inside, "n", 0))

    def _timed(self, call, *args, **kwargs):
        clock, tr = self.session.clock, self.session.tracker
        self._inside.n = 1
        try:
            start = clock.mark()
            out = call(*args, **kwargs)
            tr.copied(start, clock.mark() - start)
        finally:
            self._inside.n = 0
        self.total += 1
        return out

    def install(self) -> None:
        torch = sys.modules["torch"]
        tensor = torch.Tensor
        parse_to = torch._C._nn._parse_to
        orig_to, orig_cuda, orig_copy = tensor.to, tensor.cuda, tensor.copy_
        self._originals = (tensor, {n: tensor.__dict__[n] for n in ("to", "cuda", "copy_")
                                    if n in tensor.__dict__})
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

    def uninstall(self) -> None:
        """Put the originals back as they were (on torch 2.x they are inherited from TensorBase)."""
        if self._originals is not None:
            tensor, own = self._originals
            for name in ("to", "cuda", "copy_"):
                if name in own:
                    setattr(tensor, name, own[name])
                else:
                    delattr(tensor, name)
            self._originals = None
