"""The STALLSCOPE_HARNESS_FAULT test hook: fail on purpose at step S of epoch E of the first mode.

A prefix `rN:` fires on rank N only (the launcher's RANK or SLURM_PROCID), as one GPU's failure
would. `alloc` does not fail: it makes the harness's resident memory 256 MiB larger for a moment
(touched, then freed), so that epoch's peak memory is larger than the others' (the peak-memory
tests: a peak is the epoch's own, reset when the next epoch opens).
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

VARIABLE = "STALLSCOPE_HARNESS_FAULT"
KINDS = ("kill", "garbage", "exit", "alloc")
ALLOC_BYTES = 256 << 20


@dataclass(frozen=True)
class Fault:
    kind: str  # kill | garbage | exit | alloc
    epoch: int  # 0-based epoch of the first mode
    step: int  # 0-based step: fires once batch `step` is in hand, before it is used

    def step_for(self, mode_index: int, epoch: int) -> int:
        """The step to fire at in this epoch, or -1 (never)."""
        return self.step if mode_index == 0 and epoch == self.epoch else -1

    def fire(self, out) -> None:
        out.flush()
        if self.kind == "alloc":
            block = bytearray(ALLOC_BYTES)
            for i in range(0, ALLOC_BYTES, 4096):  # touch every page: resident, not just reserved
                block[i] = 1
            del block
            return
        if self.kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        elif self.kind == "exit":
            os._exit(3)
        else:
            out.raw("this is not json")


def from_env(environ=os.environ) -> Fault | None:
    text = environ.get(VARIABLE, "")
    if not text:
        return None
    m = re.fullmatch(r"(?:r(\d+):)?(kill|garbage|exit|alloc)@(\d+):(\d+)", text.strip())
    if m is None:
        raise ValueError(f"{VARIABLE}={text!r}: expected kill@E:S, garbage@E:S, exit@E:S or alloc@E:S "
                         f"(E the 0-based epoch, S the 0-based step), optionally after rN: "
                         f"(rank N only)")
    rank = environ.get("RANK") or environ.get("SLURM_PROCID") or "0"
    if m.group(1) is not None and rank != m.group(1):
        return None
    return Fault(m.group(2), int(m.group(3)), int(m.group(4)))
