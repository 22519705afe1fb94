"""The harness's timed loops make the same calls, in the same order, as the runner's one loop.

Both sides check fixtures/loop/contract.json: runner/src/measure/tests.rs for the Rust loop,
this file for python/stallscope_peer/loop.py, so a boundary moved on one side fails a test.
"""

from __future__ import annotations

import json
import pathlib
import unittest
from unittest import mock

from stallscope_peer import loop

CONTRACT = json.loads((pathlib.Path(__file__).resolve().parents[2]
                       / "fixtures" / "loop" / "contract.json").read_text())


class Log(list):
    def add(self, call: str) -> None:
        # The inputs' and the labels' copies are one stage.
        if not (call == "copy" and self and self[-1] == "copy"):
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


if __name__ == "__main__":
    unittest.main()
