"""Python's step loops make the same calls, in the same order, as the runner's one loop.

Both sides check fixtures/loop/contract.json: runner/core/src/measure/tests.rs for the Rust loop
(runner/core/src/measure/mod.rs), this file for Python's one step clock
(python/stallscope_steps/clock.py) in both of its clients:

- the peers harness's loops (python/stallscope_peer/loop.py), which own their loop: their calls
  are the contract's, `before` + `step` per step + `after`;
- the job's hooks on a user's training loop (python/stallscope_job/), run here in this process on
  a real DataLoader, model and optimizer, with the device wait logged: from the window's opening
  to its close, the steps make the contract's `step` calls (an optimizer's) or `loader_only_step`
  (the fallback, with no optimizer), in both timing modes. The job's window is not an epoch: it
  opens at a step boundary (the contract's `before` less `start`) and closes at its last step's
  end (`after` less `end`); an epoch's start and end fall inside its steps, as data wait.

A wait that follows another with no device work between them is one (the job waits around each
stage it cannot see the neighbours of: before its data wait, before a copy); so are the inputs'
and labels' copies.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import tempfile
import unittest
from unittest import mock

import torch
from torch.utils.data import DataLoader

from stallscope_job import copies, launch, patches, runtime, window
from stallscope_job.config import parse
from stallscope_job.training import FALLBACK_AFTER
from stallscope_peer import loop
from stallscope_steps import devices

CONTRACT = json.loads((pathlib.Path(__file__).resolve().parents[2]
                       / "fixtures" / "loop" / "contract.json").read_text())


class Log(list):
    def add(self, call: str) -> None:
        # The inputs' and the labels' copies are one stage; two waits in a row are one.
        if not (call in ("copy", "sync") and self and self[-1] == call):
            self.append(call)


class FakeTensor:
    """Just enough of a tensor for the loop: its copy is logged, its size counted."""

    def __init__(self, log: Log, rows: int) -> None:
        self.log, self.shape = log, (rows, 4)

    def to(self, *_args, **_kwargs):
        self.log.add("copy")
        return self

    def numel(self) -> int:
        return self.shape[0] * self.shape[1]

    def element_size(self) -> int:
        return 4


class FakeLoader:
    def __init__(self, log: Log, sizes: list[int]) -> None:
        self.log, self.sizes = log, sizes

    def __iter__(self):
        self.log.add("start")
        for rows in self.sizes:
            self.log.add("next")
            yield FakeTensor(self.log, rows), FakeTensor(self.log, rows)
        self.log.add("end")


class FakeCtx:
    device = "cpu"
    non_blocking = False

    def __init__(self, log: Log) -> None:
        self.log = log

    def sync(self) -> None:
        self.log.add("sync")


class FakeTrainer:
    ranks = None

    def __init__(self, log: Log) -> None:
        self.log = log

    def step(self, _x, _y) -> None:
        self.log.add("compute")


class LoopContract(unittest.TestCase):
    def check(self, mode: str, sizes: list[int], with_model: bool) -> None:
        log = Log()
        timed = loop.whole_run_epoch if mode == "whole_run" else loop.diagnostic_epoch
        trainer = FakeTrainer(log) if with_model else None
        with mock.patch.object(loop, "_check_batch", lambda _batch: None):
            result = timed(FakeLoader(log, sizes), trainer, FakeCtx(log), "epoch")
        want = CONTRACT[mode]
        step = want["step"] if with_model else want["loader_only_step"]
        expected = want["before"] + step * len(sizes) + want["after"]
        self.assertEqual(list(log), expected, f"{mode}, model: {with_model}, {len(sizes)} steps")
        self.assertEqual(result.steps, len(sizes))
        self.assertEqual(result.samples, sum(sizes))

    def test_both_modes_match_the_contract(self) -> None:
        for mode in ("whole_run", "diagnostic"):
            for sizes in ([], [3], [5, 5, 2]):
                for with_model in (True, False):
                    self.check(mode, sizes, with_model)


class LoggedSamples(torch.utils.data.Dataset):
    """Samples in batches of 2 (in order): a batch's fetch is logged as `next`, inside next(), where
    the loader really works."""

    def __init__(self, log: Log, n: int) -> None:
        self.log, self.n = log, n
        self.x, self.y = torch.randn(n, 4), torch.randint(0, 2, (n,))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if i % 2 == 0:
            self.log.add("next")
        return self.x[i], self.y[i]


class WindowDone(BaseException):
    """Stands for the job's exit at the window's end (a BaseException: the runtime lets it through)."""


OPEN = "(window opens)"


class JobContract(unittest.TestCase):
    """The job's hooks, in this process, on a real training loop (everything undone after)."""

    def run_job(self, mode: str, steps: int, with_optimizer: bool) -> list[str]:
        log = Log()
        tmp = tempfile.TemporaryDirectory(prefix="stallscope-contract-")
        self.addCleanup(tmp.cleanup)
        config = parse(json.dumps(launch.config(tmp.name, mode=mode, warmup=2, steps=steps)))
        rt = runtime.Runtime(config, os.getcwd(), lifecycle_hooks=False)
        sigterm = signal.getsignal(signal.SIGTERM)
        original_open = window.Session._open

        def opening(session):
            log.append(OPEN)
            original_open(session)

        def done(_status):
            raise WindowDone

        # A copy to the meta device stands for a host-to-device copy (this machine has no
        # accelerator): only the CPU is host here.
        with mock.patch.object(devices, "sync", lambda: log.add("sync")), \
                mock.patch.object(copies, "_HOST", ("cpu",)), \
                mock.patch.object(window.Session, "_open", opening), \
                mock.patch.object(rt, "shutdown_and_exit", done):
            patches.dataloader(rt, torch.utils.data.dataloader, rt.patches)
            try:
                self.train(log, with_optimizer, steps)
            except WindowDone:
                pass
            else:
                self.fail(f"{mode}: the window never closed; records: "
                          f"{[r['type'] for rs in launch.read_records(tmp.name).values() for r in rs]}")
            finally:
                if rt.session is not None and rt.session.copies is not None:
                    rt.session.copies.uninstall()
                rt.patches.undo()
                signal.signal(signal.SIGTERM, sigterm)
        self.assertIn(OPEN, log, f"{mode}: the window did not open")
        return log

    @staticmethod
    def train(log: Log, with_optimizer: bool, steps: int) -> None:
        batches = 2 * (steps + FALLBACK_AFTER + 10)
        torch.manual_seed(0)
        loader = DataLoader(LoggedSamples(log, batches * 2), batch_size=2)
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.01) if with_optimizer else None
        it = iter(loader)
        while True:
            x, y = next(it)
            if opt is None:  # the fallback's loop: only the loader (the contract's loader-only step)
                continue
            log.add("copy")
            x.to("meta")
            y.to("meta")
            log.add("compute")
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()

    def check(self, mode: str, with_optimizer: bool, steps: int = 3) -> None:
        log = self.run_job(mode, steps, with_optimizer)
        want = CONTRACT[mode]
        step = want["step"] if with_optimizer else want["loader_only_step"]
        before = [c for c in want["before"] if c != "start"]
        after = [c for c in want["after"] if c != "end"]
        expected = before + step * steps + after
        got = log[log.index(OPEN) + 1:]
        self.assertEqual(Log(got), Log(expected), f"job, {mode}, optimizer: {with_optimizer}")

    def test_optimizer_steps_match_the_contract(self) -> None:
        for mode in ("whole_run", "diagnostic"):
            self.check(mode, with_optimizer=True)

    def test_the_fallback_loop_matches_the_contract(self) -> None:
        for mode in ("whole_run", "diagnostic"):
            self.check(mode, with_optimizer=False)


if __name__ == "__main__":
    unittest.main()
