"""Engine lookup: import an engine's module, telling a package that is not installed from one that fails to import."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .protocol import EngineMissing


@dataclass(frozen=True)
class Package:
    name: str  # the pip name xtask pins
    version: str  # the pinned version
    module: str  # what the engine imports


# The packages beyond torch each engine needs (xtask/src/peers.rs pins the same versions).
PACKAGES = {
    "pytorch": None,
    "spdl": Package("spdl", "0.8.0", "spdl"),
    "dali": Package("nvidia-dali-cuda130", "2.4.0", "nvidia.dali"),
    "nodes": Package("torchdata", "0.11.0", "torchdata.nodes"),
}


def _is_missing(error: ModuleNotFoundError, module: str) -> bool:
    """True when the module itself (or a package above it) is absent, not something it imports."""
    parts = module.split(".")
    prefixes = {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return error.name in prefixes


def load(engine: str):
    """The engine's `Engine` class; EngineMissing when its package is not installed."""
    package = PACKAGES[engine]
    if package is not None:
        try:  # the package alone first: a missing one fails fast, before torch is imported
            importlib.import_module(package.module)
        except ModuleNotFoundError as e:
            if not _is_missing(e, package.module):
                raise
            raise EngineMissing(engine, package.name, package.version, package.module,
                                f"import {package.module}: {e}") from e
    return importlib.import_module(f".engine_{engine}", __package__).Engine
