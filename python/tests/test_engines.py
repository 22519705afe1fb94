"""Tests of the dali and nodes engines and the pytorch engine's batched fetch: same samples and steps as the pytorch engine."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import types
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

import test_harness as th  # the shared helpers; its TestCases stay in test_harness

sys.path.insert(0, str(th.PYTHON_DIR))

from stallscope_peer.protocol import NotApplicable, RequestError, parse_request  # noqa: E402

HELLO_KEYS = th.HELLO_KEYS

# An import blocker: a meta-path finder that makes `import NAME` fail for real.
BLOCKER = """
import runpy, sys
class Block:
    def __init__(self, names):
        self.names = names
    def find_spec(self, name, path=None, target=None):
        if any(name == n or name.startswith(n + ".") for n in self.names):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by the test)", name=name)
        return None
sys.meta_path.insert(0, Block(sys.argv[1].split(",")))
runpy.run_module("stallscope_peer", run_name="__main__", alter_sys=True)
"""


def assert_same_batches(test: unittest.TestCase, ref, got, where: str, depth: int = 2) -> None:
    """Two engines' batches, equal tensor for tensor: as many epochs (depth 2) and batches in each,
    inputs equal and labels equal as integers. Lengths first: zip alone would pass a short side."""
    import torch

    epochs = (ref, got) if depth == 2 else ([ref], [got])
    test.assertEqual(len(epochs[0]), len(epochs[1]), f"{where}: epochs")
    for e, (a, b) in enumerate(zip(*epochs)):
        test.assertEqual(len(a), len(b), f"{where}: batches in epoch {e}")
        test.assertGreater(len(a), 0, f"{where}: epoch {e} is empty")
        for i, ((xa, ya), (xb, yb)) in enumerate(zip(a, b)):
            test.assertTrue(torch.equal(xa, xb), f"{where}: epoch {e} batch {i} inputs")
            test.assertTrue(torch.equal(ya.long(), yb.long()), f"{where}: epoch {e} batch {i} labels")


def loader(**kw):
    base = th.loader(dali_device="cpu", worker_kind="threads", batched_fetch=False)
    base.update(kw)
    return base


def run_blocked(request: dict, blocked: str) -> tuple[int, list[str], str]:
    env = dict(os.environ, PYTHONPATH=str(th.PYTHON_DIR), PYTHONDONTWRITEBYTECODE="1")
    env.pop("STALLSCOPE_HARNESS_FAULT", None)
    p = subprocess.run([sys.executable, "-c", BLOCKER, blocked], input=json.dumps(request),
                       capture_output=True, text=True, env=env, timeout=th.TIMEOUT_S, cwd=str(th.REPO))
    return p.returncode, p.stdout.splitlines(), p.stderr


class EnginesHarnessTest(unittest.TestCase):
    """Requests run once, concurrently, as subprocesses; each test reads its cases' lines."""

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="stallscope-engines-test-"))
        th.HarnessTest._make_data.__func__(cls)  # x.f32, y.i64, 8 JPEGs, FashionMNIST IDX files
        cls.cases = cls._make_cases()
        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {name: pool.submit(run, req) for name, (run, req) in cls.cases.items()}
            cls.results = {name: f.result() for name, f in futures.items()}

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _make_cases(cls) -> dict:
        t = cls.tmp
        tensor = {"kind": "tensor", "inputs": str(t / "x.f32"), "labels": str(t / "y.i64"),
                  "samples": 40, "features": 8}
        synthetic = {"kind": "synthetic", "samples": 32, "features": 8, "classes": 3,
                     "latency_us": 200, "cpu_work_rounds": 200}
        images = {"kind": "images", "files": cls.images, "resize": 24, "crop": 16,
                  "random_crop": True, "flip": True}
        linear = {"name": "linear", "features": 8, "classes": 4}
        none = {"name": "none"}
        icnn = {"name": "image_cnn", "size": 16, "classes": 3}
        tb = th.shuffled_batches(40, 16, 2, 1)
        sb = th.shuffled_batches(32, 8, 2, 2)
        ib = th.shuffled_batches(8, 3, 2, 5)

        def req(source, model, batches, engine, modes=("whole_run", "diagnostic"), **kw):
            kw.setdefault("loader", loader())
            r = th.request(source, model, batches, engine=engine, modes=modes, **kw)
            if model["name"] == "none":
                r["optimizer"] = None
            return r

        w2 = dict(workers=2, batch_size=16)
        harness = th.run_harness
        cases = {
            "tensor_dali": req(tensor, linear, tb, "dali", loader=loader(**w2)),
            "tensor_nodes_processes": req(tensor, linear, tb, "nodes", modes=("diagnostic",),
                                          loader=loader(worker_kind="processes", **w2)),
            "synthetic_pytorch_batched": req(synthetic, none, sb, "pytorch", modes=("whole_run",),
                                             loader=loader(workers=2, batched_fetch=True)),
            "synthetic_dali": req(synthetic, none, sb, "dali", modes=("whole_run",), loader=loader(workers=2)),
            "images_dali": req(images, icnn, ib, "dali", modes=("diagnostic",),
                               loader=loader(batch_size=3, workers=1)),
            "dali_mixed_on_cpu": req(images, none, ib, "dali", loader=loader(batch_size=3, workers=1,
                                                                             dali_device="mixed")),
        }
        out = {name: (harness, r) for name, r in cases.items()}
        out["dali_missing"] = (lambda r: run_blocked(r, "nvidia.dali"), cases["tensor_dali"])
        out["nodes_missing"] = (lambda r: run_blocked(r, "torchdata"), cases["tensor_nodes_processes"])
        # synthetic: DALI's Python worker processes must not outlive the killed harness (they would
        # hold its stderr open and run_harness would time out).
        kill = req(synthetic, none, sb, "dali", modes=("whole_run",), loader=loader(workers=2))
        out["dali_fault_kill"] = (lambda r: th.run_harness(r, "kill@1:1"), kill)
        return out

    # ------------------------------------------------------------------

    def lines(self, name: str) -> tuple[int, list[dict], str]:
        rc, raw, err = self.results[name]
        try:
            return rc, [json.loads(x) for x in raw], err
        except json.JSONDecodeError:
            self.fail(f"{name}: a line is not JSON\n{raw}\nstderr:\n{err[-3000:]}")

    def check_run(self, name: str) -> list[dict]:
        _, req = self.cases[name]
        rc, lines, err = self.lines(name)
        self.assertEqual(rc, 0, f"{name}: exit {rc}\n{err[-3000:]}")
        hello = lines[0]
        engine = req["engine"]
        own = {"dali": "dali", "nodes": "torchdata"}.get(engine)
        self.assertEqual(set(hello), HELLO_KEYS | ({own} if own else set()), name)
        self.assertIsNone(hello["spdl"], name)
        if own:
            self.assertRegex(hello[own], r"^\d+\.\d+", name)
        expected = [(m, e) for m in req["modes"] for e in range(req["epochs"])]
        self.assertEqual([(x["mode"], x["epoch"]) for x in lines[1:-1]], expected, name)
        for line in lines[1:-1]:
            if "batches" in req:
                batches = req["batches"][line["epoch"]]
                self.assertEqual(line["steps"], len(batches), name)
                self.assertEqual(line["samples"], sum(len(b) for b in batches), name)
            self.assertEqual(line["bytes"], line["samples"] * (np.prod(hello["sample_shape"]) * 4 + 8), name)
        self.assertEqual(lines[-1], {"type": "done"}, name)
        return lines

    def test_tensor_dali(self):
        stages = self.check_run("tensor_dali")[1]["loader"]["stages"]
        self.assertEqual([s["name"] for s in stages], ["external_source"])
        self.assertEqual(stages[0]["tasks"], 3)  # 40 samples in batches of 16

    def test_tensor_nodes_processes(self):
        lines = self.check_run("tensor_nodes_processes")
        # Two worker processes (descendants of the harness): their peaks in each epoch, torch-sized.
        for line in lines[1:-1]:
            workers = line["memory"]["workers"]
            self.assertGreaterEqual(len(workers), 2, workers)
            self.assertGreater(line["children_peak_rss_bytes"], 2 * (10 << 20))

    def test_synthetic_dali_and_batched_pytorch(self):
        self.check_run("synthetic_pytorch_batched")
        stage = self.check_run("synthetic_dali")[1]["loader"]["stages"][0]
        self.assertEqual((stage["name"], stage["tasks"]), ("external_source (python workers)", 4))
        self.assertGreater(stage["mean_task_s"], 8 * 200e-6)  # 8 samples of >= 200 us each

    def test_images_dali(self):
        self.assertEqual(self.check_run("images_dali")[0]["sample_shape"], [3, 16, 16])

    def test_dali_mixed_on_cpu_is_not_applicable(self):
        rc, lines, _ = self.lines("dali_mixed_on_cpu")
        self.assertNotEqual(rc, 0)
        self.assertEqual(len(lines), 1)
        self.assertEqual(set(lines[0]), {"type", "stage", "message", "not_applicable"})
        self.assertEqual((lines[0]["stage"], lines[0]["not_applicable"]), ("setup", True))
        self.assertIn("needs a CUDA device", lines[0]["message"])

    def assert_missing(self, name: str, package: str, version: str, module: str) -> None:
        rc, lines, err = self.lines(name)
        self.assertEqual(rc, 1, err[-2000:])
        self.assertEqual(len(lines), 1, lines)  # no hello: the engine is looked up first
        line = lines[0]
        self.assertEqual(set(line), {"type", "stage", "message", "missing"})
        self.assertEqual((line["type"], line["stage"]), ("error", "setup"))
        self.assertEqual(line["missing"], {"package": package, "version": version, "module": module,
                                           "install": "cargo xtask setup --peers"})
        self.assertIn(f"needs {package} {version}, which is not installed", line["message"])
        self.assertIn("blocked by the test", line["message"])

    def test_missing_dali(self):
        self.assert_missing("dali_missing", "nvidia-dali-cuda130", "2.4.0", "nvidia.dali")

    def test_missing_torchdata(self):
        self.assert_missing("nodes_missing", "torchdata", "0.11.0", "torchdata.nodes")

    def test_kill_in_a_dali_epoch_keeps_the_epochs_so_far(self):
        rc, lines, _ = self.lines("dali_fault_kill")
        self.assertEqual(rc, -signal.SIGKILL)
        self.assertEqual([x["type"] for x in lines], ["hello", "epoch"])


def engine_req(engine: str, batches, **loader_kw) -> types.SimpleNamespace:
    from stallscope_peer.protocol import LoaderSpec

    spec = dict(batch_size=4, drop_last=False, workers=2, prefetch=2, persistent=False,
                pin_memory=False, context="fork", concurrency=2, spdl_workers="threads",
                prefetch_to_device=False)
    spec.update(loader_kw)
    return types.SimpleNamespace(loader=LoaderSpec(**spec), augment_seed=0, source={"kind": "tensor"},
                                 batches=batches, engine=engine)


def run_engine(engine_name: str, source, batches, req=None, **loader_kw) -> list:
    """Every epoch's (inputs, labels) batches, in order, from the engine in this process."""
    import torch

    from stallscope_peer import engines

    req = req or engine_req(engine_name, batches, **loader_kw)
    engine = engines.load(engine_name)(req, source, torch.device("cpu"))
    engine.open_mode()
    seen = []
    try:
        for e, epoch in enumerate(batches):
            seen.append([(x.clone(), y.clone()) for x, y in engine.epoch(e, epoch)])
            engine.epoch_stats()
    finally:
        engine.close_mode()
    return seen


class EngineOrderTest(unittest.TestCase):
    """dali and nodes give the requested batches in order, with the pytorch engine's exact samples."""

    EPOCHS = th.OrderTest.EPOCHS

    def labels(self, engine_name: str, epochs=None, **loader_kw) -> list:
        from stallscope_peer.sources import OpenedSource

        source = OpenedSource(th.IndexDataset(), None, 64, [1], 4)
        got = run_engine(engine_name, source, epochs or self.EPOCHS, **loader_kw)
        for epoch in got:
            for x, y in epoch:
                self.assertEqual(x[:, 0].long().tolist(), y.tolist())
                self.assertEqual(y.dtype.is_floating_point, False)
        return [[y.tolist() for _, y in epoch] for epoch in got]

    def test_dali_keeps_order_over_epochs(self):
        self.assertEqual(self.labels("dali", workers=2), self.EPOCHS)

    def test_nodes_threads_keep_order(self):
        self.assertEqual(self.labels("nodes", workers=3), self.EPOCHS)

    def test_nodes_processes_keep_order(self):
        self.assertEqual(self.labels("nodes", workers=2, worker_kind="processes"), self.EPOCHS)

    def test_nodes_in_process(self):
        self.assertEqual(self.labels("nodes", workers=0), self.EPOCHS)

    def test_dali_batches_larger_than_batch_size(self):
        batches = [[[9, 8, 7, 6, 5, 4], [3]], [[1, 2], [0, 10, 11, 12, 13]]]
        self.assertEqual(self.labels("dali", batch_size=4, workers=1, epochs=batches), batches)

    def test_python_source_on_nodes(self):
        import torch

        from stallscope_peer.sources import open_source

        source = open_source({"kind": "python", "module": "my_dataset", "function": "make_dataset",
                              "path": [str(th.USER_DATASET)],
                              "args": {"samples": 20, "features": 8, "classes": 4, "with_collate": True}})
        batches = [[[4, 9, 1], [0, 2]], [[19, 3, 7]]]
        ref = run_engine("pytorch", source, batches, workers=0)
        got = run_engine("nodes", source, batches, workers=2)
        self.assertEqual(len(ref), 2)
        assert_same_batches(self, ref, got, "python source on nodes")

    def test_nodes_images_identical_to_pytorch(self):
        """The same ImageDataset on worker threads: centre crops are bit for bit the pytorch engine's."""
        import torch
        from PIL import Image

        from stallscope_peer.sources import open_source

        tmp = Path(tempfile.mkdtemp(prefix="stallscope-nodes-img-"))
        try:
            files = []
            for i in range(5):
                yy, xx = np.mgrid[0:30, 0:40]
                img = np.stack([(xx * 6 + i * 30) % 256, (yy * 8) % 256, (xx + yy) * 4 % 256], -1)
                Image.fromarray(img.astype(np.uint8)).save(tmp / f"{i}.jpg", quality=90)
                files.append((str(tmp / f"{i}.jpg"), i % 2))
            source = open_source({"kind": "images", "files": files, "resize": 20, "crop": 16,
                                  "random_crop": False, "flip": False})
            batches = [[[4, 1], [0, 3, 2]]]
            ref = run_engine("pytorch", source, batches, workers=0)
            got = run_engine("nodes", source, batches, workers=2)
            assert_same_batches(self, ref, got, "images on nodes")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_tensor_samples_identical_across_engines(self):
        import torch
        from torch.utils.data import TensorDataset

        from stallscope_peer.sources import OpenedSource

        g = torch.Generator().manual_seed(0)
        ds = TensorDataset(torch.randn(20, 5, generator=g), torch.arange(20) % 3)
        source = OpenedSource(ds, None, 20, [5], 20)
        batches = [[[3, 1, 4], [15, 9, 2, 6], [5]], [[0, 19, 18, 17], [7]]]
        ref = run_engine("pytorch", source, batches, workers=0)
        for name, kw in (("dali", {}), ("nodes", {}), ("nodes", {"worker_kind": "processes"})):
            got = run_engine(name, source, batches, **kw)
            assert_same_batches(self, ref, got, f"{name} {kw}")

    def test_dali_images_match_torchvision(self):
        """DALI's decode/resize/crop/normalise against PIL + torchvision, on the same files and crops.

        Centre crops against the pytorch engine; random crops and flips against
        torchvision at the anchors the spdl engine draws (a generator per seed,
        epoch and index), which is what DALI is handed.
        """
        import torch
        import torchvision.transforms.functional as F
        from PIL import Image

        from stallscope_peer.sources import IMAGENET_MEAN, IMAGENET_STD, open_source

        tmp = Path(tempfile.mkdtemp(prefix="stallscope-dali-img-"))
        try:
            files = []
            rng = np.random.default_rng(1)
            # Odd crop margins after the resize (centre crops round half to even) and a longer
            # side of x.99 (torchvision truncates it).
            for i, (w, h) in enumerate([(330, 225), (225, 333), (300, 211), (211, 300)]):
                yy, xx = np.mgrid[0:h, 0:w]
                img = np.stack([(xx // 3 + i * 40) % 256, (yy // 2) % 256, ((xx + yy) // 4) % 256], -1)
                img = np.clip(img + rng.integers(-8, 9, img.shape), 0, 255).astype(np.uint8)
                Image.fromarray(img).save(tmp / f"{i}.jpg", quality=90)
                files.append((str(tmp / f"{i}.jpg"), i))
            batches = [[[2, 0, 3, 1]], [[1, 3, 0, 2]]]
            centre = {"kind": "images", "files": files, "resize": 128, "crop": 112, "random_crop": False,
                      "flip": False}
            random = dict(centre, random_crop=True, flip=True)

            def dali(spec):
                req = engine_req("dali", batches, workers=2)
                req.source, req.augment_seed = spec, 7
                return [epoch[0] for epoch in run_engine("dali", open_source(spec), batches, req=req)]

            def reference(e, index):
                path, _ = files[index]
                with Image.open(path) as img:
                    x = F.pil_to_tensor(F.resize(img.convert("RGB"), 128, antialias=True))
                g = np.random.default_rng([7, e, index])
                top, left = int(g.integers(0, x.shape[1] - 111)), int(g.integers(0, x.shape[2] - 111))
                x = x[:, top:top + 112, left:left + 112]
                if g.random() < 0.5:
                    x = x.flip(2)
                return F.normalize(x.float() / 255, IMAGENET_MEAN, IMAGENET_STD)

            ref = [epoch[0] for epoch in run_engine("pytorch", open_source(centre), batches, workers=0)]
            rand = [torch.stack([reference(e, i) for i in batches[e][0]]) for e in range(2)]
            for (got, want, what) in ((dali(centre), ref, "centre"), (dali(random), rand, "random")):
                for e in range(2):
                    x = got[e][0]
                    want_x = want[e][0] if what == "centre" else want[e]
                    self.assertEqual(got[e][1].long().tolist(), [files[i][1] for i in batches[e][0]])
                    diff = (x - want_x).abs()
                    # Normalised units (one level of 255 is ~0.017): two decoders and two resizers.
                    self.assertLess(float(diff.mean()), 0.01, f"{what} epoch {e}")
                    self.assertLess(float(diff.max()), 0.1, f"{what} epoch {e}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


class BatchedFetchTest(unittest.TestCase):
    """batched_fetch: torch's fetcher calls __getitems__ once per batch; a synthetic batch sleeps once."""

    def epoch_time(self, batched: bool) -> tuple[float, list]:
        from stallscope_peer.sources import open_source

        spec = {"kind": "synthetic", "samples": 16, "features": 4, "classes": 3, "latency_us": 20_000,
                "cpu_work_rounds": 10}
        source = open_source(spec)
        batches = [[[0, 5, 2, 7, 1, 3, 4, 6], [8, 9, 10, 11, 12, 13, 14, 15]]]
        t0 = time.perf_counter()
        got = run_engine("pytorch", source, batches, workers=0, batched_fetch=batched)
        return time.perf_counter() - t0, got[0]

    def test_one_sleep_per_batch_same_samples(self):
        import torch

        slow, per_sample = self.epoch_time(False)
        fast, batched = self.epoch_time(True)
        self.assertGreater(slow, 16 * 0.020)  # 16 sleeps of 20 ms
        self.assertLess(fast, 8 * 0.020)  # 2 sleeps of 20 ms, with margin
        self.assertEqual(len(per_sample), 2)
        assert_same_batches(self, per_sample, batched, "per-sample against batched fetch", depth=1)

    def test_getitems_called_once_per_batch(self):
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        from stallscope_peer.engine_pytorch import BatchedFetch, GivenBatches

        calls = []

        class Recording(BatchedFetch):
            def __getitems__(self, indices):
                calls.append(list(indices))
                return super().__getitems__(indices)

        ds = TensorDataset(torch.arange(10.0).view(10, 1), torch.arange(10))
        sampler = GivenBatches()
        sampler.set_batches([[4, 2, 9], [0, 1]])
        out = [y.tolist() for _, y in DataLoader(Recording(ds), batch_sampler=sampler)]
        self.assertEqual(calls, [[4, 2, 9], [0, 1]])
        self.assertEqual(out, [[4, 2, 9], [0, 1]])


class EngineRequestTest(unittest.TestCase):
    BASE = {
        "protocol": 1, "engine": "dali", "device": "cpu", "weights_seed": 0, "model": {"name": "none"},
        "source": {"kind": "synthetic", "samples": 4, "features": 2, "classes": 2, "latency_us": 0,
                   "cpu_work_rounds": 0},
        "loader": {"batch_size": 2, "drop_last": False, "workers": 1, "prefetch": 2, "dali_device": "cpu"},
        "non_blocking": False, "epochs": 1, "modes": ["whole_run"], "batches": [[[0, 1], [2, 3]]],
    }

    def parse(self, change, error=RequestError) -> str:
        req = json.loads(json.dumps(self.BASE))
        change(req)
        with self.assertRaises(error) as cm:
            parse_request(json.dumps(req))
        return str(cm.exception)

    def test_minimal_requests_parse(self):
        req = parse_request(json.dumps(self.BASE))
        self.assertEqual((req.engine, req.loader.workers, req.loader.dali_device), ("dali", 1, "cpu"))
        nodes = json.loads(json.dumps(self.BASE))
        nodes["engine"] = "nodes"
        nodes["loader"] = {"batch_size": 2, "drop_last": False, "workers": 0, "prefetch": 1,
                           "pin_memory": False, "worker_kind": "processes"}
        self.assertEqual(parse_request(json.dumps(nodes)).loader.worker_kind, "processes")

    def test_required_keys_and_values(self):
        self.assertIn("request.loader: missing key 'dali_device'",
                      self.parse(lambda r: r["loader"].pop("dali_device")))
        self.assertIn("dali_device", self.parse(lambda r: r["loader"].update(dali_device="gpu")))
        self.assertIn("missing key 'worker_kind'", self.parse(lambda r: (
            r.update(engine="nodes"), r["loader"].update(pin_memory=False), r["loader"].pop("dali_device"))))
        self.assertIn("worker_kind", self.parse(lambda r: r["loader"].update(worker_kind="fibers")))
        self.assertIn("request.loader.prefetch", self.parse(lambda r: r["loader"].update(prefetch=None)))

    def test_not_applicable(self):
        na = NotApplicable
        self.assertIn("needs a CUDA device", self.parse(
            lambda r: r["loader"].update(dali_device="mixed"), na))
        self.assertIn("num_threads >= 1", self.parse(lambda r: r["loader"].update(workers=0), na))
        self.assertIn("only the pytorch engine", self.parse(
            lambda r: r["loader"].update(batched_fetch=True), na))
        self.assertIn("need a map-style Dataset engine", self.parse(lambda r: r.update(
            source={"kind": "python", "factory": "m:f", "path": [], "args": {}}), na))


if __name__ == "__main__":
    unittest.main()
