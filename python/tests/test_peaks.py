"""Peak memory has one meaning (python/stallscope_steps/peaks.py): the window's (or epoch's) own.

In this process: the reset and the read on this process and on a child of the same user; a refused
reset says so; a window that allocates a large buffer, then one that does not, the second's peak
lower. Through the peers harness, for every engine it runs here (pytorch, spdl, dali, nodes): the
harness allocates 256 MiB in epoch 0 (STALLSCOPE_HARNESS_FAULT=alloc@0:1), and epoch 1's peak is
lower by most of it (`ru_maxrss`, which the harness read before, would have been the same). With
persistent pytorch workers, a worker that allocates in epoch 0 only has a lower peak in epoch 1.
The job's side is in test_job.py (PeakMemory).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import textwrap
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import test_harness as th  # the shared helpers; its TestCases stay in test_harness

sys.path.insert(0, str(th.PYTHON_DIR))

from stallscope_steps import peaks  # noqa: E402

MiB = 1 << 20
BIG = 192 * MiB


def touch(size: int) -> None:
    """Make `size` bytes resident for a moment (every page written), then free them."""
    block = bytearray(size)
    for i in range(0, size, 4096):
        block[i] = 1
    del block


class InProcess(unittest.TestCase):
    def test_a_window_that_allocates_then_one_that_does_not(self):
        window = peaks.Window()
        window.open({})
        touch(BIG)
        first = window.close({}, detail=False)["main"]
        window.open({})
        second = window.close({}, detail=False)["main"]
        self.assertEqual((first["peak_since"], second["peak_since"]), ("window", "window"))
        self.assertGreater(first["peak_rss_bytes"] - second["peak_rss_bytes"], BIG * 3 // 4,
                           (first, second))

    def test_a_child_of_the_same_user_is_reset_too(self):
        """A forked child allocates, waits; its peak is reset from here, and read again."""
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: allocate, say so, wait to be told to end
            try:
                touch(BIG)
                os.write(ready_w, b"x")
                os.read(go_r, 1)
            finally:
                os._exit(0)
        try:
            os.read(ready_r, 1)
            before = peaks.peak(pid)
            self.assertGreater(before, BIG * 3 // 4)
            window = peaks.Window()
            window.open({pid: {"loader": 0, "worker_id": 0, "group": 0}})
            self.assertEqual(window.refused, {})
            entry = window.close({pid: {"loader": 0, "worker_id": 0, "group": 0}}, detail=False)["workers"][0]
            self.assertEqual(entry["peak_since"], "window")
            self.assertLess(entry["peak_rss_bytes"], before - BIG // 2)
        finally:
            os.write(go_w, b"x")
            os.waitpid(pid, 0)

    def test_a_refused_reset_says_so_and_keeps_the_longer_peak(self):
        gone = max(peaks.parents()) + 100_000  # no such process
        why = peaks.reset(gone)
        self.assertRegex(why, rf"^/proc/{gone}/clear_refs: (FileNotFoundError|PermissionError): ")
        window = peaks.Window()
        window.open({gone: {"loader": 0, "worker_id": 0, "group": 0}})
        entry = window.workers[gone]
        self.assertEqual(entry["peak_since"], f"process start ({why})")
        self.assertEqual(window.refused, {gone: why})

    def test_the_workers_peak_sums_one_set_per_loader(self):
        workers = [
            {"loader": 0, "group": 0, "peak_rss_bytes": 10},  # loader 0, epoch 0's two workers
            {"loader": 0, "group": 0, "peak_rss_bytes": 20},
            {"loader": 0, "group": 1, "peak_rss_bytes": 25},  # epoch 1's: a larger single peak
            {"loader": 0, "group": 1, "peak_rss_bytes": 1},
            {"loader": 1, "group": 0, "peak_rss_bytes": 7},
            {"loader": 1, "group": 0, "peak_rss_bytes": None},  # unreadable: left out
        ]
        self.assertEqual(peaks.workers_peak(workers), 30 + 7)
        self.assertIsNone(peaks.workers_peak([]))

    def test_the_tree_walk_finds_what_a_scan_finds(self):
        pid = os.fork()
        if pid == 0:
            os.read(os.open(os.devnull, os.O_RDONLY), 1)  # returns at once: exit
            import time
            time.sleep(5)
            os._exit(0)
        try:
            walked = peaks.tree()
            scanned = peaks._tree_by_scan(os.getpid())
            self.assertIn(pid, walked)
            self.assertEqual(walked, scanned)
        finally:
            os.kill(pid, 9)
            os.waitpid(pid, 0)


ENGINES = ("pytorch", "spdl", "dali", "nodes")

WORKER_DATASET = '''
    import os
    import torch

    BIG = 192 << 20


    class Allocating(torch.utils.data.Dataset):
        """Sample 0 makes its process 192 MiB larger for a moment, the first time in each process (the
        harness reads sample 0 itself before it forks the workers)."""

        done_in = None

        def __len__(self):
            return 32

        def __getitem__(self, i):
            if i == 0 and Allocating.done_in != os.getpid():
                Allocating.done_in = os.getpid()
                block = bytearray(BIG)
                for j in range(0, BIG, 4096):
                    block[j] = 1
                del block
            return torch.randn(8), i % 4


    def make():
        return Allocating()
'''


class ThroughTheHarness(unittest.TestCase):
    """Every engine's epochs, each line's peaks its own (runs concurrently, once)."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="stallscope-peaks-test-"))
        th.HarnessTest._make_data.__func__(cls)  # x.f32, y.i64 (40 x 8), images, FashionMNIST
        (cls.tmp / "alloc_dataset.py").write_text(textwrap.dedent(WORKER_DATASET))
        tensor = {"kind": "tensor", "inputs": str(cls.tmp / "x.f32"), "labels": str(cls.tmp / "y.i64"),
                  "samples": 40, "features": 8}
        linear = {"name": "linear", "features": 8, "classes": 4}
        # One worker (DALI runs its operators on >= 1 threads; the others then use a process or thread).
        loader = dict(th.loader(batch_size=8, workers=1), dali_device="cpu", worker_kind="threads")
        cases = {engine: (th.request(tensor, linear, th.shuffled_batches(40, 8, 2, 1), engine=engine,
                                     modes=("whole_run",), loader=loader), "alloc@0:1")
                 for engine in ENGINES}
        source = {"kind": "python", "factory": "alloc_dataset:make", "path": [str(cls.tmp)], "args": {}}
        cases["pytorch_workers"] = (th.request(
            source, {"name": "none"}, th.shuffled_batches(32, 8, 2, 2), modes=("whole_run",),
            optimizer=None, loader=th.loader(batch_size=8, workers=2, persistent=True)), None)
        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {name: pool.submit(th.run_harness, req, fault) for name, (req, fault) in cases.items()}
            cls.results = {name: f.result() for name, f in futures.items()}

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def epochs(self, name: str) -> list[dict]:
        status, lines, err = self.results[name]
        if status != 0 and any('"missing"' in line for line in lines):
            self.fail(f"{name}: the engine's package is missing ({lines[-1]}): cargo xtask setup --peers")
        self.assertEqual(status, 0, f"{name}: {err[-3000:]}")
        epochs = [json.loads(line) for line in lines if '"type": "epoch"' in line or '"type":"epoch"' in line]
        self.assertEqual([e["epoch"] for e in epochs], [0, 1], name)
        return epochs

    def check_engine(self, engine: str) -> None:
        first, second = self.epochs(engine)
        for e in (first, second):
            self.assertEqual(e["memory"]["main"]["peak_since"], "window", engine)
            self.assertEqual(e["host_peak_rss_bytes"], e["memory"]["main"]["peak_rss_bytes"], engine)
        drop = first["host_peak_rss_bytes"] - second["host_peak_rss_bytes"]
        self.assertGreater(drop, 200 * MiB, f"{engine}: epoch 0 allocated 256 MiB, epoch 1 did not: "
                                            f"{first['host_peak_rss_bytes']} then {second['host_peak_rss_bytes']}")

    def test_pytorch(self):
        self.check_engine("pytorch")

    def test_spdl(self):
        self.check_engine("spdl")

    def test_dali(self):
        self.check_engine("dali")

    def test_nodes(self):
        self.check_engine("nodes")

    def test_persistent_pytorch_workers(self):
        """The same two worker processes in both epochs; one allocated in epoch 0 only."""
        first, second = self.epochs("pytorch_workers")
        pids = [sorted(w["pid"] for w in e["memory"]["workers"]) for e in (first, second)]
        self.assertEqual(pids[0], pids[1])
        self.assertEqual(len(pids[0]), 2)
        # Started inside epoch 0 (their peak is their life's), reset when epoch 1 opened.
        for e, since in ((first, peaks.STARTED_INSIDE), (second, peaks.WINDOW)):
            for w in e["memory"]["workers"]:
                self.assertEqual((w["ended"], w["peak_since"]), (False, since))
        top = [max(w["peak_rss_bytes"] for w in e["memory"]["workers"]) for e in (first, second)]
        self.assertGreater(top[0] - top[1], 150 * MiB, top)
        self.assertGreater(first["children_peak_rss_bytes"] - second["children_peak_rss_bytes"], 150 * MiB)


if __name__ == "__main__":
    unittest.main()
