"""A user's failure, as the user needs it: the exception, its message, and the line of their own code.

The **user's frame** is the innermost frame of the traceback whose file is the user's: not Python's
standard library, not an installed package (site-packages, dist-packages), not stallscope's own
packages (python/stallscope_*), and a real file (not `<frozen ...>`). A DataLoader worker's
exception reaches the main process re-raised, with the worker's traceback in its message (PyTorch's
"Original Traceback"); its innermost user frame is `worker_frame`.
"""

from __future__ import annotations

import os
import types
import re
import sysconfig
import traceback

_STALLSCOPE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')


def _system_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    return tuple(os.path.realpath(d) + os.sep for d in dirs if d)


_SYSTEM = _system_dirs()


def is_user_file(filename: str) -> bool:
    if not filename or filename.startswith("<"):
        return False
    path = os.path.realpath(filename)
    parts = path.split(os.sep)
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    if path.startswith(_SYSTEM):
        return False
    inside = os.path.relpath(path, _STALLSCOPE).split(os.sep)[0]
    return not inside.startswith("stallscope_")


def _frame(file: str, line: int | None, function: str, code: str | None) -> dict:
    return {"file": file, "line": line, "function": function, "code": code}


def user_frame(tb) -> dict | None:
    """The innermost frame of `tb` in the user's files, or None."""
    for fs in reversed(traceback.extract_tb(tb)):
        if is_user_file(fs.filename):
            return _frame(fs.filename, fs.lineno, fs.name, (fs.line or "").strip() or None)
    return None


def worker_frame(message: str) -> dict | None:
    """The innermost user frame of a DataLoader worker's traceback quoted in `message`, or None."""
    if "Original Traceback" not in message:
        return None
    lines = message.splitlines()
    found = None
    for i, text in enumerate(lines):
        m = _FRAME.match(text)
        if m and is_user_file(m["file"]):
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else None
            found = _frame(m["file"], int(m["line"]), m["function"].strip(), code or None)
    return found


def describe(kind, value, tb, tail_lines: int) -> dict:
    """The `end` record's exception fields."""
    text = "".join(traceback.format_exception(kind, value, tb))
    message = str(value)
    return {"exception": kind.__name__, "exception_module": kind.__module__,
            "message": message[:2000], "traceback_tail": text.rstrip("\n").split("\n")[-tail_lines:],
            "traceback": text[-20000:], "user_frame": user_frame(tb),
            "worker_frame": worker_frame(message)}


def is_ours(filename: str) -> bool:
    """A file of stallscope's own packages (python/stallscope_*)."""
    parts = os.path.normpath(filename).split(os.sep)
    return len(parts) >= 2 and parts[-2].startswith("stallscope_")


def without_ours(tb):
    """The traceback `tb` with stallscope's own frames left out (its patches sit between the
    script and the DataLoader): what the script's traceback would be without the instrumentation."""
    kept = []
    while tb is not None:
        if not is_ours(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(kept):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out
