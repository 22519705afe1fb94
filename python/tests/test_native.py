"""The compiled fast paths (stallscope_job/fastpath.c) record what the Python hooks record.

Each loop shape runs as a real job twice, once with the compiled hooks and once with
STALLSCOPE_JOB_HOOKS=python, and everything but the clock must agree: each step's samples, bytes,
batches and whether it had time set apart, the window's totals and its epochs. The shapes take
each branch of the compiled paths: the usual step (the quick end), an epoch's end (a fetch that
raises StopIteration), several fetches and backwards per optimizer step, a batch that is a dict
(its size read by Python), a validation pass under no_grad. A machine with no C compiler falls back
to the Python hooks, says so once, and still measures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

from stallscope_job import launch, native

SCRIPT = """
    import sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    shape = sys.argv[1]
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(80, 8), torch.randint(0, 2, (80,)))
    as_dict = lambda b: {"x": torch.stack([i[0] for i in b]), "y": torch.stack([i[1] for i in b])}
    train = DataLoader(data, batch_size=10, collate_fn=as_dict if shape == "dict" else None)
    val = DataLoader(data, batch_size=40)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    micro = 2 if shape == "accum" else 1

    def batches():
        while True:  # a new epoch each time round (8 batches an epoch)
            for b in train:
                yield (b["x"], b["y"]) if shape == "dict" else b

    it = batches()
    for step in range(200):  # the job ends the process when its window closes
        opt.zero_grad()
        for _ in range(micro):
            x, y = next(it)
            torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if shape == "val" and step % 5 == 4:
            with torch.no_grad():
                for vx, vy in val:
                    model(vx)
    sys.exit("the window never closed")
"""
SHAPES = ("plain", "accum", "dict", "val")
ENV = {"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def run(folder: Path, shape: str, extra_env: dict) -> tuple[subprocess.CompletedProcess, list[dict]]:
    out = folder / f"{shape}-{len(extra_env)}"
    out.mkdir()
    script = folder / "train.py"
    if not script.exists():
        script.write_text(textwrap.dedent(SCRIPT))
    job = launch.config(out, warmup=3, steps=20)
    env = launch.job_env(job, dict(os.environ, **ENV, **extra_env))
    proc = subprocess.run([sys.executable, str(script), shape], capture_output=True, text=True,
                          env=env, timeout=300)
    records = launch.read_records(out)
    if len(records) != 1:
        raise AssertionError(f"{shape}: expected one process's records, got {sorted(records)}; "
                             f"stderr: {proc.stderr[-2000:]}")
    return proc, next(iter(records.values()))


def measured(records: list[dict]) -> dict:
    """Everything the window recorded except the clock."""
    series = launch.steps_series(records)
    done = next(r for r in records if r["type"] == "done")
    return {
        "samples": series["samples"], "bytes": series["bytes"], "batches": series["batches"],
        "apart": [a > 0 for a in series["apart_ns"]],
        "done": {k: done[k] for k in ("steps", "samples", "batches", "epochs")},
        "epochs": [(e["epoch"], e["at_step"], e["phase"]) for e in records if e["type"] == "epoch"],
    }


class CompiledHooks(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="stallscope-native-"))

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp)

    def test_they_build_and_load_here(self) -> None:
        """The test machine has a C compiler and Python's headers: the compiled paths are tested."""
        self.assertIsNotNone(native.load(), native.WHY)
        self.assertEqual(native.hooks(), "compiled")

    def test_every_shape_records_the_same_both_ways(self) -> None:
        for shape in SHAPES:
            with self.subTest(shape=shape):
                proc_c, compiled = run(self.tmp, shape, {})
                proc_p, python = run(self.tmp, shape, {"STALLSCOPE_JOB_HOOKS": "python"})
                self.assertEqual((proc_c.returncode, proc_p.returncode), (0, 0), proc_c.stderr + proc_p.stderr)
                self.assertEqual(compiled[0]["hooks"], "compiled")
                self.assertEqual(python[0]["hooks"], "python: STALLSCOPE_JOB_HOOKS=python")
                self.assertNotIn("error", [r["type"] for r in compiled])
                got, want = measured(compiled), measured(python)
                self.assertEqual(got, want)
                self.assertEqual(got["done"]["steps"], 20)
                per_step = 20 if shape == "accum" else 10
                self.assertEqual(set(got["samples"]), {per_step}, shape)
                if shape == "plain":
                    self.assertTrue(got["epochs"], "the window crosses an epoch's end")
                if shape == "val":
                    self.assertTrue(any(got["apart"]), "the validation passes are set apart")

    def test_no_compiler_falls_back_and_says_so(self) -> None:
        """No compiler on the PATH and an empty cache: the Python hooks, one stderr line, a window."""
        cache = self.tmp / "empty-cache"
        cache.mkdir()
        env = {"PATH": str(self.tmp / "no-bin"), "XDG_CACHE_HOME": str(cache)}
        proc, records = run(self.tmp, "plain", env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertTrue(records[0]["hooks"].startswith("python: "), records[0]["hooks"])
        self.assertEqual(proc.stderr.count("stallscope: compiled hooks unavailable ("), 1, proc.stderr)
        self.assertEqual(measured(records)["done"]["steps"], 20)


if __name__ == "__main__":
    unittest.main()
