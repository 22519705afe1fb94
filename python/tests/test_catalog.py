"""The ground-truth catalog: stallscope's step and wait against each training script's own clock.

Every script of fixtures/job/catalog/ is a real training loop of one shape (plain, a
background-thread buffer, gradient accumulation, two loaders zipped, a validation loader, a
generator that fetches ahead, `iter()` again at each epoch, an IterableDataset with workers,
MONAI's ThreadDataLoader, accelerate, the transformers Trainer, Lightning) that times its own
training thread (fixtures/job/catalog/truth.py: a step from one optimizer step's end to the
next, its wait the time that thread is blocked getting its batches) and writes one line per
step. Each runs in two regimes (input-bound, compute-bound) and, as the runner runs a unit, once
per timing mode (`launch.config` and `launch.job_env`: one process each).

Per shape, regime and mode: stallscope's window opens in the script's step `warmup` and closes
at the end of its step `warmup + steps - 1` (each record's `mono_ns` against the end of each of
the script's steps, the same clock); over the window (stallscope's step j is the script's step
warmup + j, from j = 1: see `Figures._pair`), stallscope's wait share (its data waits summed over
its step times summed) is within 5 percentage points of the script's own, its mean step within
5% of the script's, and the samples its steps count are the script's. The script's figures come from the
script each run; nothing expected is written here. A shape whose package is missing fails with
the command that installs it (CI installs them with `cargo xtask setup --peers`).

The units run STALLSCOPE_TEST_JOBS at a time (3 by default: most of a unit is importing torch
and the packages). OMP_NUM_THREADS=1 in every unit: units share a small machine, and OpenMP's
spinning threads would make the model's step erratic (both clocks would see it; the runs would
only get slower). At the end a table of every unit's figures goes to stderr.
STALLSCOPE_CATALOG=plain,zipped (shape names, comma-separated) runs only those shapes' tests.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
CATALOG = REPO / "fixtures" / "job" / "catalog"
sys.path.insert(0, str(PYTHON_DIR))

from stallscope_job import launch  # noqa: E402

WARMUP, STEPS = 5, 20
SHARE_POINTS, STEP_RATIO = 0.05, 0.05
# An input-bound unit whose own training thread waited less than this was slowed by a busy machine.
BUSY_SHARE = 0.25
MODES = ("whole_run", "diagnostic")
REGIMES = ("input", "compute")
TIMEOUT_S = 240
BASE_ENV = {"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1", "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1", "TOKENIZERS_PARALLELISM": "false"}
# shape -> the Python modules it needs beyond torch. Slowest to start first.
SHAPES = {
    "monai_thread": ("monai",),
    "lightning_fit": ("lightning",),
    "hf_trainer": ("transformers", "accelerate"),
    "accelerate_loop": ("accelerate",),
    "plain": (),
    "thread_buffer": (),
    "grad_accum": (),
    "zipped": (),
    "validation": (),
    "generator_ahead": (),
    "iter_again": (),
    "iterable_workers": (),
}
if os.environ.get("STALLSCOPE_CATALOG"):
    _chosen = os.environ["STALLSCOPE_CATALOG"].split(",")
    _unknown = sorted(set(_chosen) - set(SHAPES))
    if _unknown:
        raise ValueError(f"STALLSCOPE_CATALOG: unknown shapes {_unknown} (expected some of {list(SHAPES)})")
    SHAPES = {name: needs for name, needs in SHAPES.items() if name in _chosen}


def install_command(modules: tuple[str, ...]) -> str:
    """`pip install` of the modules at the versions `cargo xtask setup --peers` pins (xtask/src/peers.rs)."""
    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', (REPO / "xtask/src/peers.rs").read_text()))
    wanted = [f"{m}=={pins[m]}" if m in pins else m for m in modules]
    return f"cargo xtask setup --peers (or: {sys.executable} -m pip install {' '.join(wanted)})"


class Unit:
    """One script run under the instrumentation: its records and its own truth lines."""

    def __init__(self, shape: str, regime: str, mode: str, folder: Path) -> None:
        self.shape, self.regime, self.mode = shape, regime, mode
        self.out, self.truth_dir = folder / "out", folder / "truth"
        self.out.mkdir(parents=True)
        self.truth_dir.mkdir()
        self.folder = folder
        self.status = self.stderr = self.seconds = None

    @property
    def name(self) -> str:
        return f"{self.shape}/{self.regime}/{self.mode}"

    def run(self) -> "Unit":
        job = launch.config(self.out, mode=self.mode, warmup=WARMUP, steps=STEPS, unit=self.name)
        env = launch.job_env(job, dict(os.environ, **BASE_ENV, STALLSCOPE_TRUTH=str(self.truth_dir)))
        # Enough steps that a window counted in micro-batches or batches still closes before the
        # script ends on its own; a window that never closes leaves no `done` (and fails).
        argv = [sys.executable, str(CATALOG / f"{self.shape}.py"), "--regime", self.regime,
                "--steps", str(2 * (WARMUP + STEPS) + 10)]
        t0 = time.monotonic()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT_S,
                                  cwd=str(self.folder))
            self.status, self.stderr = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            tail = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else e.stderr or ""
            self.stderr = f"{tail}\n(killed: still running after {TIMEOUT_S} s)"
        self.seconds = time.monotonic() - t0
        return self


class Figures:
    """The window's figures of one unit: stallscope's, the script's, and where the window opened."""

    def __init__(self, unit: Unit) -> None:
        self.unit = unit
        by_pid = launch.read_records(unit.out)
        done = [pid for pid, records in by_pid.items() if any(r["type"] == "done" for r in records)]
        if len(done) != 1:
            raise AssertionError(f"{unit.name}: expected one process to complete the window, got "
                                 f"{len(done)} (exit status {unit.status}; records of "
                                 f"{ {pid: [r['type'] for r in rs][-6:] for pid, rs in by_pid.items()} }); "
                                 f"stderr: {unit.stderr[-3000:]}")
        self.pid = done[0]
        self.records = by_pid[self.pid]
        self.series = launch.steps_series(self.records)
        self.truth = self._truth_lines()
        self._pair()

    def _truth_lines(self) -> dict[int, dict]:
        path = self.unit.truth_dir / f"truth-{self.pid}.jsonl"
        if not path.exists():
            raise AssertionError(f"{self.unit.name}: the script wrote no truth for process {self.pid} "
                                 f"({sorted(p.name for p in self.unit.truth_dir.iterdir())}); "
                                 f"stderr: {self.unit.stderr[-2000:]}")
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        return {line["step"]: line for line in lines}

    def _pair(self) -> None:
        """stallscope's window step j against the script's step WARMUP + j, for j from 1.

        Step 0 of the window is left out on both sides: stallscope opens its window at that
        step's start with work of its own that it keeps off its clock by design (reading the
        processes' memory and CPU times: docs/job-protocol.md says about 1 ms), and the script's
        clock cannot tell that work from its own step. Measured here against the script's step:
        1-7 ms, and up to 58-84 ms on a machine at load 10-12, which alone moved a 20-step
        window's mean step by 7%. The script writes a step's line at its optimizer's own
        post-hook; if stallscope ends the process inside that optimizer step before the hook, the
        window's last line is missing: that step is left out on both sides too. Nothing else may
        be missing."""
        wait_key = "next_wait_ns" if self.unit.mode == "diagnostic" else "next_ns"
        steps, waits = self.series.get("step_ns", []), self.series.get(wait_key, [])
        if len(steps) != STEPS or len(waits) != STEPS:
            raise AssertionError(f"{self.unit.name}: stallscope's window has {len(steps)} steps and "
                                 f"{len(waits)} {wait_key}, expected {STEPS}")
        pairs = [(j, WARMUP + j) for j in range(1, STEPS) if WARMUP + j in self.truth]
        if [t for _, t in pairs[:STEPS - 2]] != list(range(WARMUP + 1, WARMUP + STEPS - 1)):
            raise AssertionError(f"{self.unit.name}: the script's truth lacks window steps: it has "
                                 f"steps {_span(self.truth)} for the window's "
                                 f"{WARMUP}..{WARMUP + STEPS - 1}; {self.where()}")
        ours = [self.truth[t] for _, t in pairs]
        self.steps = len(pairs)
        self.s_step = sum(steps[j] for j, _ in pairs)
        self.s_wait = sum(waits[j] for j, _ in pairs)
        self.t_step = sum(line["step_ns"] for line in ours)
        self.t_wait = sum(line["wait_ns"] for line in ours)
        self.apart = sum((self.series.get("apart_ns") or [0] * STEPS)[j] for j, _ in pairs)
        # The step whose figures differ most between the two clocks (for the failure's message).
        self.worst = max((abs(steps[j] - line["step_ns"]) + abs(waits[j] - line["wait_ns"]), t,
                          steps[j], line["step_ns"], waits[j], line["wait_ns"])
                         for (j, t), line in zip(pairs, ours))
        samples = self.series.get("samples", [])
        self.s_samples = sum(samples[j] or 0 for j, _ in pairs) if len(samples) == STEPS else None
        self.t_samples = sum(line["samples"] for line in ours)

    @property
    def s_share(self) -> float:
        return self.s_wait / self.s_step

    @property
    def t_share(self) -> float:
        return self.t_wait / self.t_step

    @property
    def step_ratio(self) -> float:
        return self.s_step / self.t_step

    def _in_step(self, kind: str) -> int | None:
        """The script's step in which stallscope's first `kind` record was made (None: after the last)."""
        record = next((r for r in self.records if r["type"] == kind), None)
        if record is None:
            return None
        ends = sorted((line["end_ns"], step) for step, line in self.truth.items())
        return next((step for end, step in ends if end >= record["mono_ns"]), None)

    def aligned(self) -> bool:
        """The window opened in the script's step WARMUP and closed at the end of its step
        WARMUP + STEPS - 1 (or inside it, when the process ended before that step's line)."""
        last = WARMUP + STEPS - 1
        closed = self._in_step("done")
        return (self._in_step("window") == WARMUP
                and (closed == last or (closed is None and max(self.truth) == last)))

    def where(self) -> str:
        """Where stallscope's window opened and closed, in the script's steps."""
        opened, closed = self._in_step("window"), self._in_step("done")
        closed = f"after step {max(self.truth)}" if closed is None else f"in step {closed}"
        return (f"the window opened in the script's step {opened} and closed {closed} "
                f"(expected {WARMUP}, and {WARMUP + STEPS - 1} or after it)")

    def describe(self) -> str:
        _, step, s_step, t_step, s_wait, t_wait = self.worst
        return (f"{self.unit.name}: stallscope's wait share {self.s_share:.1%} against the training "
                f"thread's {self.t_share:.1%}; mean step {self.s_step / self.steps / 1e6:.1f} ms "
                f"against {self.t_step / self.steps / 1e6:.1f} ms ({self.step_ratio:.2f}x) over "
                f"{self.steps} steps (the script's {WARMUP + 1}..); {self.where()}; stallscope took "
                f"{self.apart / 1e6:.1f} ms apart (validation); the two clocks differ most at the "
                f"script's step {step}: step {s_step / 1e6:.2f} against {t_step / 1e6:.2f} ms, wait "
                f"{s_wait / 1e6:.2f} against {t_wait / 1e6:.2f} ms")


_POOL: ThreadPoolExecutor | None = None
_ROOT: Path | None = None
_UNITS: dict[tuple[str, str, str], object] = {}
_STARTED = 0.0


def _span(steps) -> str:
    return f"{min(steps)}..{max(steps)}" if steps else "none"


def missing(shape: str) -> list[str]:
    return [m for m in SHAPES[shape] if importlib.util.find_spec(m) is None]


def setUpModule() -> None:
    global _POOL, _ROOT, _STARTED
    _STARTED = time.monotonic()
    _ROOT = Path(tempfile.mkdtemp(prefix="stallscope-catalog-"))
    _POOL = ThreadPoolExecutor(int(os.environ.get("STALLSCOPE_TEST_JOBS", "3")))
    for shape in SHAPES:
        if missing(shape):
            continue
        for regime in REGIMES:
            for mode in MODES:
                unit = Unit(shape, regime, mode, _ROOT / shape / regime / mode)
                _UNITS[shape, regime, mode] = _POOL.submit(unit.run)


def tearDownModule() -> None:
    _POOL.shutdown(wait=True)
    print_table()
    shutil.rmtree(_ROOT)


def print_table() -> None:
    """Every unit's figures, on stderr (100 columns)."""
    rows = [f"{'shape/regime/mode':<34} {'share':>7} {'truth':>7} {'diff':>6} {'step ms':>8} "
            f"{'truth':>7} {'ratio':>6} {'run s':>6}"]
    input_shares = []
    for key, future in _UNITS.items():
        unit = future.result()
        try:
            f = Figures(unit)
        except Exception as e:  # the unit's own test reports it in full
            why = str(e).split(": ", 1)[-1]
            rows.append(f"{unit.name:<34} no figures: {why[:46]:<46} {unit.seconds:>6.1f}")
            continue
        if unit.regime == "input":
            input_shares.append((unit.name, f.t_share))
        rows.append(f"{unit.name:<34} {f.s_share:>7.1%} {f.t_share:>7.1%} "
                    f"{(f.s_share - f.t_share) * 100:>+6.1f} {f.s_step / f.steps / 1e6:>8.1f} "
                    f"{f.t_step / f.steps / 1e6:>7.1f} {f.step_ratio:>6.2f} {unit.seconds:>6.1f}")
    busy = [name for name, share in input_shares if share < BUSY_SHARE]
    if busy:
        rows.append(textwrap.fill(
            f"Input-bound units whose own thread waited under {BUSY_SHARE:.0%} of its steps (the "
            f"machine was too busy for the regime; the two clocks still compare): {', '.join(busy)}",
            width=100))
    rows.append(f"catalog: {len(_UNITS)} units in {time.monotonic() - _STARTED:.0f} s")
    print("\n" + "\n".join(rows), file=sys.stderr)


class Catalog(unittest.TestCase):
    """One test per shape, regime and timing mode (generated below)."""

    def check(self, shape: str, regime: str, mode: str) -> None:
        lacking = missing(shape)
        if lacking:
            self.fail(f"{shape}.py needs {', '.join(lacking)}, which this Python "
                      f"({sys.executable}) lacks: {install_command(SHAPES[shape])}")
        unit = _UNITS[shape, regime, mode].result()
        self.assertEqual(unit.status, 0, f"{unit.name}: exit status {unit.status}; stderr: "
                                         f"{unit.stderr[-3000:]}")
        f = Figures(unit)
        self.assertTrue(f.aligned(), f"the window is not the script's steps {WARMUP}.."
                                     f"{WARMUP + STEPS - 1}: {f.describe()}")
        self.assertLessEqual(abs(f.s_share - f.t_share), SHARE_POINTS,
                             f"wait share off by more than {SHARE_POINTS:.0%} points: {f.describe()}")
        self.assertLessEqual(abs(f.step_ratio - 1), STEP_RATIO,
                             f"mean step off by more than {STEP_RATIO:.0%}: {f.describe()}")
        self.assertEqual(f.s_samples, f.t_samples,
                         f"samples over the window's {f.steps} steps: {f.describe()}")


def _test(shape: str, regime: str, mode: str):
    def test(self: Catalog) -> None:
        self.check(shape, regime, mode)
    test.__doc__ = f"{shape}.py, {regime}-bound, {mode}: stallscope's share and step against the script's own"
    return test


for _shape in SHAPES:
    for _regime in REGIMES:
        for _mode in MODES:
            setattr(Catalog, f"test_{_shape}_{_regime}_{_mode}", _test(_shape, _regime, _mode))


if __name__ == "__main__":
    unittest.main()
