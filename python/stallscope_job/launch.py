"""What the runner does around one unit: the environment that injects the instrumentation, and reading the records back."""

from __future__ import annotations

import json
import os
from pathlib import Path

from . import ENV, PROTOCOL

PYTHON_DIR = Path(__file__).resolve().parents[1]
BOOT_DIR = PYTHON_DIR / "stallscope_job" / "boot"


def config(out_dir, mode: str = "whole_run", warmup: int = 5, steps: int = 20, loader: int = 0,
           overrides: dict | None = None, replay_batches: int | None = None, unit: str = "",
           overrides_loader: int | None = None, replay_max_bytes: int | None = None) -> dict:
    """A STALLSCOPE_JOB object (docs/job-protocol.md)."""
    out = {"protocol": PROTOCOL, "out_dir": str(out_dir), "mode": mode, "warmup": warmup,
           "steps": steps, "loader": loader, "overrides": dict(overrides or {}),
           "replay": False if replay_batches is None else {"batches": replay_batches}, "unit": unit}
    if replay_batches is not None and replay_max_bytes is not None:
        out["replay"]["max_bytes"] = replay_max_bytes
    if overrides_loader is not None:
        out["overrides_loader"] = overrides_loader
    return out


def job_env(job: dict | None, environ=None) -> dict:
    """The script's environment: the boot folder, then python/, then the user's PYTHONPATH; STALLSCOPE_JOB."""
    env = dict(os.environ if environ is None else environ)
    prior = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(BOOT_DIR), str(PYTHON_DIR)] + prior)
    env.pop(ENV, None)
    if job is not None:
        env[ENV] = json.dumps(job, separators=(",", ":"))
    return env


def read_records(out_dir) -> dict[int, list[dict]]:
    """Every proc-<pid>.jsonl of a unit: pid -> its records in order (a line that is not JSON raises)."""
    out = {}
    for path in sorted(Path(out_dir).glob("proc-*.jsonl")):
        pid = int(path.stem.split("-", 1)[1])
        records = []
        for n, line in enumerate(path.read_text().splitlines(), 1):
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not a JSON record ({e}): {line[:200]!r}") from None
        out[pid] = records
    return out


def steps_series(records: list[dict]) -> dict[str, list]:
    """The `steps` chunks of one process joined into whole series (checking they are contiguous)."""
    series: dict[str, list] = {}
    count = 0
    for r in records:
        if r["type"] != "steps":
            continue
        if r["first"] != count:
            raise ValueError(f"steps chunk starts at {r['first']}, expected {count}")
        for key, values in r.items():
            if isinstance(values, list):
                series.setdefault(key, []).extend(values)
        count += len(r["step_ns"])
    return series
