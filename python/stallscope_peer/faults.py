"""The STALLSCOPE_HARNESS_FAULT test hook: fail on purpose at step S of epoch E of the first mode.

A prefix `rN:` fires on rank N only (the launcher's RANK or SLURM_PROCID), as one GPU's failure
would.
"""

from __future__ import annotations

import os
import re
import signal
from dataclasses import dataclass

VARIABLE = "STALLSCOPE_HARNESS_FAULT"
KINDS = ("kill", "garbage", "exit")


@dataclass(frozen=True)
class Fault:
    kind: str  # kill | garbage | exit
    epoch: int  # 0-based epoch of the first mode
    step: int  # 0-based step: fires once batch `step` is in hand, before it is used

    def step_for(self, mode_index: int, epoch: int) -> int:
        """The step to fire at in this epoch, or -1 (never)."""
        return self.step if mode_index == 0 and epoch == self.epoch else -1

    def fire(self, out) -> None:
        out.flush()
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
    m = re.fullmatch(r"(?:r(\d+):)?(kill|garbage|exit)@(\d+):(\d+)", text.strip())
    if m is None:
        raise ValueError(f"{VARIABLE}={text!r}: expected kill@E:S, garbage@E:S or exit@E:S "
                         f"(E the 0-based epoch, S the 0-based step), optionally after rN: "
                         f"(rank N only)")
    rank = environ.get("RANK") or environ.get("SLURM_PROCID") or "0"
    if m.group(1) is not None and rank != m.group(1):
        return None
    return Fault(m.group(2), int(m.group(3)), int(m.group(4)))
