"""The compiled fast paths (fastpath.c): built once per Python and source into the user's cache, then loaded.

`load()` returns the module, or None with the reason in `WHY` (no C compiler, no Python headers, not
Linux, STALLSCOPE_JOB_HOOKS=python, a clock that disagrees): the Python wrappers in patches.py then
take every call, measuring the same at a higher cost per step. The build is `cc -O2 -shared -fPIC`
against the running interpreter's headers (about a second), written under a temporary name and
renamed, so ranks and sweep processes that start together each find either nothing or a whole
library. The hello record says which hooks a process used (`hooks`).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import sysconfig
import time

NAME = "_stallscope_fast"
SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fastpath.c")
WHY: str | None = None  # why the compiled hooks are not in use (None: they are, or load() not run)
_MODULE = None
_LOADED = False


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "stallscope", "native")


def library_path(source: bytes) -> str:
    """Where the library of this source for this interpreter lives: keyed by both."""
    key = hashlib.sha256(source + sys.version.encode() + sys.executable.encode()).hexdigest()[:16]
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    return os.path.join(cache_dir(), f"{NAME}-{key}{suffix}")


def _compilers() -> list[list[str]]:
    configured = sysconfig.get_config_var("CC")
    out = [shlex.split(configured)] if configured else []
    return out + [["cc"]]


def build(path: str) -> None:
    """Compile fastpath.c to `path`; raise RuntimeError naming the compiler's complaint."""
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise RuntimeError(f"no Python.h in {include} (the interpreter's headers are not installed)")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    errors = []
    for cc in _compilers():
        cmd = cc + ["-O2", "-shared", "-fPIC", "-I", include, SOURCE, "-o", tmp]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as e:
            errors.append(f"{cc[0]}: {e}")
            continue
        if done.returncode == 0:
            os.replace(tmp, path)
            return
        lines = done.stderr.strip().splitlines()
        first = next((l for l in lines if "error" in l), lines[0] if lines else "failed")
        errors.append(f"{cc[0]}: {first.strip()}")
    if os.path.exists(tmp):
        os.unlink(tmp)
    raise RuntimeError("; ".join(errors))


def _import(path: str):
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.ExtensionFileLoader(NAME, path)
    spec = importlib.util.spec_from_file_location(NAME, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def _same_clock(module) -> bool:
    """The module's clock reads between two reads of time.perf_counter_ns (the Python hooks')."""
    for _ in range(3):
        a = time.perf_counter_ns()
        b = module.now()
        c = time.perf_counter_ns()
        if a <= b <= c:
            return True
    return False


def load():
    """The compiled module, built if needed, or None (`WHY` says why); once per process."""
    global _MODULE, _LOADED, WHY
    if _LOADED:
        return _MODULE
    _LOADED = True
    try:
        if os.environ.get("STALLSCOPE_JOB_HOOKS") == "python":
            raise RuntimeError("STALLSCOPE_JOB_HOOKS=python")
        if not sys.platform.startswith("linux"):
            raise RuntimeError(f"{sys.platform}: the compiled hooks read CLOCK_MONOTONIC (Linux)")
        with open(SOURCE, "rb") as f:
            path = library_path(f.read())
        if not os.path.exists(path):
            build(path)
        module = _import(path)
        if not _same_clock(module):
            raise RuntimeError("its clock disagrees with time.perf_counter_ns")
        _MODULE = module
    except Exception as e:  # noqa: BLE001 (said in the hello record and on stderr; Python hooks)
        WHY = f"{type(e).__name__}: {e}" if not isinstance(e, RuntimeError) else str(e)
        if WHY != "STALLSCOPE_JOB_HOOKS=python":
            sys.stderr.write(f"stallscope: compiled hooks unavailable ({WHY}); the Python hooks "
                             f"measure the same at a higher cost per step\n")
    return _MODULE


def hooks() -> str:
    """What the hello record says: "compiled", or "python: <why>"."""
    return "compiled" if _MODULE is not None else f"python: {WHY or 'not loaded'}"
