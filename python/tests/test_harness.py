"""End-to-end tests of the peers harness: tiny requests run as subprocesses, every line checked against the protocol."""

from __future__ import annotations

import copy
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
USER_DATASET = REPO / "fixtures" / "user_dataset"
sys.path.insert(0, str(PYTHON_DIR))

import numpy as np  # noqa: E402

from stallscope_peer.protocol import RequestError, parse_request  # noqa: E402

TIMEOUT_S = 120


def run_harness(request, fault: str | None = None) -> tuple[int, list[str], str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(PYTHON_DIR)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("STALLSCOPE_HARNESS_FAULT", None)
    if fault:
        env["STALLSCOPE_HARNESS_FAULT"] = fault
    text = request if isinstance(request, str) else json.dumps(request)
    p = subprocess.run([sys.executable, "-m", "stallscope_peer"], input=text, capture_output=True,
                       text=True, env=env, timeout=TIMEOUT_S, cwd=str(REPO))
    return p.returncode, p.stdout.splitlines(), p.stderr


def shuffled_batches(samples: int, batch: int, epochs: int, seed: int, drop_last: bool = False):
    rng = random.Random(seed)
    out = []
    for _ in range(epochs):
        order = list(range(samples))
        rng.shuffle(order)
        batches = [order[i:i + batch] for i in range(0, samples, batch)]
        if drop_last and len(batches[-1]) < batch:
            batches.pop()
        out.append(batches)
    return out


def loader(**kw):
    base = {"batch_size": 8, "workers": 0, "prefetch": 2, "persistent": False, "pin_memory": False,
            "context": "fork", "drop_last": False, "concurrency": 2, "spdl_workers": "threads",
            "prefetch_to_device": False}
    base.update(kw)
    return base


def request(source, model, batches, engine="pytorch", modes=("whole_run", "diagnostic"), **kw):
    req = {
        "protocol": 1, "engine": engine, "device": "cpu", "torch_threads": 1, "weights_seed": 0,
        "model": model, "optimizer": {"name": "adam", "lr": 1e-3}, "source": source,
        "loader": loader(), "non_blocking": False, "epochs": len(batches) if batches else 2,
        "modes": list(modes), "batches": batches, "augment_seed": 7,
    }
    if batches is None:
        del req["batches"]
    req.update(kw)
    return req


def write_idx(path: Path, magic: int, dims: list[int], data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(magic.to_bytes(4, "big"))
        for d in dims:
            f.write(d.to_bytes(4, "big"))
        f.write(data)


# --------------------------------------------------------------------------
# Checking lines against docs/peers-protocol.md


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


HELLO_KEYS = {"type", "protocol", "engine", "python", "torch", "torchvision", "spdl", "parameters",
              "samples", "sample_shape", "batch_bytes"}
EPOCH_KEYS = {"type", "mode", "epoch", "seconds", "samples", "steps", "bytes", "host_peak_rss_bytes",
              "children_peak_rss_bytes", "memory", "loader"}
MEMORY_KEYS = {"main", "workers", "workers_peak_rss_bytes"}
DIAG_KEYS = {"iterator_creation_s", "next_wait_ns", "transfer_ns", "compute_ns"}


class HarnessTest(unittest.TestCase):
    """The cases run concurrently once (setUpClass); each test checks one case's output."""

    cases: dict = {}
    results: dict = {}

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = Path(tempfile.mkdtemp(prefix="stallscope-peer-test-"))
        cls._make_data()
        cls.cases = cls._make_cases()
        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = {name: pool.submit(run_harness, req, fault)
                       for name, (req, fault) in cls.cases.items()}
            cls.results = {name: f.result() for name, f in futures.items()}

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def _make_data(cls) -> None:
        from PIL import Image

        t = cls.tmp
        rng = np.random.default_rng(0)
        rng.standard_normal((40, 8)).astype("<f4").tofile(t / "x.f32")
        (np.arange(40) % 4).astype("<i8").tofile(t / "y.i64")
        cls.images = []
        for i in range(8):
            w, h = (48, 36) if i % 2 == 0 else (36, 48)
            yy, xx = np.mgrid[0:h, 0:w]
            img = np.stack([(xx * 5 + i * 20) % 256, (yy * 5) % 256, (xx + yy) * 3 % 256], -1)
            path = t / f"img{i}.jpg"
            Image.fromarray(img.astype(np.uint8)).save(path, quality=90)
            cls.images.append([str(path), i % 3])
        n = 24
        write_idx(t / "train-images-idx3-ubyte", 2051, [n, 28, 28],
                  rng.integers(0, 256, n * 784, dtype=np.uint8).tobytes())
        write_idx(t / "train-labels-idx1-ubyte", 2049, [n], bytes(i % 10 for i in range(n)))

    @classmethod
    def _make_cases(cls) -> dict:
        t = cls.tmp
        tensor = {"kind": "tensor", "inputs": str(t / "x.f32"), "labels": str(t / "y.i64"),
                  "samples": 40, "features": 8}
        linear = {"name": "linear", "features": 8, "classes": 4}
        synthetic = {"kind": "synthetic", "samples": 32, "features": 8, "classes": 3,
                     "latency_us": 200, "cpu_work_rounds": 200}
        fashion = {"kind": "fashionmnist", "images": str(t / "train-images-idx3-ubyte"),
                   "labels": str(t / "train-labels-idx1-ubyte"), "samples": 24}
        images_random = {"kind": "images", "files": cls.images, "resize": 24, "crop": 16,
                         "random_crop": True, "flip": True}
        images_centre = dict(images_random, random_crop=False, flip=False)
        fcnn = {"name": "fashion_cnn"}
        icnn = {"name": "image_cnn", "size": 16, "classes": 3}
        none = {"name": "none"}
        tb = shuffled_batches(40, 16, 2, 1)
        irregular = [[[0, 1, 2, 3, 4], list(range(5, 12)), list(range(12, 24))],
                     [list(range(23, 15, -1)), [3, 1], list(range(4, 16)) + [0, 2]]]
        py_source = {"kind": "python", "factory": "my_dataset:make_dataset", "path": [str(USER_DATASET)],
                     "args": {"samples": 20, "features": 8, "classes": 4, "with_collate": True}}
        cases = {
            "tensor_linear_pt_w0": request(tensor, linear, tb, optimizer={"name": "sgd", "lr": 0.01}),
            "tensor_linear_pt_w2_persistent": request(
                tensor, linear, tb, loader=loader(batch_size=16, workers=2, persistent=True)),
            "tensor_linear_spdl_threads": request(tensor, linear, tb, engine="spdl",
                                                  loader=loader(batch_size=16)),
            "synthetic_none_pt_w2": request(synthetic, none, shuffled_batches(32, 8, 2, 2),
                                            loader=loader(workers=2)),
            "synthetic_none_spdl_threads": request(synthetic, none, shuffled_batches(32, 8, 2, 3),
                                                   engine="spdl", optimizer=None),
            "fashion_cnn_pt_w2_drop_last": request(
                fashion, fcnn, shuffled_batches(24, 10, 2, 4, drop_last=True),
                loader=loader(batch_size=10, workers=2, drop_last=True)),
            "fashion_cnn_spdl_processes_irregular": request(
                fashion, fcnn, irregular, engine="spdl",
                loader=loader(batch_size=12, spdl_workers="processes")),
            "images_image_cnn_pt_w0_random": request(images_random, icnn, shuffled_batches(8, 3, 2, 5),
                                                     loader=loader(batch_size=3)),
            "images_none_pt_w2": request(images_centre, none, shuffled_batches(8, 4, 1, 6),
                                         loader=loader(batch_size=4, workers=2)),
            "images_image_cnn_spdl_threads_random": request(
                images_random, icnn, shuffled_batches(8, 4, 2, 7), engine="spdl",
                loader=loader(batch_size=4)),
            # fork, not spawn: a spawned worker re-imports torch (~4 s each on two cores);
            # test_user_dataset_pickles checks what spawn needs.
            "python_linear_pt_w2": request(
                py_source, linear, None, modes=("diagnostic",), shuffle=True, shuffle_seed=3,
                loader=loader(batch_size=6, workers=2, persistent=True)),
            "spdl_missing_image": request(
                dict(images_centre, files=cls.images[:3] + [[str(t / "missing.jpg"), 0]]), none,
                [[[0, 1], [2, 3]]], engine="spdl", loader=loader(batch_size=2)),
            "malformed_missing_key": {k: v for k, v in request(tensor, linear, tb).items() if k != "epochs"},
            "malformed_not_json": "{this is not json",
        }
        faults = {
            # model none: an optimizer's first param group imports torch._dynamo (~1.6 s of CPU).
            "fault_kill": ("kill@1:1", request(tensor, none, tb, modes=("whole_run",))),
            "fault_garbage": ("garbage@0:1", request(tensor, none, tb, modes=("diagnostic",))),
            "fault_exit": ("exit@0:2", request(tensor, none, tb, modes=("whole_run",), optimizer=None)),
        }
        out = {name: (req, None) for name, req in cases.items()}
        out.update({name: (req, fault) for name, (fault, req) in faults.items()})
        return out

    # ------------------------------------------------------------------
    # helpers

    def parsed(self, name: str) -> tuple[int, list[dict], str]:
        rc, lines, err = self.results[name]
        objs = []
        for i, line in enumerate(lines):
            try:
                objs.append(json.loads(line))
            except json.JSONDecodeError:
                self.fail(f"{name}: line {i + 1} is not JSON: {line!r}\nstderr:\n{err[-3000:]}")
        return rc, objs, err

    def check_hello(self, name: str, hello: dict, req: dict) -> None:
        self.assertEqual(set(hello), HELLO_KEYS, name)
        self.assertEqual(hello["type"], "hello")
        self.assertEqual(hello["protocol"], 1)
        self.assertEqual(hello["engine"], req["engine"])
        for key in ("python", "torch"):
            self.assertIsInstance(hello[key], str)
        self.assertTrue(hello["torchvision"] is None or isinstance(hello["torchvision"], str))
        if req["engine"] == "spdl":
            self.assertIsInstance(hello["spdl"], str)
        else:
            self.assertIsNone(hello["spdl"])
        self.assertTrue(is_int(hello["parameters"]) and hello["parameters"] >= 0)
        if req["model"]["name"] == "none":
            self.assertEqual(hello["parameters"], 0)
        self.assertTrue(is_int(hello["samples"]) and hello["samples"] > 0)
        self.assertIsInstance(hello["sample_shape"], list)
        self.assertTrue(all(is_int(d) and d > 0 for d in hello["sample_shape"]))
        per_sample = math.prod(hello["sample_shape"]) * 4 + 8
        self.assertEqual(hello["batch_bytes"], req["loader"]["batch_size"] * per_sample)

    def check_memory(self, where: str, line: dict) -> None:
        """The epoch's peaks: the harness's own (VmHWM, reset when the epoch opened) and its
        workers' (their sum, the largest set alive together), with PSS and USS beside RSS."""
        memory = line["memory"]
        self.assertEqual(set(memory), MEMORY_KEYS, where)
        main = memory["main"]
        self.assertEqual(main["peak_rss_bytes"], line["host_peak_rss_bytes"], where)
        self.assertTrue(is_int(main["peak_rss_bytes"]) and main["peak_rss_bytes"] > 0, where)
        self.assertEqual(main["peak_since"], "window", where)  # clear_refs works on this machine
        self.assertLessEqual(main["uss_bytes"], main["pss_bytes"], where)
        self.assertLessEqual(main["pss_bytes"], main["rss_bytes"], where)
        self.assertLessEqual(main["rss_bytes"], main["peak_rss_bytes"], where)
        peaks = [w["peak_rss_bytes"] for w in memory["workers"] if w["peak_rss_bytes"] is not None]
        self.assertEqual(line["children_peak_rss_bytes"], memory["workers_peak_rss_bytes"], where)
        if peaks:
            self.assertGreaterEqual(memory["workers_peak_rss_bytes"], max(peaks), where)
            self.assertLessEqual(memory["workers_peak_rss_bytes"], sum(peaks), where)
        else:
            self.assertIsNone(memory["workers_peak_rss_bytes"], where)

    def check_epoch(self, name: str, line: dict, mode: str, epoch: int, batches, hello, engine,
                    workers: int = 0) -> None:
        where = f"{name} {mode} epoch {epoch}"
        keys = EPOCH_KEYS | (DIAG_KEYS if mode == "diagnostic" else set())
        # Worker tracks: the DataLoader's diagnostic epochs with worker processes.
        traced = mode == "diagnostic" and engine == "pytorch" and workers > 0
        self.assertEqual(set(line), keys | ({"worker_tracks"} if traced else set()), where)
        if traced:
            self.check_tracks(where, line["worker_tracks"], line["steps"], workers, batches)
        self.assertEqual((line["type"], line["mode"], line["epoch"]), ("epoch", mode, epoch), where)
        self.assertTrue(is_num(line["seconds"]) and line["seconds"] > 0, where)
        if batches is not None:
            self.assertEqual(line["steps"], len(batches), where)
            self.assertEqual(line["samples"], sum(len(b) for b in batches), where)
        self.assertTrue(is_int(line["steps"]) and is_int(line["samples"]), where)
        per_sample = math.prod(hello["sample_shape"]) * 4 + 8
        self.assertEqual(line["bytes"], line["samples"] * per_sample, where)
        self.check_memory(where, line)
        if mode == "diagnostic":
            self.assertTrue(is_num(line["iterator_creation_s"]) and line["iterator_creation_s"] >= 0)
            for key in ("next_wait_ns", "transfer_ns", "compute_ns"):
                series = line[key]
                self.assertEqual(len(series), line["steps"], f"{where} {key}")
                self.assertTrue(all(is_int(v) and v >= 0 for v in series), f"{where} {key}")
            if hello["parameters"] == 0:
                self.assertTrue(all(v == 0 for v in line["transfer_ns"] + line["compute_ns"]), where)
            else:
                self.assertTrue(all(v > 0 for v in line["compute_ns"]), where)
            self.assertLessEqual(sum(line["next_wait_ns"]) + sum(line["transfer_ns"])
                                 + sum(line["compute_ns"]), line["seconds"] * 1e9, where)
        ld = line["loader"]
        self.assertEqual(set(ld), {"time_to_first_batch_s", "stages", "queues"}, where)
        self.assertTrue(is_num(ld["time_to_first_batch_s"]) and 0 < ld["time_to_first_batch_s"]
                        <= line["seconds"], where)
        for s in ld["stages"]:
            self.assertEqual(set(s), {"name", "tasks", "failures", "mean_task_s"}, where)
            self.assertIsInstance(s["name"], str)
            self.assertTrue(is_int(s["tasks"]) and is_int(s["failures"]) and is_num(s["mean_task_s"]))
        for q in ld["queues"]:
            self.assertEqual(set(q), {"name", "gets", "get_wait_s", "readiness"}, where)
            self.assertIsInstance(q["name"], str)
            self.assertTrue(is_int(q["gets"]) and is_num(q["get_wait_s"]) and is_num(q["readiness"]))
            self.assertTrue(0 <= q["readiness"] <= 1, where)
        if engine == "spdl":
            stages = {s["name"]: s for s in ld["stages"]}
            self.assertEqual(stages["load"]["tasks"], line["samples"], where)
            self.assertEqual(stages["load"]["failures"], 0, where)
            self.assertGreater(stages["load"]["mean_task_s"], 0, where)
            self.assertIn("collate", stages)
            self.assertTrue(ld["queues"], where)
        else:
            self.assertEqual((ld["stages"], ld["queues"]), ([], []), where)

    def check_tracks(self, where: str, t: dict, steps: int, workers: int, batches) -> None:
        """Every batch once, on a worker of the loader, with its samples; each step's batch."""
        self.assertEqual((t["kind"], t["workers"]), ("processes", workers), where)
        b, s = t["batches"], t["samples"]
        self.assertEqual(sorted(b["batch"]), list(range(steps)), where)
        self.assertEqual(t["steps"]["batch"], list(range(steps)), where)
        self.assertEqual(len(t["steps"]["delivered_ns"]), steps, where)
        for key, col in b.items():
            self.assertEqual(len(col), steps, f"{where} batches.{key}")
        self.assertTrue(all(0 <= w < workers for w in b["worker"]), where)
        self.assertTrue(all(c <= n for c, n in zip(b["collate_ns"], b["build_ns"])), where)
        self.assertEqual(sum(b["sample_rows"]), len(s["index"]), where)
        if batches is not None:
            self.assertEqual(b["samples"], [len(batches[k]) for k in b["batch"]], where)
            self.assertEqual(b["first_sample"], [batches[k][0] for k in b["batch"]], where)
            listed = [i for k, n in zip(b["batch"], b["sample_rows"]) for i in batches[k][:n]]
            self.assertEqual(s["index"], listed, where)
        for stage in s["stages"]:
            self.assertEqual(len(stage["ns"]), len(s["index"]), where)

    def check_run(self, name: str) -> list[dict]:
        req, _ = self.cases[name]
        rc, lines, err = self.parsed(name)
        self.assertEqual(rc, 0, f"{name}: exit {rc}\n{err[-3000:]}")
        self.check_hello(name, lines[0], req)
        expected = [(m, e) for m in req["modes"] for e in range(req["epochs"])]
        epochs = lines[1:-1]
        self.assertEqual([(x.get("mode"), x.get("epoch")) for x in epochs], expected, name)
        for (mode, e), line in zip(expected, epochs):
            batches = req["batches"][e] if "batches" in req else None
            self.check_epoch(name, line, mode, e, batches, lines[0], req["engine"],
                             req["loader"].get("workers", 0))
        self.assertEqual(lines[-1], {"type": "done"}, name)
        return lines

    # ------------------------------------------------------------------
    # the runs

    def test_tensor_linear_pytorch_workers_0(self):
        lines = self.check_run("tensor_linear_pt_w0")
        self.assertEqual(lines[0]["parameters"], 8 * 4 + 4)

    def test_tensor_linear_pytorch_workers_2_persistent(self):
        self.check_run("tensor_linear_pt_w2_persistent")

    def test_tensor_linear_spdl_threads(self):
        self.check_run("tensor_linear_spdl_threads")

    def test_synthetic_none_pytorch_workers_2(self):
        lines = self.check_run("synthetic_none_pt_w2")
        # Non-persistent workers end with each epoch: both were read as they stopped.
        for line in lines[1:-1]:
            workers = line["memory"]["workers"]
            self.assertEqual([(w["worker_id"], w["ended"]) for w in workers], [(0, True), (1, True)])
            self.assertGreater(line["children_peak_rss_bytes"], 2 * (10 << 20))  # each imports torch

    def test_synthetic_none_spdl_threads(self):
        self.check_run("synthetic_none_spdl_threads")

    def test_fashion_cnn_pytorch_workers_2_drop_last(self):
        lines = self.check_run("fashion_cnn_pt_w2_drop_last")
        self.assertEqual(lines[0]["parameters"], 105_866)
        self.assertEqual(lines[0]["sample_shape"], [1, 28, 28])
        self.assertEqual(lines[1]["samples"], 20)

    def test_fashion_cnn_spdl_processes_irregular_batches(self):
        lines = self.check_run("fashion_cnn_spdl_processes_irregular")
        self.assertEqual(lines[0]["parameters"], 105_866)

    def test_images_image_cnn_pytorch_workers_0_random_crop(self):
        lines = self.check_run("images_image_cnn_pt_w0_random")
        self.assertEqual(lines[0]["sample_shape"], [3, 16, 16])

    def test_images_none_pytorch_workers_2(self):
        self.check_run("images_none_pt_w2")

    def test_images_image_cnn_spdl_threads(self):
        lines = self.check_run("images_image_cnn_spdl_threads_random")
        self.assertEqual(lines[0]["sample_shape"], [3, 16, 16])

    def test_python_source_workers_with_collate(self):
        lines = self.check_run("python_linear_pt_w2")
        self.assertEqual(lines[0]["samples"], 20)
        self.assertEqual([x["samples"] for x in lines[1:-1]], [20, 20])
        self.assertEqual([x["steps"] for x in lines[1:-1]], [4, 4])

    # ------------------------------------------------------------------
    # failures

    def assert_error(self, name: str, stage: str, *fragments: str) -> None:
        rc, lines, err = self.parsed(name)
        self.assertNotEqual(rc, 0, name)
        self.assertTrue(lines, f"{name}: no output\n{err[-3000:]}")
        last = lines[-1]
        self.assertEqual(set(last), {"type", "stage", "message"}, name)
        self.assertEqual((last["type"], last["stage"]), ("error", stage), f"{name}: {last}")
        for f in fragments:
            self.assertIn(f, last["message"], name)
        self.assertNotIn({"type": "done"}, lines, name)

    def test_malformed_request_names_the_key(self):
        self.assert_error("malformed_missing_key", "setup", "'epochs'")
        self.assertEqual(len(self.results["malformed_missing_key"][1]), 1)

    def test_not_json(self):
        self.assert_error("malformed_not_json", "setup", "not JSON")

    def test_spdl_missing_image_is_a_worker_error(self):
        self.assert_error("spdl_missing_image", "worker")

    def test_fault_kill(self):
        rc, lines, _ = self.parsed("fault_kill")
        self.assertEqual(rc, -signal.SIGKILL)
        self.assertEqual([x["type"] for x in lines], ["hello", "epoch"])

    def test_fault_garbage(self):
        rc, raw, err = self.results["fault_garbage"]
        self.assertEqual(rc, 0, err[-2000:])
        self.assertEqual(raw[1], "this is not json")
        self.assertEqual(json.loads(raw[-1]), {"type": "done"})
        self.assertEqual([json.loads(x)["type"] for x in raw[2:]], ["epoch", "epoch", "done"])

    def test_fault_exit(self):
        rc, lines, _ = self.parsed("fault_exit")
        self.assertEqual(rc, 3)
        self.assertEqual([x["type"] for x in lines], ["hello"])


class IndexDataset:
    """Sample i is ([i], i): a batch shows which indices it holds, in order."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        import torch

        return torch.tensor([float(i)]), i


class OrderTest(unittest.TestCase):
    """Both engines give the requested batches in the requested order, epoch after epoch."""

    EPOCHS = [[[5, 3, 9, 1], [0, 2, 4, 6], [7, 8]],
              [[8, 7, 6, 5], [4, 3], [2, 1, 0]]]  # irregular sizes in the second epoch

    def engine_batches(self, engine_name: str, **loader_kw) -> list:
        import types

        import torch

        from stallscope_peer.protocol import LoaderSpec
        from stallscope_peer.sources import OpenedSource

        spec = dict(batch_size=4, drop_last=False, workers=0, prefetch=2, persistent=False,
                    pin_memory=False, context="fork", concurrency=2, spdl_workers="threads",
                    prefetch_to_device=False)
        spec.update(loader_kw)
        req = types.SimpleNamespace(loader=LoaderSpec(**spec), augment_seed=0, source={"kind": "tensor"})
        source = OpenedSource(IndexDataset(), None, 64, [1], 4)
        if engine_name == "pytorch":
            from stallscope_peer.engine_pytorch import Engine
        else:
            from stallscope_peer.engine_spdl import Engine
        engine = Engine(req, source, torch.device("cpu"))
        engine.open_mode()
        seen = []
        try:
            for e, batches in enumerate(self.EPOCHS):
                got = []
                for x, y in engine.epoch(e, batches):
                    self.assertEqual(x[:, 0].long().tolist(), y.tolist())
                    self.assertEqual(y.dtype, torch.int64)
                    got.append(y.tolist())
                engine.epoch_stats()
                seen.append(got)
        finally:
            engine.close_mode()
        return seen

    def test_pytorch_persistent_workers_switch_batches(self):
        self.assertEqual(self.engine_batches("pytorch", workers=2, persistent=True), self.EPOCHS)

    def test_pytorch_in_process(self):
        self.assertEqual(self.engine_batches("pytorch"), self.EPOCHS)

    def test_spdl_threads_keep_order(self):
        self.assertEqual(self.engine_batches("spdl", concurrency=3), self.EPOCHS)


class UserDatasetTest(unittest.TestCase):
    def test_user_dataset_pickles(self):
        """spawn/forkserver workers get the Dataset and collate_fn by pickle, importing the module."""
        import pickle

        sys.path.insert(0, str(USER_DATASET))
        try:
            import my_dataset
        finally:
            sys.path.remove(str(USER_DATASET))
        ds, collate = my_dataset.make_dataset(samples=6, features=3, with_collate=True)
        ds2, collate2 = pickle.loads(pickle.dumps((ds, collate)))
        x, y = collate2([ds2[i] for i in range(4)])
        self.assertEqual((tuple(x.shape), y.dtype.is_floating_point, y.tolist()), ((4, 3), False, [0, 1, 2, 3]))


class IdxTest(unittest.TestCase):
    """A broken IDX file is refused with its path, the byte offset and what was expected."""

    def setUp(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="stallscope-idx-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def error(self, name: str, magic: int, dims: list[int], data: bytes, want=(None, 28, 28), samples=2):
        from stallscope_peer.sources import SourceError, read_idx_u8

        path = self.dir / name
        write_idx(path, magic, dims, data)
        with self.assertRaises(SourceError) as cm:
            read_idx_u8(str(path), list(want), samples)
        message = str(cm.exception)
        self.assertTrue(message.startswith(str(path) + ": byte "), message)
        return message

    def test_header_errors(self):
        self.assertIn("byte 0: bad magic number 0x00000801, expected 0x00000803",
                      self.error("labels-as-images", 2049, [2, 28, 28], bytes(2 * 784)))
        self.assertIn("byte 8: dimension 1 is 27, expected 28",
                      self.error("narrow", 2051, [2, 27, 28], bytes(2 * 27 * 28)))
        self.assertIn("file ends early", self.error("short", 2051, [2, 28, 28], bytes(784)))
        self.assertIn("trailing bytes", self.error("long", 2051, [2, 28, 28], bytes(3 * 784)))
        self.assertIn("fewer than the 5 samples",
                      self.error("few", 2051, [2, 28, 28], bytes(2 * 784), samples=5))

    def test_bad_label_names_its_byte(self):
        from stallscope_peer.sources import SourceError, open_source

        write_idx(self.dir / "i", 2051, [3, 28, 28], bytes(3 * 784))
        write_idx(self.dir / "l", 2049, [3], bytes([1, 12, 3]))
        with self.assertRaises(SourceError) as cm:
            open_source({"kind": "fashionmnist", "images": str(self.dir / "i"),
                         "labels": str(self.dir / "l"), "samples": 3})
        self.assertIn("byte 9: label 12 out of range", str(cm.exception))


class ModelTest(unittest.TestCase):
    def test_fashion_cnn_has_the_seeds_parameter_count(self):
        from stallscope_peer import models

        self.assertEqual(models.parameter_count(models.build({"name": "fashion_cnn"})), 105_866)

    def test_same_seed_same_weights(self):
        import torch

        from stallscope_peer.models import Trainer

        spec = {"name": "image_cnn", "size": 16, "classes": 3}
        opt = {"name": "sgd", "lr": 0.1}
        a = Trainer(spec, opt, torch.device("cpu"), 3)
        b = Trainer(spec, opt, torch.device("cpu"), 3)
        pa, pb = list(a.module.parameters()), list(b.module.parameters())
        self.assertEqual([p.shape for p in pa], [q.shape for q in pb])
        self.assertGreater(len(pa), 0)
        for p, q in zip(pa, pb):
            self.assertTrue(torch.equal(p, q))
        before = [p.detach().clone() for p in pa]
        a.step(*a.synthetic_batch(2))
        after = list(a.module.parameters())
        self.assertEqual(len(after), len(before))
        self.assertTrue(any(not torch.equal(p, q) for p, q in zip(before, after)))


class RequestTest(unittest.TestCase):
    BASE = {
        "protocol": 1, "engine": "spdl", "device": "cpu", "weights_seed": 0,
        "model": {"name": "none"},
        "source": {"kind": "synthetic", "samples": 4, "features": 2, "classes": 2, "latency_us": 0,
                   "cpu_work_rounds": 0},
        "loader": {"batch_size": 2, "drop_last": False, "concurrency": 1, "spdl_workers": "threads"},
        "non_blocking": False, "epochs": 1, "modes": ["whole_run"], "batches": [[[0, 1], [2, 3]]],
    }

    def parse(self, change) -> str:
        req = copy.deepcopy(self.BASE)
        change(req)
        with self.assertRaises(RequestError) as cm:
            parse_request(json.dumps(req))
        return str(cm.exception)

    def test_minimal_request_parses(self):
        req = parse_request(json.dumps(self.BASE))
        self.assertEqual((req.engine, req.loader.concurrency, req.optimizer), ("spdl", 1, None))

    def test_errors_name_the_key(self):
        self.assertIn("unknown key 'extra'", self.parse(lambda r: r.update(extra=1)))
        self.assertIn("missing key 'modes'", self.parse(lambda r: r.pop("modes")))
        self.assertIn("request.loader: missing key 'concurrency'",
                      self.parse(lambda r: r["loader"].pop("concurrency")))
        self.assertIn("request.source: unknown key 'seed'", self.parse(lambda r: r["source"].update(seed=1)))
        self.assertIn("request.protocol", self.parse(lambda r: r.update(protocol=2)))
        self.assertIn("request.loader.batch_size", self.parse(lambda r: r["loader"].update(batch_size=True)))
        self.assertIn("request.batches", self.parse(lambda r: r.update(epochs=2)))
        self.assertIn("request.model: missing key 'classes'",
                      self.parse(lambda r: r.update(model={"name": "linear", "features": 2})))
        self.assertIn("missing key 'optimizer'",
                      self.parse(lambda r: r.update(model={"name": "fashion_cnn"})))
        self.assertIn("pytorch or nodes", self.parse(lambda r: r.update(
            source={"kind": "python", "factory": "m:f", "path": [], "args": {}})))
        self.assertIn("prefetch_to_device", self.parse(lambda r: r["loader"].update(prefetch_to_device=True)))
        self.assertIn("spdl_workers", self.parse(lambda r: r["loader"].update(spdl_workers="gpu")))


if __name__ == "__main__":
    unittest.main()
