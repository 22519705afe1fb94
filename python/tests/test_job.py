"""End-to-end tests of the `stallscope job` instrumentation: real training scripts run as the runner runs them.

Every scenario is one real script run in a subprocess with the environment `launch.job_env` builds (what
the Rust runner mirrors). The scenarios start together when the module is set up (STALLSCOPE_TEST_JOBS
at a time, 3 by default: most of their time is importing torch), and each test checks one scenario's
records. OMP_NUM_THREADS=1 in every run: on a small shared machine OpenMP's spinning threads make a
tiny model's step 100x slower, which would drown what the tests look at.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]
REPO = PYTHON_DIR.parent
FIXTURES = REPO / "fixtures" / "job"
sys.path.insert(0, str(PYTHON_DIR))

from stallscope_job import launch  # noqa: E402
from stallscope_job.config import ConfigError, parse  # noqa: E402

TIMEOUT_S = 120
TYPES = {"hello", "loader", "cold", "epoch", "window", "replay", "steps", "memory", "done", "end", "error"}
MiB = 1 << 20
BASE_ENV = {"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def has_lightning() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import lightning"], capture_output=True)
    return probe.returncode == 0


class Run:
    """One finished unit: exit status, the script's own output, and every process's records."""

    def __init__(self, status: int, stdout: str, stderr: str, out_dir: Path) -> None:
        self.status, self.stdout, self.stderr = status, stdout, stderr
        self.out = out_dir
        self.by_pid = launch.read_records(out_dir)

    @property
    def main(self) -> list[dict]:
        """The records of the one process that wrote any (DataLoader workers must not)."""
        if len(self.by_pid) != 1:
            raise AssertionError(f"expected records from exactly one process, got {sorted(self.by_pid)}; "
                                 f"stderr: {self.stderr[-2000:]}")
        return next(iter(self.by_pid.values()))

    def of(self, kind: str) -> list[dict]:
        return [r for r in self.main if r["type"] == kind]

    def one(self, kind: str) -> dict:
        found = self.of(kind)
        if len(found) != 1:
            raise AssertionError(f"expected one {kind!r} record, got {len(found)}: "
                                 f"{[r['type'] for r in self.main]}; stderr: {self.stderr[-2000:]}")
        return found[0]

    def series(self) -> dict[str, list]:
        return launch.steps_series(self.main)


class Case:
    """A scenario's own folder: its scripts, its out_dir, and how to run a command as the runner would."""

    def __init__(self, folder: Path) -> None:
        self.tmp = folder
        self.out = folder / "out"
        self.out.mkdir(parents=True)

    def script(self, body: str, name: str = "train.py") -> Path:
        path = self.tmp / name
        path.write_text(textwrap.dedent(body))
        return path

    def job(self, **kw) -> dict:
        return launch.config(self.out, **kw)

    def env(self, job: dict | None, extra: dict | None = None) -> dict:
        return launch.job_env(job, dict(os.environ, **BASE_ENV, **(extra or {})))

    def run(self, argv: list[str], job: dict | None, extra_env: dict | None = None,
            cwd: Path | None = None) -> Run:
        proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True,
                              env=self.env(job, extra_env), timeout=TIMEOUT_S, cwd=str(cwd or self.tmp))
        return Run(proc.returncode, proc.stdout, proc.stderr, self.out)


SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


_POOL: ThreadPoolExecutor | None = None
_ROOT: Path | None = None
_FUTURES = {}


def setUpModule() -> None:
    global _POOL, _ROOT
    _ROOT = Path(tempfile.mkdtemp(prefix="stallscope-job-"))
    _POOL = ThreadPoolExecutor(int(os.environ.get("STALLSCOPE_TEST_JOBS", "3")))
    for name, fn in SCENARIOS.items():
        _FUTURES[name] = _POOL.submit(fn, Case(_ROOT / name))


def tearDownModule() -> None:
    _POOL.shutdown(wait=True)
    shutil.rmtree(_ROOT)


def result(name: str):
    return _FUTURES[name].result()


# --------------------------------------------------------------------------- scenarios (slowest first)


@scenario
def lightning(case: Case):
    if not has_lightning():
        return None
    return case.run([str(FIXTURES / "train_lightning.py")], case.job(warmup=3, steps=10))


@scenario
def spawn_workers(case: Case):
    over = {"num_workers": 1, "multiprocessing_context": "spawn"}  # each spawned worker imports torch
    return case.run([str(FIXTURES / "train_light.py"), "--workers", "0"],
                    case.job(warmup=2, steps=6, overrides=over), cwd=FIXTURES)


@scenario
def whole_run_light(case: Case):
    return case.run([str(FIXTURES / "train_light.py")], case.job(warmup=5, steps=20, unit="light/0"),
                    cwd=FIXTURES)


@scenario
def diagnostic_slow(case: Case):
    return case.run([str(FIXTURES / "train_slow_dataset.py"), "--samples", "256", "--batch-size", "8",
                     "--delay-ms", "2"], case.job(mode="diagnostic", warmup=2, steps=10))


@scenario
def epochs_in_window(case: Case):
    return case.run([str(FIXTURES / "train_slow_dataset.py"), "--samples", "64", "--batch-size", "8",
                     "--delay-ms", "0", "--epochs", "5"], case.job(warmup=2, steps=20))


@scenario
def overrides_applied(case: Case):
    over = {"num_workers": 2, "persistent_workers": True, "prefetch_factor": 4}
    return case.run([str(FIXTURES / "train_slow_dataset.py"), "--samples", "64", "--batch-size", "8",
                     "--delay-ms", "0", "--epochs", "4"], case.job(warmup=2, steps=12, overrides=over))


THREE_LOADERS = """
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(torch.randn(64, 4))
    a = DataLoader(data, batch_size=4)
    b = DataLoader(data, batch_size=4, num_workers=2, prefetch_factor=3, persistent_workers=True,
                   multiprocessing_context="spawn")
    sampler = torch.utils.data.BatchSampler(torch.utils.data.SequentialSampler(data), 4, False)
    c = DataLoader(data, batch_sampler=sampler)
    print("built", a.num_workers, b.num_workers, b.prefetch_factor)
"""


@scenario
def overrides_refused(case: Case):
    job = case.job(overrides={"prefetch_factor": 4, "persistent_workers": True, "batch_size": 8},
                   overrides_loader=0)
    return case.run([str(case.script(THREE_LOADERS))], job)


@scenario
def overrides_implied(case: Case):
    return case.run([str(case.script(THREE_LOADERS))], case.job(overrides={"num_workers": 0, "batch_size": 2}))


OUTPUT = """
    import sys
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    print("before", flush=False)
    sys.stderr.write("err before\\n")
    loader = DataLoader(TensorDataset(torch.arange(40.0)), batch_size=2, num_workers=2)
    weight = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([weight], lr=0.1)
    for i, (x,) in enumerate(loader):
        print(f"step {i} {x.tolist()}")
        sys.stderr.write(f"err {i}\\n")
        (weight * x).sum().backward()
        opt.step()
    print("after")
"""


@scenario
def output_passes_through(case: Case):
    return case.run([str(case.script(OUTPUT))], case.job(warmup=3, steps=4))


@scenario
def no_torch_and_bad_config(case: Case):
    script = case.script("""
        import sys
        print(sorted(m for m in sys.modules if m.startswith(("torch", "stallscope"))))
        print(type(sys.meta_path[0]).__name__)
    """)
    quiet = case.run([str(script)], case.job())
    bad = case.job()
    bad["steps"] = "5"
    return quiet, case.run(["-c", "print('never')"], bad)


@scenario
def sitecustomize_chain(case: Case):
    first, second = case.tmp / "first", case.tmp / "second"
    for d in (first, second):
        d.mkdir()
        (d / "sitecustomize.py").write_text(f"import sys\nsys.stderr.write('site {d.name}\\n')\n")
    script = case.script("import sys\nprint(type(sys.meta_path[0]).__name__)\n")
    extra = {"PYTHONPATH": f"{first}{os.pathsep}{second}"}
    bare = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=extra["PYTHONPATH"]), timeout=TIMEOUT_S)
    return case.run([str(script)], case.job(), extra_env=extra), bare, case.run([str(script)], None, extra)


@scenario
def second_loader(case: Case):
    body = """
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        class ValLoader(DataLoader):
            def __init__(self, data):
                super().__init__(data, batch_size=16)

        train = DataLoader(TensorDataset(torch.randn(256, 8)), batch_size=4)
        val = ValLoader(TensorDataset(torch.randn(32, 8)))
        for (x,) in val:
            pass
        for epoch in range(2):
            for (x,) in train:
                x.sum()
        print("finished")
    """
    return case.run([str(case.script(body))], case.job(loader=1, warmup=1, steps=5))


@scenario
def replay(case: Case):
    return case.run([str(FIXTURES / "train_slow_dataset.py"), "--samples", "256", "--batch-size", "8",
                     "--delay-ms", "3"], case.job(warmup=1, steps=15, replay_batches=3))


@scenario
def replay_limited(case: Case):
    """Batches of 8 x (32 float32 + 1 int64) = 1,088 bytes; max_bytes 3,500 holds three of them."""
    return case.run([str(FIXTURES / "train_slow_dataset.py"), "--samples", "256", "--batch-size", "8",
                     "--delay-ms", "1"], case.job(warmup=1, steps=10, replay_batches=10,
                                                   replay_max_bytes=3500))


@scenario
def iterable(case: Case):
    body = """
        import torch
        from torch.utils.data import DataLoader, IterableDataset, get_worker_info

        class Stream(IterableDataset):
            def __iter__(self):
                info = get_worker_info()
                start, step = (0, 1) if info is None else (info.id, info.num_workers)
                for i in range(start, 400, step):
                    yield torch.full((3,), float(i))

        model = torch.nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for x in DataLoader(Stream(), batch_size=5):
            model(x).mean().backward()
            opt.step()
    """
    return case.run([str(case.script(body))], case.job(warmup=2, steps=10, overrides={"num_workers": 2}))


THREAD_BUFFER = """
    import queue, threading, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 4096
        def __getitem__(self, i):
            time.sleep(0.004)
            return torch.randn(8), i % 2

    loader = DataLoader(Slow(), batch_size=4)
    q = queue.Queue(maxsize=2)

    def fill():
        for batch in loader:
            q.put(batch)

    threading.Thread(target=fill, daemon=True).start()
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    while True:
        x, y = q.get()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
"""


@scenario
def thread_buffer(case: Case):
    """The training thread only takes from a queue a daemon thread fills from the DataLoader."""
    return case.run([str(case.script(THREAD_BUFFER))], case.job(warmup=3, steps=12))


@scenario
def thread_buffer_replay(case: Case):
    return case.run([str(case.script(THREAD_BUFFER))], case.job(warmup=3, steps=12, replay_batches=4))


POLLING_BUFFER = """
    import queue, threading, time
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self):
            return 12
        def __getitem__(self, i):
            time.sleep(0.003)
            return torch.randn(8), i % 2

    loader = DataLoader(Slow(), batch_size=4)

    def buffered():
        # MONAI's ThreadBuffer: a new queue and thread each epoch, polled with a timeout.
        q = queue.Queue(maxsize=1)
        t = threading.Thread(target=lambda: [q.put(b) for b in loader], daemon=True)
        t.start()
        while t.is_alive() or not q.empty():
            try:
                yield q.get(timeout=0.002)
            except queue.Empty:
                pass

    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    while True:
        for x, y in buffered():
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
"""


@scenario
def polling_buffer(case: Case):
    """3 batches an epoch through a new polled queue each epoch: the first gets of an epoch come
    before the queue is known to carry data."""
    return case.run([str(case.script(POLLING_BUFFER))], case.job(warmup=2, steps=12))


VALIDATION = """
    import itertools, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    train = DataLoader(TensorDataset(torch.randn(4096, 8), torch.randint(0, 2, (4096,))), batch_size=8)
    val = DataLoader(TensorDataset(torch.randn(64, 8), torch.randint(0, 2, (64,))), batch_size=8)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x, y) in enumerate(train):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        if i % 4 == 3:
            if {no_grad}:
                with torch.no_grad():
                    for vx, vy in val:
                        model(vx)
                        time.sleep(0.002)
            else:
                for vx, vy in itertools.islice(val, 3):
                    with torch.no_grad():
                        model(vx)
                    time.sleep(0.002)
"""


@scenario
def validation_no_grad(case: Case):
    return case.run([str(case.script(VALIDATION.replace("{no_grad}", "True")))],
                    case.job(warmup=2, steps=12))


@scenario
def validation_islice(case: Case):
    return case.run([str(case.script(VALIDATION.replace("{no_grad}", "False")))],
                    case.job(mode="diagnostic", warmup=2, steps=12))


PEAKS = """
    import sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    MAIN_AT, WORKER_AT = int(sys.argv[1]), int(sys.argv[2])
    BIG = 192 << 20

    def touch():
        block = bytearray(BIG)
        for i in range(0, BIG, 4096):
            block[i] = 1
        return len(block)

    class Data(Dataset):
        def __len__(self):
            return 400
        def __getitem__(self, i):
            if i == WORKER_AT * 2:  # the first sample of batch WORKER_AT (worker WORKER_AT % 2)
                touch()
            return torch.randn(4), 0

    loader = DataLoader(Data(), batch_size=2, num_workers=2, persistent_workers=True)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step, (x, _) in enumerate(loader):
        if step == MAIN_AT:
            touch()
        model(x).sum().backward()
        opt.step()
"""


@scenario
def peaks_in_window(case: Case):
    """192 MiB touched in the main process and in worker 0 inside the window (step 10 of 4 + 12)."""
    return case.run([str(case.script(PEAKS)), "10", "10"], case.job(warmup=4, steps=12))


@scenario
def peaks_in_warmup(case: Case):
    """The same, in warm-up (step 0): the window's peaks must not see it."""
    return case.run([str(case.script(PEAKS)), "0", "0"], case.job(warmup=4, steps=12))


@scenario
def pin_on_cpu(case: Case):
    return case.run([str(case.script(THREE_LOADERS))], case.job(overrides={"pin_memory": True}))


WORKER_FAILS = """
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Broken(Dataset):
        def __len__(self):
            return 64
        def __getitem__(self, i):
            if i == 20:
                raise KeyError(f"sample {i} is missing")
            return torch.randn(4)

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x in DataLoader(Broken(), batch_size=4, num_workers=1):
        model(x).sum().backward()
        opt.step()
"""


@scenario
def worker_fails(case: Case):
    return case.run([str(case.script(WORKER_FAILS))], case.job(warmup=1, steps=20))


FAULT_LOOP = """
    import os, sys, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(torch.randn({samples}, 4)), batch_size=2)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for i, (x,) in enumerate(loader):
        {action}
        model(x).sum().backward()
        opt.step()
    print("loop over")
"""


def _fault(case: Case, action: str, samples: int = 200, **job) -> Run:
    body = FAULT_LOOP.replace("{samples}", str(samples)).replace("{action}", action)
    return case.run([str(case.script(body))], case.job(**job))


@scenario
def fault_first_step(case: Case):
    return _fault(case, "raise RuntimeError('boom at the first step')", warmup=0, steps=5)


@scenario
def fault_mid_window(case: Case):
    return _fault(case, "if i == 9: raise ValueError('mid window')", warmup=2, steps=50)


@scenario
def fault_short(case: Case):
    return _fault(case, "pass", samples=20, warmup=2, steps=50)


@scenario
def fault_sys_exit(case: Case):
    return _fault(case, "if i == 6: sys.exit(3)", warmup=2, steps=50)


@scenario
def fault_os_exit(case: Case):
    return _fault(case, "if i == 6: os._exit(4)", warmup=2, steps=50)


@scenario
def fault_sigterm(case: Case):
    body = FAULT_LOOP.replace("{samples}", "200").replace(
        "{action}", "if i == 12: print('hanging', flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, str(case.script(body))], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=case.env(case.job(warmup=2, steps=50)),
                            cwd=str(case.tmp))
    try:
        first = proc.stdout.readline()
        if first == "hanging\n":
            proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    finally:
        proc.kill()
        proc.wait()
    return first, Run(proc.returncode, out, err, case.out)


# --------------------------------------------------------------------------- checks


class JobTest(unittest.TestCase):
    def check_common(self, run: Run) -> None:
        """Every process's file: known types, hello first, done or end last and alone."""
        for pid, records in run.by_pid.items():
            types = [r["type"] for r in records]
            self.assertTrue(set(types) <= TYPES, types)
            self.assertEqual(types[0], "hello", types)
            self.assertEqual(records[0]["pid"], pid)
            self.assertLessEqual(types.count("done") + types.count("end"), 1, types)
            if "done" in types or "end" in types:
                self.assertIn(types[-1], ("done", "end"), types)

    def check_window(self, run: Run, steps: int, diagnostic: bool = False,
                     method: str = "training_thread") -> dict:
        """A completed window: the series are whole, consistent, and add up to window_s."""
        self.assertEqual(run.status, 0, run.stderr)
        self.check_common(run)
        done = run.one("done")
        series = run.series()
        self.assertEqual(done["steps"], steps)
        self.assertEqual(len(series["step_ns"]), steps)
        for key in ("next_ns", "samples", "bytes", "batches", "apart_ns"):
            self.assertEqual(len(series[key]), steps, key)
        self.assertTrue(all(0 < n <= s for n, s in zip(series["next_ns"], series["step_ns"])))
        self.assertAlmostEqual((sum(series["step_ns"]) + sum(series["apart_ns"])) / 1e9, done["window_s"],
                               delta=1e-6)
        self.assertEqual(done["samples"], sum(series["samples"]))
        self.assertEqual(done["batches"], sum(series["batches"]))
        self.assertEqual(done["wait"]["method"], method)
        if diagnostic:
            for key in ("next_wait_ns", "transfer_ns", "compute_ns", "copies"):
                self.assertEqual(len(series[key]), steps, key)
            for w, t, c, s in zip(series["next_wait_ns"], series["transfer_ns"], series["compute_ns"],
                                  series["step_ns"]):
                self.assertEqual(w + t + c, s)
                self.assertGreaterEqual(c, 0)
        else:
            self.assertNotIn("next_wait_ns", series)
        return series


class WholeRunAndDiagnostic(JobTest):
    def test_whole_run_light_script(self):
        """The fixture's own 2 fork workers; the process ends at the window, before epoch 0 ends."""
        run = result("whole_run_light")
        series = self.check_window(run, 20)
        self.assertEqual((run.stdout, run.stderr), ("", ""))  # "epoch 0 done" never printed
        hello = run.one("hello")
        self.assertEqual((hello["unit"], hello["mode"], hello["rank_env"]), ("light/0", "whole_run", {}))
        script = FIXTURES / "train_light.py"
        self.assertEqual(hello["script"], {"path": str(script), "why": None,
                                           "sha256": hashlib.sha256(script.read_bytes()).hexdigest()})
        loader = run.one("loader")
        self.assertEqual((loader["index"], loader["class"], loader["num_workers"], loader["batch_size"]),
                         (0, "torch.utils.data.dataloader.DataLoader", 2, 64))
        self.assertEqual(loader["dataset"], "torch.utils.data.dataset.TensorDataset")
        self.assertEqual((loader["dataset_len"], loader["batches_per_epoch"]), (4096, 64))
        self.assertEqual(loader["sampler"], "torch.utils.data.sampler.RandomSampler")
        self.assertEqual((loader["prefetch_factor"], loader["start_method"]), (2, "fork"))
        self.assertEqual(loader["collate_fn"], "torch.utils.data._utils.collate.default_collate")
        cold = run.one("cold")
        self.assertEqual((cold["workers"], len(cold["worker_pids"]), cold["start_method"]), (2, 2, "fork"))
        self.assertGreater(cold["time_to_first_batch_s"], cold["iterator_creation_s"])
        self.assertEqual(set(series["samples"]), {64})
        self.assertEqual(set(series["bytes"]), {64 * 64 * 4 + 64 * 8})
        memory = run.one("memory")
        roles = [p["role"] for p in memory["processes"]]
        self.assertEqual(roles.count("main"), 1)
        self.assertEqual(sorted(p["pid"] for p in memory["processes"] if p["role"] == "worker"),
                         sorted(cold["worker_pids"]))
        for p in memory["processes"]:
            if p["role"] in ("main", "worker"):
                self.assertEqual(p["source"], "smaps_rollup")
                self.assertGreater(p["rss_bytes"], 0)
                self.assertLessEqual(p["uss_bytes"], p["rss_bytes"])
                self.assertLessEqual(p["pss_bytes"], p["rss_bytes"])
        self.assertGreater(memory["main_peak_rss_bytes"], 0)
        done = run.one("done")
        self.assertEqual((done["transfer"], done["copies"], done["accelerator"]), (None, None, None))

    def test_diagnostic_slow_dataset(self):
        run = result("diagnostic_slow")
        series = self.check_window(run, 10, diagnostic=True)
        done = run.one("done")
        self.assertTrue(done["transfer"].startswith("none: the job runs on the CPU"), done["transfer"])
        self.assertEqual((set(series["transfer_ns"]), done["copies"]), ({0}, 0))
        # 8 samples x 2 ms asleep in __getitem__: the wait dominates the step.
        wait = sorted(series["next_wait_ns"])[len(series["next_wait_ns"]) // 2]
        self.assertGreater(wait, 8 * 2e6 * 0.9)
        self.assertGreater(sum(series["next_wait_ns"]) / sum(series["step_ns"]), 0.5)

    def test_epochs_inside_the_window(self):
        """8 batches an epoch, 20 steps: the window spans three epochs and records each boundary."""
        run = result("epochs_in_window")
        self.check_window(run, 20)
        epochs = run.of("epoch")
        self.assertEqual([e["epoch"] for e in epochs], [1, 2])
        self.assertEqual([e["at_step"] for e in epochs], [6, 14])
        self.assertTrue(all(e["phase"] == "window" and e["thread"] == "training" for e in epochs))
        self.assertEqual(run.one("done")["epochs"], 3)
        # The next() that ends an epoch and the new iter() are that step's wait, not a gap.
        series = run.series()
        self.assertEqual(set(series["apart_ns"]), {0})
        self.assertEqual(set(series["batches"]), {1})
        self.assertEqual(run.stdout.count("mean loss"), 2)  # epochs 0 and 1 ended before the window did


class Overrides(JobTest):
    def test_workers_persistent_prefetch_applied(self):
        run = result("overrides_applied")
        self.check_window(run, 12)
        loader = run.one("loader")
        self.assertEqual((loader["num_workers"], loader["persistent_workers"], loader["prefetch_factor"]),
                         (2, True, 4))
        decided = {d["key"]: d for d in loader["overrides"]}
        self.assertEqual(decided["num_workers"],
                         {"key": "num_workers", "requested": 2, "script": 0, "status": "applied",
                          "reason": None, "actual": 2})
        self.assertEqual((decided["prefetch_factor"]["status"], decided["prefetch_factor"]["actual"]),
                         ("applied", 4))
        self.assertEqual(decided["persistent_workers"]["status"], "applied")
        cold, epoch = run.one("cold"), run.one("epoch")
        self.assertEqual((cold["workers"], cold["persistent_workers"], cold["prefetch_factor"]), (2, True, 4))
        self.assertEqual(epoch["worker_pids"], cold["worker_pids"])  # persistent: the same processes
        workers = [p for p in run.one("memory")["processes"] if p["role"] == "worker"]
        self.assertEqual(sorted(p["pid"] for p in workers), sorted(cold["worker_pids"]))
        cpu = run.one("done")["cpu"]
        self.assertEqual(cpu["wall_s"], run.one("done")["window_s"])
        names = [p["name"] for p in cpu["parts"]]
        self.assertEqual(names[0], "main")
        self.assertEqual(sorted(names[1:]), ["worker 0 (loader 0)", "worker 1 (loader 0)"])
        self.assertEqual(sorted(p["pid"] for p in cpu["parts"][1:]), sorted(cold["worker_pids"]))
        parts = sum(p["user_s"] + p["system_s"] for p in cpu["parts"])
        self.assertAlmostEqual(parts, cpu["cpu_s"], delta=1e-6)
        self.assertTrue(all(p["peak_rss_bytes"] > 0 for p in cpu["parts"]))

    def test_refused(self):
        """prefetch/persistent without workers are refused; overrides_loader limits them to loader 0."""
        run = result("overrides_refused")
        self.assertEqual((run.status, run.stdout), (0, "built 0 2 3\n"), run.stderr)
        loaders = run.of("loader")
        self.assertEqual([lo["overrides_target"] for lo in loaders], [True, False, False])
        decided = {d["key"]: d for d in loaders[0]["overrides"]}
        self.assertEqual(decided["prefetch_factor"]["status"], "refused")
        self.assertIn("num_workers > 0", decided["prefetch_factor"]["reason"])
        self.assertEqual(decided["persistent_workers"]["status"], "refused")
        self.assertEqual((decided["batch_size"]["status"], decided["batch_size"]["changes_training"]),
                         ("applied", True))
        self.assertEqual(loaders[0]["batch_size"], 8)
        self.assertEqual(loaders[1]["overrides"], [])
        self.assertEqual(run.one("end")["phase_at_end"], "no DataLoader iterated")
        self.assertEqual(loaders[0]["adjustments"], [
            {"key": "prefetch_factor", "asked": 4, "in_effect": None, "by": "stallscope",
             "why": "override refused: prefetch_factor needs num_workers > 0 (DataLoader requires None "
                    "with num_workers=0)"},
            {"key": "persistent_workers", "asked": True, "in_effect": False, "by": "stallscope",
             "why": "override refused: persistent_workers needs num_workers > 0"},
            {"key": "batch_size", "asked": 4, "in_effect": 8, "by": "stallscope",
             "why": "override applied: it changes the training itself"}])
        self.assertEqual(loaders[1]["adjustments"], [])

    def test_implied(self):
        """num_workers -> 0 clears the script's own prefetch, persistent and context."""
        run = result("overrides_implied")
        self.assertEqual((run.status, run.stdout), (0, "built 0 0 None\n"), run.stderr)
        a, b, c = run.of("loader")
        self.assertEqual(a["overrides"][0]["status"], "unchanged")
        implied = {d["key"]: d for d in b["overrides"] if d["status"] == "implied"}
        self.assertEqual(sorted(implied), ["multiprocessing_context", "persistent_workers", "prefetch_factor"])
        self.assertEqual(implied["multiprocessing_context"]["script"], "spawn")
        self.assertEqual((b["prefetch_factor"], b["persistent_workers"], b["multiprocessing_context"]),
                         (None, False, None))
        refused = {d["key"]: d for d in c["overrides"]}["batch_size"]
        self.assertEqual(refused["status"], "refused")
        self.assertIn("batch_sampler", refused["reason"])
        # Every adjustment is listed where the runner prints it from, with what is in effect.
        self.assertEqual([(a["key"], a["asked"], a["in_effect"], a["by"]) for a in b["adjustments"]],
                         [("batch_size", 4, 2, "stallscope"),
                          ("prefetch_factor", 3, None, "stallscope"),
                          ("persistent_workers", True, False, "stallscope"),
                          ("multiprocessing_context", "spawn", None, "stallscope")])
        self.assertEqual((b["in_effect"]["num_workers"], b["in_effect"]["persistent_workers"],
                          b["in_effect"]["prefetch_factor"], b["in_effect"]["start_method"]),
                         (0, False, None, None))

    def test_spawn_workers_stay_silent(self):
        """Spawned workers boot the instrumentation too (same env): they write nothing, print nothing."""
        run = result("spawn_workers")
        self.check_window(run, 6)  # run.main asserts one process wrote
        self.assertEqual(run.stderr, "")
        cold = run.one("cold")
        self.assertEqual((cold["workers"], cold["start_method"]), (1, "spawn"))
        self.assertEqual(run.one("loader")["start_method_source"], "multiprocessing_context")


class ScriptUntouched(JobTest):
    def test_output_passes_through(self):
        """Prints (buffered stdout, stderr) come through exactly, up to the window's end."""
        run = result("output_passes_through")
        self.check_window(run, 4)
        want_out = "before\n" + "".join(f"step {i} {[2.0 * i, 2.0 * i + 1]}\n" for i in range(7))
        self.assertEqual(run.stdout, want_out)
        self.assertEqual(run.stderr, "err before\n" + "".join(f"err {i}\n" for i in range(7)))

    def test_script_without_torch(self):
        quiet, _ = result("no_torch_and_bad_config")
        self.assertEqual(quiet.status, 0, quiet.stderr)
        self.assertEqual(quiet.stdout, "['stallscope_job', 'stallscope_job.config', 'stallscope_job.hook', "
                                       "'stallscope_job.start']\n_Finder\n")
        self.assertEqual(quiet.by_pid, {})

    def test_bad_config(self):
        _, bad = result("no_torch_and_bad_config")
        self.assertEqual((bad.status, bad.stdout), (2, ""))
        self.assertEqual(bad.stderr,
                         "stallscope: STALLSCOPE_JOB.steps: expected an integer >= 1, got the string '5'\n")
        (records,) = bad.by_pid.values()
        self.assertEqual([(r["type"], r["where"]) for r in records], [("error", "config")])

    def test_user_sitecustomize_chained(self):
        """The first sitecustomize after ours runs: exactly the one Python runs without us."""
        on, bare, off = result("sitecustomize_chain")
        self.assertEqual((bare.returncode, bare.stderr), (0, "site first\n"))
        self.assertEqual((on.status, on.stdout, on.stderr), (0, "_Finder\n", bare.stderr))
        # Without STALLSCOPE_JOB the boot folder on the path only chains.
        self.assertEqual((off.status, off.stderr, off.by_pid), (0, bare.stderr, {}))
        self.assertNotEqual(off.stdout, "_Finder\n")

    def test_config_parsing(self):
        out = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, out)
        good = launch.config(out, overrides={"num_workers": 2})
        self.assertEqual(parse(json.dumps(good)).overrides, {"num_workers": 2})
        cases = [
            ({"mode": "fast"}, "STALLSCOPE_JOB.mode: expected 'whole_run' or 'diagnostic'"),
            ({"overrides": {"workers": 2}}, "STALLSCOPE_JOB.overrides: unknown key 'workers'"),
            ({"overrides": {"num_workers": -1}}, "STALLSCOPE_JOB.overrides.num_workers: expected an integer >= 0"),
            ({"overrides": {"multiprocessing_context": "thread"}},
             "STALLSCOPE_JOB.overrides.multiprocessing_context: expected 'fork', 'spawn', 'forkserver' or null"),
            ({"replay": {"batches": 0}}, "STALLSCOPE_JOB.replay.batches: expected an integer >= 1"),
            ({"replay": True}, "STALLSCOPE_JOB.replay: expected false or"),
            ({"replay": {"batches": 2, "max_bytes": 0}}, "STALLSCOPE_JOB.replay.max_bytes: expected an integer >= 1"),
            ({"replay": {"max_bytes": 9}}, "STALLSCOPE_JOB.replay: expected false or"),
            ({"protocol": 1}, "STALLSCOPE_JOB.protocol: expected 2"),
            ({"warmup": 1.5}, "STALLSCOPE_JOB.warmup: expected an integer >= 0, got the number 1.5"),
            ({"out_dir": os.path.join(out, "missing")}, "STALLSCOPE_JOB.out_dir: expected an existing folder"),
            ({"overrides_loader": -1}, "STALLSCOPE_JOB.overrides_loader: expected an integer >= 0"),
            ({"extra": 1}, "STALLSCOPE_JOB: unknown key 'extra'"),
        ]
        for change, message in cases:
            with self.subTest(change=change):
                with self.assertRaises(ConfigError) as caught:
                    parse(json.dumps(dict(good, **change)))
                self.assertTrue(str(caught.exception).startswith(message), str(caught.exception))
        missing = dict(good)
        del missing["unit"]
        with self.assertRaisesRegex(ConfigError, "missing key 'unit'"):
            parse(json.dumps(missing))
        with self.assertRaisesRegex(ConfigError, "expected a JSON object, got text that is not JSON"):
            parse("{")


class RankEnvironment(unittest.TestCase):
    """What a rank's `hello` carries of its launcher's variables: enough for the runner's layout."""

    def test_torchrun_and_slurm_variables_verbatim_others_left_out(self):
        from stallscope_job.records import rank_env

        torchrun = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "none",
                    "HOME": "/root"}
        self.assertEqual(rank_env(torchrun), {k: v for k, v in torchrun.items() if k != "HOME"})
        slurm = {"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
                 "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node[01-02]", "PATH": "/bin"}
        self.assertEqual(rank_env(slurm), {k: v for k, v in slurm.items() if k != "PATH"})
        self.assertEqual(rank_env({}), {})


class CopyClockInProcess(unittest.TestCase):
    """The diagnostic copy wrappers, in this process (no accelerator is needed to see what they count)."""

    def test_only_host_to_device_copies_count(self):
        import threading
        from types import SimpleNamespace

        import torch

        from stallscope_job.copies import CopyClock
        from stallscope_steps.clock import StepClock

        try:  # what the unpatched copy does here (an error on a machine without CUDA)
            torch.ones(2).to("cuda")
            unpatched = None
        except Exception as e:  # noqa: BLE001 (compared below)
            unpatched = (type(e), str(e))
        spans = []
        tracker = SimpleNamespace(depth=0, tid=threading.get_ident(),
                                  copied=lambda start, ns: spans.append(ns))
        session = SimpleNamespace(phase="window", tracker=tracker,
                                  clock=StepClock("diagnostic", lambda: None))
        clock = CopyClock(session)
        clock.install()
        self.addCleanup(clock.uninstall)
        x = torch.ones(3)
        self.assertEqual(x.to(torch.float64).dtype, torch.float64)
        x.to("cpu"), x.to(x), x.to(device="cpu", dtype=torch.float16), torch.empty(3).copy_(x)
        self.assertEqual((clock.total, spans), (0, []))
        if unpatched is None:
            self.assertEqual(x.to("cuda").device.type, "cuda")
            self.assertEqual(clock.total, 1)
            self.assertGreater(spans[0], 0)
        else:
            with self.assertRaises(unpatched[0]) as caught:
                x.to("cuda", non_blocking=True)
            self.assertEqual(str(caught.exception), unpatched[1])
            self.assertEqual((clock.total, clock._inside.n, spans), (0, 0, []))
        tracker.depth = 1  # inside a fetch: the loader's own copies belong to the wait
        x.to("cpu")
        self.assertEqual(x.to.__name__, "to")
        clock.uninstall()  # the originals back, as they were (inherited from TensorBase)
        self.assertEqual([n for n in ("to", "cuda", "copy_") if n in torch.Tensor.__dict__], [])
        self.assertIs(torch.Tensor.to, torch._C.TensorBase.to)


class WhichLoaderAndReplay(JobTest):
    def test_the_fallback_times_the_loader_when_no_optimizer_steps(self):
        """No optimizer: after warm-up + 64 batches of DataLoader iteration index 1 (loader=1), the
        fallback times that loader's loop; the other loader, iterated first, is not its wait."""
        run = result("second_loader")
        series = self.check_window(run, 5, method="loader_next")
        self.assertEqual(set(series["samples"]), {4})
        colds = {c["iteration_index"]: c for c in run.of("cold")}
        self.assertEqual((colds[1]["loader"], colds[0]["loader"]), (0, 1))
        train, val = run.of("loader")
        self.assertEqual((val["class"], val["batch_size"]), ("__main__.ValLoader", 16))
        done = run.one("done")
        self.assertEqual((done["step"]["boundary"], done["step"]["iteration_index"], done["step"]["loader"]),
                         ("loader_next", 1, 0))
        self.assertEqual(done["wait"]["method"], "loader_next")
        self.assertEqual(run.one("window")["warmup_taken"], 1)
        roles = {lo["loader"]: lo["role"] for lo in done["loaders"]}
        self.assertEqual(roles[0], "training")

    def test_replay(self):
        """Replay holds 3 real batches; the window's next() then costs no loader work."""
        run = result("replay")
        series = self.check_window(run, 15)
        held = run.one("replay")
        self.assertEqual((held["batches"], held["requested"], held["short"]), (3, 3, None))
        self.assertGreater(held["gather_s"], 3 * 8 * 0.003 * 0.9)
        self.assertLess(max(series["next_ns"]), 2_000_000)  # a real next() sleeps 24 ms
        self.assertTrue(run.one("window")["replay"] and run.one("done")["replay"])

    def test_replay_memory_limit(self):
        """max_bytes stops the gathering before one more batch would pass it."""
        run = result("replay_limited")
        self.check_window(run, 10)
        held = run.one("replay")
        self.assertEqual((held["batches"], held["requested"], held["bytes"], held["max_bytes"]),
                         (3, 10, 3 * 1088, 3500))
        self.assertTrue(held["short"].startswith("one more batch would pass max_bytes"), held["short"])


class Faults(JobTest):
    def test_fails_before_first_step(self):
        run = result("fault_first_step")
        self.assertEqual(run.status, 1)
        self.assertIn("RuntimeError: boom at the first step", run.stderr)  # the script's own traceback
        self.check_common(run)
        end = run.one("end")
        self.assertEqual((end["reason"], end["status"], end["exception"], end["steps"]),
                         ("exception", 1, "RuntimeError", 0))
        self.assertEqual(end["traceback_tail"][-1], "RuntimeError: boom at the first step")
        self.assertIsNone(end["pending_step"])  # no step boundary yet: no training thread known
        self.assertEqual(end["phase_at_end"], "warmup")
        # The user's own frame, and the whole traceback for the bundle.
        script = str(run.out.parent / "train.py")
        lines = Path(script).read_text().splitlines()
        line = next(n for n, text in enumerate(lines, 1) if "boom at the first step" in text)
        self.assertEqual(end["user_frame"], {"file": script, "line": line, "function": "<module>",
                                             "code": "raise RuntimeError('boom at the first step')"})
        self.assertIsNone(end["worker_frame"])
        self.assertTrue(end["traceback"].startswith("Traceback (most recent call last):\n"))
        self.assertTrue(end["traceback"].endswith("RuntimeError: boom at the first step\n"))
        self.assertEqual(end["exception_module"], "builtins")

    def test_a_worker_failure_names_the_users_frame_in_the_worker(self):
        run = result("worker_fails")
        self.assertEqual(run.status, 1)
        self.assertIn("KeyError", run.stderr)  # the script's own traceback, untouched
        end = run.one("end")
        self.assertEqual(end["exception"], "KeyError")
        script = str(run.out.parent / "train.py")
        self.assertEqual(end["user_frame"]["file"], script)  # the loop's line, in the main process
        self.assertIn("DataLoader(Broken()", end["user_frame"]["code"])
        self.assertEqual((end["worker_frame"]["file"], end["worker_frame"]["function"]),
                         (script, "__getitem__"))
        self.assertIn("raise KeyError", end["worker_frame"]["code"])

    def test_fails_mid_window_keeps_steps(self):
        run = result("fault_mid_window")
        self.assertEqual(run.status, 1)
        end = run.one("end")
        self.assertEqual((end["reason"], end["exception"], end["steps"]), ("exception", "ValueError", 7))
        self.assertEqual(len(run.series()["step_ns"]), 7)

    def test_fewer_steps_than_asked(self):
        run = result("fault_short")
        self.assertEqual((run.status, run.stdout), (0, "loop over\n"), run.stderr)
        end = run.one("end")
        self.assertEqual((end["reason"], end["status"], end["steps"]), ("exit", None, 8))
        # After the last optimizer step a step began (the loop's StopIteration) and never ended.
        self.assertFalse(end["pending_step"]["waiting_for_data"])
        self.assertEqual(len(run.series()["step_ns"]), 8)

    def test_sys_exit_mid_window(self):
        run = result("fault_sys_exit")
        self.assertEqual(run.status, 3)
        end = run.one("end")
        self.assertEqual((end["reason"], end["status"], end["steps"]), ("sys.exit", 3, 4))

    def test_os_exit_mid_window(self):
        run = result("fault_os_exit")
        self.assertEqual(run.status, 4)
        end = run.one("end")
        self.assertEqual((end["reason"], end["status"], end["steps"]), ("os._exit", 4, 4))
        self.assertEqual(len(run.series()["step_ns"]), 4)

    def test_sigterm_flushes_steps(self):
        """A hang is the runner's to time out; its SIGTERM still gets the steps and an `end`."""
        first, run = result("fault_sigterm")
        self.assertEqual(first, "hanging\n", run.stderr)
        self.assertEqual(run.status, -signal.SIGTERM, run.stderr)
        end = run.one("end")
        self.assertEqual((end["reason"], end["signal"], end["steps"]), ("signal", "SIGTERM", 10))
        self.assertEqual(len(run.series()["step_ns"]), 10)
        self.assertEqual((end["pending_step"]["waiting_for_data"], end["pending_step"]["waiting_ns"]),
                         (False, None))  # hung in its own code, not waiting for data
        self.assertGreater(end["pending_step"]["started_ns_ago"], 0)


class TrainingThread(JobTest):
    """The step is the training thread's, whatever stands between it and the DataLoader."""

    def test_a_background_thread_fills_the_queue(self):
        """The training thread's wait is its get() on the queue the loader's thread fills, not that
        thread's next(): 4 samples x 4 ms per batch against a tiny model, input-bound."""
        run = result("thread_buffer")
        series = self.check_window(run, 12)
        self.assertEqual(set(series["batches"]), {1})
        self.assertEqual(set(series["samples"]), {4})
        self.assertGreater(sum(series["next_ns"]) / sum(series["step_ns"]), 0.6)
        done = run.one("done")
        self.assertEqual(done["training_thread"], {"name": "MainThread", "main": True})
        (queue,) = done["queues"]
        self.assertEqual((queue["data"], queue["fed_by"], queue["role"], queue["class"]),
                         (True, [0], "training", "queue.Queue"))
        (loader,) = done["loaders"]
        self.assertEqual((loader["role"], loader["threads"]), ("training", ["other"]))
        self.assertIn("fed queue #0", {c["why"] for c in loader["classification"]})
        self.assertEqual(done["wait"]["loaders_iterated_elsewhere_unseen"], [])
        # Counted where the training thread takes them (sources.count_at_gets): the window's 12.
        (stats,) = run.one("memory")["loaders"]
        self.assertEqual((stats["batches"], stats["samples"]), (12, 48))
        self.assertGreaterEqual(stats["samples_since_uss_open"], 48)

    def test_replay_through_the_queue(self):
        """The loader's thread gathers and then replays: the training thread no longer waits."""
        run = result("thread_buffer_replay")
        series = self.check_window(run, 12)
        held = run.one("replay")
        self.assertEqual([(p["loader"], p["batches"], p["short"]) for p in held["loaders"]], [(0, 4, None)])
        self.assertGreater(held["gather_s"], 4 * 4 * 0.004 * 0.9)
        steps = sorted(series["next_ns"])
        self.assertLess(steps[len(steps) // 2], 2_000_000)  # a real batch takes 16 ms

    def test_a_new_polled_queue_each_epoch(self):
        """MONAI's shape: gets with a timeout on a queue made each epoch; the gets before its first
        batch (the loader's thread starting) are the step's wait too."""
        run = result("polling_buffer")
        series = self.check_window(run, 12)
        self.assertEqual(set(series["batches"]), {1})
        # Each batch costs 4 x 3 ms in the loader's thread; the polled wait shows nearly all of it.
        self.assertGreater(sorted(series["next_ns"])[6], 8_000_000)
        done = run.one("done")
        self.assertGreaterEqual(len(done["queues"]), 4)  # one per epoch: 3 batches each
        self.assertEqual({q["role"] for q in done["queues"] if q["gets"]}, {"training"})
        # Each epoch's new queue counts the loader's batches at its gets, as the first did.
        (stats,) = run.one("memory")["loaders"]
        self.assertEqual(stats["batches"], 12)

    def test_validation_under_no_grad_is_apart(self):
        run = result("validation_no_grad")
        series = self.check_window(run, 12)
        done = run.one("done")
        roles = {lo["loader"]: lo for lo in done["loaders"]}
        self.assertEqual((roles[0]["role"], roles[1]["role"]), ("training", "validation"))
        self.assertEqual({c["why"] for c in roles[1]["classification"]},
                         {"taken with gradients disabled (torch.no_grad or inference_mode)"})
        # A pass of 8 batches, each with a 2 ms sleep, every 4th step: taken out of those steps.
        apart = [a for a in series["apart_ns"] if a]
        self.assertEqual(len(apart), 3)
        self.assertTrue(all(a > 8 * 2_000_000 for a in apart), apart)
        self.assertEqual(set(series["batches"]), {1})
        self.assertAlmostEqual(done["apart_s"], sum(apart) / 1e9, delta=1e-9)

    def test_validation_by_islice_is_apart_in_diagnostic_mode(self):
        """No no_grad around the fetches: three batches, then the iterator freed, then training."""
        run = result("validation_islice")
        series = self.check_window(run, 12, diagnostic=True)
        roles = {lo["loader"]: lo for lo in run.one("done")["loaders"]}
        self.assertEqual(roles[1]["role"], "validation")
        whys = {c["why"] for c in roles[1]["classification"] if c["phase"] == "window"}
        self.assertTrue(whys <= {"its iterator ended (or was freed) before any backward or optimizer step",
                                 "several batches with no backward or optimizer step between them, "
                                 "then another source's"}, whys)
        apart = [a for a in series["apart_ns"] if a]
        self.assertEqual(len(apart), 3)
        self.assertTrue(all(a > 3 * 2_000_000 for a in apart), apart)


class PeakMemory(JobTest):
    """A window's peak is its own: reset when it opens, for the main process and each worker."""

    @staticmethod
    def peaks(run: Run) -> tuple[int, int]:
        memory = run.one("memory")
        worker0 = [p for p in memory["processes"] if p["role"] == "worker" and p["worker_id"] == 0]
        return memory["main_peak_rss_bytes"], worker0[0]["peak_rss_bytes"]

    def test_a_window_that_allocates_has_the_higher_peak(self):
        inside, before = result("peaks_in_window"), result("peaks_in_warmup")
        for run in (inside, before):
            self.check_window(run, 12)
            memory = run.one("memory")
            self.assertEqual(memory["main_peak_since"], "window")
            workers = [p for p in memory["processes"] if p["role"] == "worker"]
            self.assertEqual(sorted(w["worker_id"] for w in workers), [0, 1])
            for w in workers:
                self.assertEqual((w["peak_since"], w["alive_at_open"], w["ended_in_window"]),
                                 ("window", True, False))
                self.assertGreaterEqual(w["peak_rss_bytes"], w["rss_bytes"])
                self.assertGreater(w["uss_open_bytes"], 0)
            self.assertEqual(memory["workers_peak_rss_bytes"], sum(w["peak_rss_bytes"] for w in workers))
            (stats,) = memory["loaders"]
            self.assertEqual((stats["batches"], stats["samples"], stats["batch_bytes"]), (12, 24, 2 * 4 * 4 + 2 * 8))
            self.assertGreaterEqual(stats["samples_since_uss_open"], stats["samples"])
        (main_in, worker_in), (main_before, worker_before) = self.peaks(inside), self.peaks(before)
        self.assertGreater(main_in - main_before, 150 * MiB, (main_in, main_before))
        self.assertGreater(worker_in - worker_before, 150 * MiB, (worker_in, worker_before))


class InEffect(JobTest):
    def test_pin_memory_asked_on_the_cpu_is_not_in_effect(self):
        import torch

        run = result("pin_on_cpu")
        self.assertEqual(run.status, 0, run.stderr)
        available = torch.accelerator.is_available()
        for lo in run.of("loader"):
            self.assertTrue(lo["pin_memory"])  # what was asked (the override, applied)
            self.assertEqual(lo["in_effect"]["pin_memory"], available)
            pin = [a for a in lo["adjustments"] if a["key"] == "pin_memory"]
            self.assertEqual(pin, [] if available else [
                {"key": "pin_memory", "asked": True, "in_effect": False, "by": "pytorch",
                 "why": "no accelerator is available, so PyTorch does not pin"}])


class IterableAndFrameworks(JobTest):
    def test_iterable_dataset(self):
        run = result("iterable")
        series = self.check_window(run, 10)
        loader = run.one("loader")
        self.assertTrue(loader["iterable_dataset"])
        self.assertEqual(loader["sampler"], "torch.utils.data.dataloader._InfiniteConstantSampler")
        self.assertIsNone(loader["dataset_len"])
        self.assertIn("TypeError", loader["dataset_len_error"])
        self.assertIsNone(loader["batches_per_epoch"])
        self.assertTrue(any("duplicated" in n for n in loader["notes"]))
        self.assertEqual(set(series["samples"]), {5})

    def test_lightning_trainer(self):
        run = result("lightning")
        if run is None:
            self.skipTest("lightning is not installed in this environment")
        series = self.check_window(run, 10)
        self.assertNotIn("fit done", run.stdout)
        self.assertEqual(set(series["samples"]), {64})
        self.assertEqual(run.one("cold")["loader"], run.of("loader")[-1]["index"])


if __name__ == "__main__":
    unittest.main()
