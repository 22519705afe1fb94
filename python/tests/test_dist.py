"""Ranks in the harness: real DDP over torch.distributed (Gloo), built on a real c10d TCPStore.

The runner of rank 0 serves that store; here the test serves one itself with
torch's own `TCPStore`, so every part the runner relies on is the real one.
"""

from __future__ import annotations

import datetime
import json
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

import numpy as np
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_harness import PYTHON_DIR, REPO, TIMEOUT_S, request  # noqa: E402

SAMPLES, FEATURES, BATCH = 64, 8, 8


def shard(samples: int, rank: int, world: int) -> list[int]:
    """DistributedSampler without shuffle: pad by wrapping, then stride by rank."""
    total = -(-samples // world) * world
    order = list(range(samples)) + list(range(samples))[: total - samples]
    return order[rank:total:world]


def batches_for(rank: int, world: int, epochs: int) -> list[list[list[int]]]:
    mine = shard(SAMPLES, rank, world)
    return [[mine[i:i + BATCH] for i in range(0, len(mine), BATCH)] for _ in range(epochs)]


def start(req: dict) -> subprocess.Popen:
    """The harness on its request, running (the ranks must run at once)."""
    env = {"PYTHONPATH": str(PYTHON_DIR), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    with tempfile.TemporaryFile("w+") as f:
        json.dump(req, f)
        f.seek(0)
        return subprocess.Popen([sys.executable, "-m", "stallscope_peer"], stdin=f,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env, cwd=str(REPO))


def finish(p: subprocess.Popen) -> tuple[int, list[dict], str]:
    out, err = p.communicate(timeout=TIMEOUT_S)
    return p.returncode, [json.loads(x) for x in out.splitlines()], err


class DistTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="stallscope-dist-test-"))
        rng = np.random.default_rng(1)
        rng.standard_normal((SAMPLES, FEATURES)).astype("<f4").tofile(cls.tmp / "x.f32")
        (np.arange(SAMPLES) % 4).astype("<i8").tofile(cls.tmp / "y.i64")
        cls.source = {"kind": "tensor", "inputs": str(cls.tmp / "x.f32"),
                      "labels": str(cls.tmp / "y.i64"), "samples": SAMPLES,
                      "features": FEATURES}
        cls.model = {"name": "linear", "features": FEATURES, "classes": 4}
        # The store the runner of rank 0 would serve.
        cls.store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                  timeout=datetime.timedelta(seconds=30))

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def req(self, rank: int, world: int, prefix: str, timeout_s: float = 30.0) -> dict:
        r = request(self.source, self.model, batches_for(rank, world, 2))
        r["dist"] = {"rank": rank, "world_size": world, "master_addr": "127.0.0.1",
                     "master_port": self.store.port, "prefix": prefix, "timeout_s": timeout_s}
        return r

    def test_two_ranks_average_their_gradients_and_time_the_all_reduce(self) -> None:
        procs = [start(self.req(r, 2, "two/")) for r in range(2)]
        results = [finish(p) for p in procs]
        for rank, (rc, lines, err) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {rank}: {err[-2000:]}")
            diag = [x for x in lines if x["type"] == "epoch" and x["mode"] == "diagnostic"]
            self.assertEqual(len(diag), 2)
            for e in diag:
                self.assertEqual(len(e["comm_ns"]), e["steps"])
                self.assertEqual(len(e["compute_ns"]), e["steps"])
                self.assertTrue(all(c > 0 for c in e["comm_ns"]), e["comm_ns"])
            whole = [x for x in lines if x["type"] == "epoch" and x["mode"] == "whole_run"]
            self.assertTrue(whole and all("comm_ns" not in x for x in whole))
        digests = [lines[-1]["weights"] for _, lines, _ in results]
        # Different shards, one averaged gradient: the weights agree after every mode.
        self.assertEqual(digests[0], digests[1])
        self.assertEqual(len(digests[0]), 2)

    def test_without_the_all_reduce_the_ranks_drift_apart(self) -> None:
        # The same two shards trained alone: the digests differ, so the test above can fail.
        alone = []
        for rank in range(2):
            r = self.req(rank, 2, "unused/")
            del r["dist"]
            rc, lines, err = finish(start(r))
            self.assertEqual(rc, 0, err[-2000:])
            self.assertEqual(lines[-1], {"type": "done"})
            alone.append(lines)
        w = [[x["seconds"] for x in lines if x["type"] == "epoch"] for lines in alone]
        self.assertEqual(len(w[0]), 4)
        # Train each shard under world 1 to get digests to compare with.
        digests = []
        for rank in range(2):
            r = self.req(rank, 2, f"solo{rank}/")
            r["dist"]["world_size"], r["dist"]["rank"] = 1, 0
            rc, lines, err = finish(start(r))
            self.assertEqual(rc, 0, err[-2000:])
            digests.append(lines[-1]["weights"])
        self.assertNotEqual(digests[0], digests[1])

    def test_a_missing_rank_ends_in_an_error_line_within_the_timeout(self) -> None:
        began = time.monotonic()
        rc, lines, err = finish(start(self.req(0, 2, "lonely/", timeout_s=3.0)))
        took = time.monotonic() - began
        self.assertNotEqual(rc, 0)
        self.assertEqual(lines[-1]["type"], "error", lines)
        self.assertEqual(lines[-1]["stage"], "setup")
        self.assertLess(took, 60, "the harness waited far past its 3 s timeout")

    def test_a_bad_dist_key_is_named(self) -> None:
        r = self.req(2, 2, "bad/")
        rc, lines, _ = finish(start(r))
        self.assertNotEqual(rc, 0)
        self.assertIn("request.dist.rank", lines[-1]["message"])


if __name__ == "__main__":
    unittest.main()
