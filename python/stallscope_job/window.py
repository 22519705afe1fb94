"""The measured window around the training thread's steps: warm-up, opening, the step series, closing.

`Session.boundary` is called at each step boundary the tracker (training.py) sees; it owns the
timing rules (`stallscope_steps.clock.StepClock`: whole-run waits for the device when the window
opens and closes, diagnostic at every boundary), the held records, the chunks of the per-step
series, the window's CPU time and peak memory, and the `done` and `end` records.
"""

from __future__ import annotations

import sys
import threading

from stallscope_steps import devices, peaks
from stallscope_steps.clock import StepClock, now

from . import cpu, memory, sources
from .replay import Replay
from .training import FALLBACK_AFTER, Tracker

FLUSH_NS = 500_000_000
CPU_TRANSFER = "none: the job runs on the CPU (no accelerator was initialised), there is no host-to-device copy"
NO_COPY_SEEN = ("none seen: no Tensor.to / Tensor.cuda / Tensor.copy_ from a CPU tensor to an accelerator "
                "ran in the training thread outside a fetch during the window")
COLUMNS = ("step_ns", "next_ns", "samples", "bytes", "batches", "apart_ns")
DIAGNOSTIC_COLUMNS = ("next_wait_ns", "transfer_ns", "compute_ns", "copies")


class Steps:
    """The window's per-step series: one row per step, written as columns in chunks."""

    def __init__(self, diagnostic: bool) -> None:
        self.names = COLUMNS + (DIAGNOSTIC_COLUMNS if diagnostic else ())
        self.rows: list[tuple] = []
        self.written = 0

    @property
    def count(self) -> int:
        return len(self.rows)

    def column(self, name: str) -> list:
        i = self.names.index(name)
        return [r[i] for r in self.rows]

    def chunk(self) -> dict | None:
        if self.written == len(self.rows):
            return None
        record = {"type": "steps", "first": self.written}
        columns = list(zip(*self.rows[self.written:]))
        if len(columns) != len(self.names):
            raise AssertionError(f"steps rows have {len(columns)} columns, the names {len(self.names)}")
        record.update({n: list(c) for n, c in zip(self.names, columns)})
        self.written = len(self.rows)
        return record


class Session:
    """One process's training steps: warm-up, then the window of `config.steps` steps."""

    def __init__(self, rt) -> None:
        self.rt, self.config = rt, rt.config
        self.torch = sys.modules["torch"]
        self.diagnostic = self.config.diagnostic
        self.clock = StepClock(self.config.mode, devices.sync)
        self.tracker = Tracker(self)
        self.steps = Steps(self.diagnostic)
        self.phase = "warmup"
        self.warm_steps = 0
        self.t0 = None
        self.last_flush = 0
        self.held: list[dict] = []  # records made inside the window, written with the next chunk
        self.replay = (Replay(self.config.replay_batches, self.config.replay_max_bytes)
                       if self.config.replay_batches is not None else None)
        self.cpu_open = None
        self.peaks = peaks.Window()
        self.uss_open = None  # pid -> USS, read at the last warm-up boundary (or at the opening)
        self.counting = False  # per-loader batch counts run (from that read on)
        self.copies = None

    # ------------------------------------------------------------------ step boundaries

    def boundary(self) -> None:
        """A training step ends now (the lead optimizer's step, or the fallback's next())."""
        tr = self.tracker
        if self.phase == "window":
            tr.drain(self.steps.rows)
            ending = self.steps.count + 1 >= self.config.steps
            if not ending and now() - self.last_flush >= FLUSH_NS:
                self._flush()
            t = self.clock.mark()
            if ending:
                t = self.clock.close()
            tr.resolve(t)
            self.steps.rows.append(tr.close_step(t))
            if ending:
                self._finish(t)
            else:
                self._arm()
            return
        if self.phase != "warmup":
            return
        t = now()
        tr.resolve(t)
        tr.close_step(t)
        self.warm_steps += 1
        if self._ready():
            self._open()
        elif self.replay is None and self.warm_steps == self._needed() - 1:
            self._read_uss()

    def _arm(self) -> None:
        """The steps up to the window's last (it closes the window) and up to its next flush may end
        on the lead optimizer's hook's quick path (training.py, "the quick end")."""
        tr = self.tracker
        tr.quick = self.config.steps - 1 - self.steps.count if tr.mode == "optimizer" else 0
        tr.flush_at = self.last_flush + FLUSH_NS

    def drained_count(self) -> int:
        """Steps of the window so far, quick ends not yet drained included (any thread may ask)."""
        return self.steps.count + len(self.tracker.ended_quick)

    def _read_uss(self) -> None:
        """The workers' USS for the memory forecast, one step before the window opens (reading
        /proc/PID/smaps_rollup costs milliseconds per process: at the opening it would lengthen the
        script's first window step). Each loader's samples are counted from here on."""
        self.uss_open = {pid: peaks.uss(pid) for pid in self.rt.worker_meta()}
        self.counting = True
        for info in self.rt.loader_infos():
            info.since_uss = [0, 0]
        sources.count_at_gets(self.rt.queue_infos())

    def _needed(self) -> int:
        """Warm-up steps before the window may open."""
        if self.tracker.mode == "loader":
            return 1  # the fallback's warm-up was the batches it waited for an optimizer
        # The first step's start is no boundary of the training thread: it is always warm-up. Replay
        # picks its loaders from a step whose fetches were classified: the second at the earliest.
        return max(self.config.warmup, 2 if self.replay is not None else 1)

    def _ready(self) -> bool:
        if self.warm_steps < self._needed():
            return False
        if self.replay is None:
            return True
        if self.replay.started_at is None:
            self.replay.start(self._replayed_loaders(), self.warm_steps)
            return False
        return self.replay.ready(self.warm_steps)

    def _replayed_loaders(self) -> list:
        """The DataLoaders that gave the training thread its data in warm-up (directly or through a
        data queue); else those other threads iterated; else the fallback's."""
        loaders = self.rt.loader_infos()
        chosen = [i for i in loaders if i.training_batches("warmup") > 0]
        if not chosen:
            chosen = [i for i in loaders if "other" in i.threads and i.delivered > 0]
        if not chosen and self.tracker.fallback is not None:
            chosen = [self.tracker.fallback]
        return chosen

    def _open(self) -> None:
        """Outside the window's clock: reset the peaks, install the copy clock, write `window` (and
        `replay`), snapshot the CPU times; then the clock starts."""
        tr = self.tracker
        if self.uss_open is None:
            self._read_uss()
        self.peaks.open(self.rt.worker_meta(), self.uss_open)
        if self.diagnostic:
            from .copies import CopyClock

            self.copies = CopyClock(self)
            self.copies.install()
        self._emit({"type": "window", "warmup_taken": self.warm_steps, "replay": self.replay is not None,
                    **self.method_now()})
        if self.replay is not None:
            self._emit(self.replay.record())
        for info in self.rt.loader_infos():
            info.window = [0, 0, 0]
        self.cpu_open = cpu.snapshot(closing=False)
        t0 = self.clock.open()
        tr.restart(t0)
        if self.diagnostic:
            tr.mark = self.clock.mark
        self.t0 = self.last_flush = t0
        self.phase = "window"
        self._arm()

    # ------------------------------------------------------------------ records

    def _emit(self, record: dict) -> None:
        if self.phase == "window":
            self.held.append(record)
        elif self.phase != "done":  # nothing after `done` or `end`
            self.rt.write(record)

    def _flush(self) -> None:
        chunk = self.steps.chunk()
        if chunk is not None:
            self.rt.write(chunk)
        for record in self.held:
            self.rt.write(record)
        self.held = []
        self.last_flush = now()

    def method_now(self) -> dict:
        """How the steps are bounded and where the training thread is (for `window`, `done`, `end`)."""
        tr = self.tracker
        thread = None
        if tr.tid is not None:
            found = next((t for t in threading.enumerate() if t.ident == tr.tid), None)
            thread = {"name": found.name if found else None,
                      "main": tr.tid == threading.main_thread().ident}
        if tr.mode == "optimizer":
            step = {"boundary": "optimizer_step", "optimizer": tr.optimizers.get(id(tr.lead)),
                    "optimizers": sorted(set(tr.optimizers.values())),
                    "why": "the training thread's steps of the first optimizer it stepped"}
        elif tr.mode == "loader":
            f = tr.fallback
            step = {"boundary": "loader_next", "optimizer": None, "optimizers": [],
                    "loader": f.index, "iteration_index": f.iteration,
                    "why": f"no optimizer stepped while DataLoader iteration index {f.iteration} gave "
                           f"{self.config.warmup + FALLBACK_AFTER} batches: the fallback times the loop "
                           "that consumes it, from one next() to the next"}
        else:
            step = {"boundary": None, "optimizer": None, "optimizers": [],
                    "why": "no optimizer has stepped and the fallback has not begun"}
        return {"step": step, "training_thread": thread}

    def _wait_method(self) -> dict:
        rows = self.steps.rows
        without = sum(1 for r in rows if r[4] == 0)
        unseen_feeders = [i.index for i in self.rt.loader_infos()
                          if "other" in i.threads and i.delivered > 0 and i.training_batches() == 0
                          and i.role() != "validation"]
        if self.tracker.mode == "loader":
            method = "loader_next"
        elif not rows or without == len(rows):
            method = "unseen"
        elif without:
            method = "partial"
        else:
            method = "training_thread"
        return {"method": method, "steps_without_batch": without,
                "loaders_iterated_elsewhere_unseen": unseen_feeders}

    def sources_summary(self) -> dict:
        loaders = [{"loader": i.index, "iteration_index": i.iteration, "role": i.role(),
                    "threads": sorted(i.threads), "epochs": i.epoch + 1,
                    "window": dict(zip(("batches", "samples", "bytes"), i.window)),
                    "classification": i.classification()} for i in self.rt.loader_infos()]
        queues = [{"queue": q.index, "class": q.kind_name, "data": q.data,
                   "fed_by": [i.index for i in q.loaders], "gets": q.gets, "role": q.role(),
                   "classification": q.classification()} for q in self.rt.queue_infos()]
        return {"loaders": loaders, "queues": queues}

    def _transfer_note(self) -> str | None:
        if not self.diagnostic:
            return None
        if self.copies is not None and self.copies.total:
            return None
        return CPU_TRANSFER if devices.accelerator() is None else NO_COPY_SEEN

    def _totals(self) -> dict:
        s = self.steps
        samples = [v for v in s.column("samples") if v is not None] if s.rows else []
        return {"steps": s.count, "samples": sum(samples), "bytes": sum(s.column("bytes")),
                "batches": sum(s.column("batches")), "apart_s": sum(s.column("apart_ns")) / 1e9}

    # ------------------------------------------------------------------ the end of the window

    def _finish(self, t1: int) -> None:
        """The window is complete: chunk, memory, done; then the process ends, at once in the fallback
        (its step ended at a next() call), else at the training thread's next fetch, backward or
        optimizer step (so the script's own code after its optimizer step still runs, as it did up to
        the next next() in protocol 1)."""
        cpu_close = cpu.snapshot(closing=True)
        self.phase = "done"
        self.tracker.quick = 0
        self.rt.close_window(exit_pending=self.tracker.mode == "optimizer")
        self._flush()
        workers = self.rt.workers()
        self.rt.write(memory.record(self.peaks.close(self.rt.worker_meta()), self.rt.loader_infos()))
        cost = cpu.window_cost(self.cpu_open, cpu_close, (t1 - self.t0) / 1e9, workers)
        self.rt.write({"type": "done", "window_s": (t1 - self.t0) / 1e9, **self._totals(),
                       "epochs": sum(i.epoch + 1 for i in self.rt.loader_infos()),
                       "replay": self.replay is not None, "accelerator": devices.accelerator(),
                       "transfer": self._transfer_note(),
                       "copies": None if self.copies is None else self.copies.total, "cpu": cost,
                       **self.method_now(), "wait": self._wait_method(), **self.sources_summary()})
        if not self.rt.exit_pending:
            self.rt.shutdown_and_exit(0)

    def close_for_end(self) -> dict:
        """Flush what was measured and describe where the process stood (for `end`)."""
        t = now()
        tr = self.tracker
        tr.quick = 0
        if self.phase == "window":
            tr.drain(self.steps.rows)
        pending = None
        if tr.step is not None and self.phase in ("warmup", "window"):
            waiting = tr.fetching_since
            pending = {"started_ns_ago": t - tr.step.start, "waiting_for_data": waiting is not None,
                       "waiting_ns": None if waiting is None else t - waiting}
        if self.phase == "window":
            self._flush()
        if self.t0 is not None:
            phase = "window"
        elif self.rt.iterated or self.rt.orphans:
            phase = "warmup"
        else:
            phase = "no DataLoader iterated"
        self.phase = "done"
        return {"phase_at_end": phase, "warmup_taken": self.warm_steps, **self._totals(),
                "window_s_so_far": None if self.t0 is None else (t - self.t0) / 1e9,
                "pending_step": pending, "replay": self.replay is not None,
                "transfer": self._transfer_note(), **self.method_now(),
                "wait": self._wait_method()}
