"""Rough whole-run overhead of the instrumentation, two ways.

    python -m stallscope_job.overhead [--rounds 5] [--steps 2000] [--warmup 50] [--workers 0]
    python -m stallscope_job.overhead --micro [--rounds 40] [--steps 500]

Default: one self-timing training script, with and without STALLSCOPE_JOB, interleaved processes. The
script times its own steps [warmup, warmup + steps) with perf_counter and prints the mean just before
asking for the batch that ends the window, so both variants print the same measure (the instrumented
process ends right after). A light in-memory loop is the worst case: its steps are short.

--micro: one process, two identical DataLoaders, the first measured (whole-run) and the second not;
chunks of next() on each, alternated (AB, BA, ...). The difference per call is the proxy's cost, free
of the noise between processes, with one difference per pair of rounds for its spread; the same script
without STALLSCOPE_JOB gives the noise floor (both unmeasured).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

from . import launch

SCRIPT = """
    import sys, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    warmup, steps, workers, batch = (int(a) for a in sys.argv[1:5])
    g = torch.Generator().manual_seed(0)
    data = TensorDataset(torch.randn(65536, 64, generator=g), torch.randint(0, 4, (65536,), generator=g))
    loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers)
    model = torch.nn.Linear(64, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    i, start = 0, None
    while True:
        for x, y in loader:
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            i += 1
            if i == warmup:
                start = time.perf_counter()
            if i == warmup + steps:
                print(f"STEP_S {(time.perf_counter() - start) / steps:.9f}", flush=True)
                sys.exit(0)
"""


MICRO = """
    import sys, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    rounds, chunk, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    # Ready batches (a tensor pair each) taken one per next() without collation: a next() of a
    # few µs, so the proxy's own cost stands out of the loader's noise.
    g = torch.Generator().manual_seed(0)
    data = [(torch.randn(batch, 4, generator=g), torch.randint(0, 4, (batch,), generator=g))
            for _ in range(rounds * chunk + 1)]
    measured = DataLoader(data, batch_size=None)
    plain = DataLoader(data, batch_size=None)
    a, b = iter(measured), iter(plain)  # iterated first: the measured one (loader 0)
    rounds_a, rounds_b = [], []
    for r in range(rounds):
        for it, first in ((a, True), (b, False)) if r % 2 == 0 else ((b, False), (a, True)):
            t = time.perf_counter()
            for _ in range(chunk):
                next(it)
            t = time.perf_counter() - t
            (rounds_a if first else rounds_b).append(t)
    n = rounds * chunk
    # One difference per pair of rounds (AB then BA), each order once.
    pairs = [(rounds_a[i] + rounds_a[i + 1] - rounds_b[i] - rounds_b[i + 1]) / (2 * chunk)
             for i in range(0, rounds - 1, 2)]
    print(f"MICRO {sum(rounds_a) / n:.9f} {sum(rounds_b) / n:.9f}", flush=True)
    print("PAIRS " + " ".join(f"{d:.9f}" for d in pairs), flush=True)
"""


def _micro(tmp: str, rounds: int, chunk: int, batch: int) -> dict:
    script = os.path.join(tmp, "micro.py")
    with open(script, "w") as f:
        f.write(textwrap.dedent(MICRO))
    out = {}
    for variant in ("whole_run", "off"):
        folder = os.path.join(tmp, f"micro-{variant}")
        os.mkdir(folder)
        job = launch.config(folder, warmup=0, steps=rounds * chunk + 10) if variant == "whole_run" else None
        env = launch.job_env(job, dict(os.environ, OMP_NUM_THREADS="1"))
        proc = subprocess.run([sys.executable, script, str(rounds), str(chunk), str(batch)], capture_output=True,
                              text=True, env=env, timeout=600)
        line = next((l for l in proc.stdout.splitlines() if l.startswith("MICRO ")), None)
        if line is None:
            raise RuntimeError(f"{script} ({variant}) printed no MICRO line; status {proc.returncode}, "
                               f"stderr: {proc.stderr[-1500:]}")
        first, second = (float(v) for v in line.split()[1:])
        pairs = next((l.split()[1:] for l in proc.stdout.splitlines() if l.startswith("PAIRS ")), [])
        out[variant] = {"loader0_next_us": round(first * 1e6, 3), "loader1_next_us": round(second * 1e6, 3),
                        "difference_us": round((first - second) * 1e6, 3),
                        "pair_difference_us": [round(float(d) * 1e6, 3) for d in pairs]}
    return {"micro": out, "calls_each": rounds * chunk, "batch": batch,
            "meaning": "whole_run.difference_us is the proxy's cost per next(); off.difference_us the noise; "
                       "pair_difference_us the same per pair of rounds (AB, BA), for the spread"}


def _one(script: str, args: list[str], job: dict | None) -> float:
    env = launch.job_env(job, dict(os.environ, OMP_NUM_THREADS="1"))
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env,
                          timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("STEP_S "):
            return float(line.split()[1])
    raise RuntimeError(f"{script} {args} (instrumented: {job is not None}) printed no STEP_S line; "
                       f"status {proc.returncode}, stderr: {proc.stderr[-1500:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro", action="store_true")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="stallscope-overhead-") as tmp:
        if a.micro:
            print(json.dumps(_micro(tmp, a.rounds, a.steps, a.batch), indent=1))
            return
        script = os.path.join(tmp, "bench.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(SCRIPT))
        args = [str(a.warmup), str(a.steps), str(a.workers), str(a.batch)]
        times = {"plain": [], "whole_run": []}
        for r in range(a.rounds):
            order = ["plain", "whole_run"] if r % 2 == 0 else ["whole_run", "plain"]
            for variant in order:
                out = os.path.join(tmp, f"out-{r}-{variant}")
                os.mkdir(out)
                job = None if variant == "plain" else launch.config(out, warmup=a.warmup, steps=a.steps)
                times[variant].append(_one(script, args, job))
        plain, inst = statistics.median(times["plain"]), statistics.median(times["whole_run"])
        print(json.dumps({"rounds": a.rounds, "steps": a.steps, "workers": a.workers, "batch": a.batch,
                          "step_us": {k: [round(t * 1e6, 2) for t in v] for k, v in times.items()},
                          "median_step_us": {"plain": round(plain * 1e6, 2), "whole_run": round(inst * 1e6, 2)},
                          "overhead_us_per_step": round((inst - plain) * 1e6, 2),
                          "overhead_pct": round((inst / plain - 1) * 100, 2)}, indent=1))


if __name__ == "__main__":
    main()
