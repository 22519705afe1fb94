"""The step clock: where a step loop waits for the device and reads the time, in each timing mode.

One owner of the rule of docs/methodology.md, for both of stallscope's Python loops (the peers
harness's own loop, `stallscope_peer/loop.py`, and the job's hooks on a user's loop,
`stallscope_job/window.py`), held to the Rust loop by `fixtures/loop/contract.json`:

- **whole_run**: the device is waited for once when the window (or epoch) opens and once when it
  closes; inside it the clock may be read (host time) but nothing waits;
- **diagnostic**: the device is waited for at every stage boundary: after the data wait, around
  each host-to-device copy, at the end of the compute (the step's end), and when the window opens.

`open`, `mark` and `close` are the only places a loop reads its stage clock; `sync` the only way
it waits. Two waits with no device work between them are one (the contract test collapses them).
"""

from __future__ import annotations

import time
from typing import Callable

now = time.perf_counter_ns
MODES = ("whole_run", "diagnostic")


class StepClock:
    """The timing rules of one loop in one mode; `sync` waits for its device."""

    __slots__ = ("diagnostic", "sync")

    def __init__(self, mode: str, sync: Callable[[], None]) -> None:
        if mode not in MODES:
            raise ValueError(f"timing mode: expected one of {MODES}, got {mode!r}")
        self.diagnostic = mode == "diagnostic"
        self.sync = sync

    def open(self) -> int:
        """The window or epoch opens: wait for the device (both modes), then read the clock."""
        self.sync()
        return now()

    def mark(self) -> int:
        """A stage boundary inside the window: diagnostic waits for the device first; whole-run
        only reads the clock."""
        if self.diagnostic:
            self.sync()
        return now()

    def close(self) -> int:
        """The window or epoch closes: whole-run waits for the device here (its only wait since
        `open`); diagnostic has waited at its last boundary already and only reads the clock."""
        if not self.diagnostic:
            self.sync()
        return now()
