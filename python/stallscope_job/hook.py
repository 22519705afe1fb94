"""A post-import hook: call back once torch.utils.data.dataloader has run, so nothing is paid before torch is used."""

from __future__ import annotations

import sys

TARGET = "torch.utils.data.dataloader"


class _Finder:
    """A meta-path finder that only ever answers for TARGET, by asking the finders after it."""

    def __init__(self, on_load) -> None:
        self._on_load = on_load

    def find_spec(self, fullname, path, target=None):
        if fullname != TARGET:
            return None
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        self._wrap(spec.loader)
        return spec

    def _wrap(self, loader) -> None:
        original = loader.exec_module
        on_load = self._on_load
        finder = self

        def exec_module(module):
            if module.__name__ != TARGET:
                return original(module)
            del loader.exec_module  # back to the class's method
            original(module)
            finder.remove()
            on_load(module)

        loader.exec_module = exec_module

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


def install(on_load) -> None:
    """Call `on_load(module)` right after TARGET is imported (now, if it already is)."""
    module = sys.modules.get(TARGET)
    if module is not None:
        on_load(module)
        return
    sys.meta_path.insert(0, _Finder(on_load))
