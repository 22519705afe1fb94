"""The side channel: JSON-line records appended to out_dir/proc-<pid>.jsonl, and the small facts they carry."""

from __future__ import annotations

import hashlib
import json
import os
import time

RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK",
                  "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "MASTER_ADDR",
                  "MASTER_PORT", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID",
                  "SLURM_NTASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_JOB_NODELIST")
MAX_MESSAGE = 4000


class Writer:
    """One process's record file; each record is one `os.write` of one line (O_APPEND), nothing buffered."""

    def __init__(self, out_dir: str, pid: int) -> None:
        self.path = os.path.join(out_dir, f"proc-{pid}.jsonl")
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)

    def write(self, record: dict) -> None:
        line = {"type": record["type"], "mono_ns": time.monotonic_ns()}
        line.update(record)
        data = (json.dumps(line, allow_nan=False, separators=(",", ":")) + "\n").encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


def qualname(obj) -> str:
    """module.QualifiedName of a class or function (what a person would look for in the source)."""
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if name is None:
        return qualname(type(obj))
    return f"{module}.{name}" if module else name


def rank_env(environ=os.environ) -> dict:
    """The launcher's variables present in the environment, verbatim."""
    return {k: environ[k] for k in RANK_VARIABLES if k in environ}


def script_facts(argv0: str | None, cwd: str) -> dict:
    """The script's absolute path and sha256, or why there is none."""
    if not argv0 or argv0 in ("-c", "-m", "-"):
        return {"path": None, "sha256": None, "why": f"sys.argv[0] is {argv0!r}, not a file"}
    path = os.path.normpath(os.path.join(cwd, argv0))
    if not os.path.isfile(path):
        return {"path": path, "sha256": None, "why": "sys.argv[0] is not a file"}
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return {"path": path, "sha256": digest.hexdigest(), "why": None}


# A batch whose size could not be read (the error is reported): a batch, of unknown samples.
UNSIZED = (None, 0)


def sizes(item, tensor_type) -> tuple[int | None, int] | None:
    """What the training thread's log keeps of a fetched item: its `batch_size_and_bytes`, read as
    it arrives (its tensors are fresh in the cache then; the log never holds a batch), or None for
    no batch (a queue's None)."""
    return None if item is None else batch_size_and_bytes(item, tensor_type)


def batch_size_and_bytes(batch, tensor_type, max_depth: int = 8) -> tuple[int | None, int]:
    """(first dim of the first tensor found, bytes of all tensors), through tuples, lists and dicts."""
    # The usual (x, y) of plain tensors, quickly; patches.py's DataLoader next() has this loop
    # inline (a call there runs cold): change both.
    if type(batch) is tuple or type(batch) is list:
        first, total = None, 0
        for t in batch:
            if type(t) is not tensor_type:
                break
            if first is None:
                shape = t.shape
                if shape:
                    first = shape[0]
            total += t.nbytes  # numel x element_size, in one call
        else:
            return first, total
    first = None
    total = 0
    stack = [(batch, 0)]
    while stack:
        obj, depth = stack.pop()
        if isinstance(obj, tensor_type):
            if first is None and obj.dim() > 0:
                first = int(obj.shape[0])
            total += obj.numel() * obj.element_size()
        elif depth < max_depth and isinstance(obj, (tuple, list)):
            stack.extend((o, depth + 1) for o in reversed(obj))
        elif depth < max_depth and isinstance(obj, dict):
            stack.extend((o, depth + 1) for o in reversed(list(obj.values())))
    return first, total


def clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."
