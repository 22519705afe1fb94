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
BASE_ENV = {"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def has_lightning() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import lightning"], capture_output=True)
    return probe.returncode == 0


class Run:
    """One finished unit: exit status, the script's own output, and every process's records."""

    def __init__(self, status: int, stdout: str, stderr: str, out_dir: Path) -> None:
        self.status, self.stdout, self.stderr = status, stdout, stderr
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
    for i, (x,) in enumerate(loader):
        print(f"step {i} {x.tolist()}")
        sys.stderr.write(f"err {i}\\n")
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

        for x in DataLoader(Stream(), batch_size=5):
            x.mean()
    """
    return case.run([str(case.script(body))], case.job(warmup=2, steps=10, overrides={"num_workers": 2}))


FAULT_LOOP = """
    import os, sys, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    loader = DataLoader(TensorDataset(torch.randn({samples}, 4)), batch_size=2)
    model = torch.nn.Linear(4, 1)
    for i, (x,) in enumerate(loader):
        {action}
        model(x).sum().backward()
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

    def check_window(self, run: Run, steps: int, diagnostic: bool = False) -> dict:
        """A completed window: the series are whole, consistent, and add up to window_s."""
        self.assertEqual(run.status, 0, run.stderr)
        self.check_common(run)
        done = run.one("done")
        series = run.series()
        self.assertEqual(done["steps"], steps)
        self.assertEqual(len(series["step_ns"]), steps)
        self.assertTrue(all(0 < n <= s for n, s in zip(series["next_ns"], series["step_ns"])))
        gaps = sum(r["gap_ns"] or 0 for r in run.of("epoch"))
        self.assertAlmostEqual((sum(series["step_ns"]) + gaps) / 1e9, done["window_s"], delta=1e-6)
        self.assertEqual(done["samples"], sum(series["samples"]))
        if diagnostic:
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
        self.assertTrue(all(e["gap_ns"] > 0 and e["phase"] == "window" for e in epochs))
        self.assertEqual(run.one("done")["epochs"], 3)
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
        self.assertEqual(run.one("end")["phase_at_end"], "measured loader never iterated")

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
            ({"protocol": 2}, "STALLSCOPE_JOB.protocol: expected 1"),
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

        saved = {n: torch.Tensor.__dict__.get(n) for n in ("to", "cuda", "copy_")}

        def restore():
            for name, method in saved.items():
                if method is None:
                    delattr(torch.Tensor, name)
                else:
                    setattr(torch.Tensor, name, method)

        self.addCleanup(restore)
        try:  # what the unpatched copy does here (an error on a machine without CUDA)
            torch.ones(2).to("cuda")
            unpatched = None
        except Exception as e:  # noqa: BLE001 (compared below)
            unpatched = (type(e), str(e))
        session = SimpleNamespace(phase="window", in_next_since=None, consumer=threading.get_ident(),
                                  transfer_acc=0, copies_acc=0)
        clock = CopyClock(session)
        clock.install()
        x = torch.ones(3)
        self.assertEqual(x.to(torch.float64).dtype, torch.float64)
        x.to("cpu"), x.to(x), x.to(device="cpu", dtype=torch.float16), torch.empty(3).copy_(x)
        self.assertEqual((clock.total, session.copies_acc), (0, 0))
        if unpatched is None:
            self.assertEqual(x.to("cuda").device.type, "cuda")
            self.assertEqual((clock.total, session.copies_acc), (1, 1))
            self.assertGreater(session.transfer_acc, 0)
        else:
            with self.assertRaises(unpatched[0]) as caught:
                x.to("cuda", non_blocking=True)
            self.assertEqual(str(caught.exception), unpatched[1])
            self.assertEqual((clock.total, clock._depth.n), (0, 0))
        session.in_next_since = 1  # inside next(): the loader's own copies belong to the wait
        x.to("cpu")
        self.assertEqual(x.to.__name__, "to")


class WhichLoaderAndReplay(JobTest):
    def test_second_loader_iterated(self):
        """A validation loader is iterated first; loader=1 measures the training loader."""
        run = result("second_loader")
        series = self.check_window(run, 5)
        self.assertEqual(set(series["samples"]), {4})
        cold = run.one("cold")
        self.assertEqual((cold["loader"], cold["iteration_index"]), (0, 1))
        train, val = run.of("loader")
        self.assertEqual((val["class"], val["batch_size"]), ("__main__.ValLoader", 16))

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
        self.assertFalse(end["pending_step"]["in_next"])

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
        self.assertIsNone(end["pending_step"])
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
        self.assertFalse(end["pending_step"]["in_next"])
        self.assertGreater(end["pending_step"]["started_ns_ago"], 0)


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
