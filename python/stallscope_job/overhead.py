"""The instrumentation's overhead per training step, for a plain loop and a background-thread loop, two ways.

    python -m stallscope_job.overhead [--rounds 5] [--steps 2000] [--warmup 50] [--workers 0]
    python -m stallscope_job.overhead --micro [--rounds 40] [--steps 500]

Two loops, each the step of fixtures/job/train_self_timed.py (the script `cargo xtask bench
job-overhead` runs: an MLP 128 -> 512 -> 512 -> 10, batches of 64 from an in-memory DataLoader; a
light loop is the worst case, its steps are short): **plain** (`for x, y in loader`: the training thread calls next()) and **thread** (a
daemon thread iterates the DataLoader into a `queue.Queue(maxsize=2)`; the training thread calls
get(): MONAI's ThreadBuffer, prefetch_generator's BackgroundGenerator).

Default: each loop as one self-timing script, with and without STALLSCOPE_JOB (whole-run),
interleaved processes. The script times its steps [warmup, warmup + steps) from its optimizer's own
step post-hook (which torch runs before stallscope's global one, so the last step is timed before the
instrumented process ends) and prints the mean.

--micro: one process per loop and variant; chunks of steps with the instrumentation's patches
installed and removed in turn (AB, BA, ...; stallscope_job.patches undoes and redoes them in place),
inside the open window, timed in wall time and in the process's CPU time (all its threads: the
thread loop's feeder too; steadier than wall time on a busy machine). The difference per step is the
instrumentation's cost, free of the noise between processes, with one difference per pair of rounds for its spread; the same script without
STALLSCOPE_JOB (variant `off`, nothing to install) gives the noise floor. `micro` is the plain
loop's (the keys `cargo xtask bench job-overhead` reads), `micro_thread` the thread loop's.
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

COMMON = """
    import os, queue, sys, threading, time
    import torch
    from torch.utils.data import DataLoader, TensorDataset
    loop, warmup, steps, workers, batch = sys.argv[1], *(int(a) for a in sys.argv[2:6])
    extra = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    total = warmup + 2 * steps + extra + 8  # micro: each round runs a chunk on and a chunk off
    g = torch.Generator().manual_seed(0)
    # The model of fixtures/job/train_self_timed.py (cargo xtask bench job-overhead's script).
    data = TensorDataset(torch.randn(total * batch, 128, generator=g),
                         torch.randint(0, 10, (total * batch,), generator=g))
    loader = DataLoader(data, batch_size=batch, shuffle=True, num_workers=workers)
    model = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()

    def batches():
        if loop == "plain":
            yield from loader
            return
        q = queue.Queue(maxsize=2)
        threading.Thread(target=lambda: [q.put(b) for b in loader], daemon=True).start()
        while True:
            yield q.get()

    def step(x, y):
        opt.zero_grad()
        loss_fn(model(x), y).backward()
        opt.step()
"""

SCRIPT = COMMON + """
    stamps = []
    opt.register_step_post_hook(lambda *_: stamps.append(time.perf_counter_ns()))
    for x, y in batches():
        step(x, y)
        if len(stamps) == warmup + steps:
            print(f"STEP_S {(stamps[-1] - stamps[warmup - 1]) / steps / 1e9:.9f}", flush=True)
            sys.exit(0)
"""

MICRO = COMMON + """
    # extra = the chunk; steps = rounds x chunk. The window is open from step `warmup` on.
    rounds, chunk = steps // extra, extra
    rt = None
    if os.environ.get("STALLSCOPE_JOB"):
        from stallscope_job import patches, runtime
        rt = runtime.RUNTIME
    state = [True]  # installed (by the job's start-up)

    def instrumented(on):
        if rt is None or on == state[0]:
            return
        if on:
            patches.dataloader(rt, sys.modules["torch.utils.data.dataloader"], rt.patches)
            patches.hot(rt, rt.patches)
        else:
            rt.patches.undo()
        state[0] = on

    it = batches()
    for _ in range(warmup):
        step(*next(it))
    times = {(on, clock): [] for on in (True, False) for clock in ("wall", "cpu")}
    for r in range(rounds):
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            instrumented(on)
            t, c = time.perf_counter_ns(), time.process_time_ns()
            for _ in range(chunk):
                step(*next(it))
            times[on, "cpu"].append(time.process_time_ns() - c)
            times[on, "wall"].append(time.perf_counter_ns() - t)
    instrumented(True)
    n = rounds * chunk
    for clock in ("wall", "cpu"):
        on, off = times[True, clock], times[False, clock]
        pairs = [(on[i] + on[i + 1] - off[i] - off[i + 1]) / (2 * chunk) for i in range(0, rounds - 1, 2)]
        print(f"MICRO {clock} {sum(on) / n / 1e9:.9f} {sum(off) / n / 1e9:.9f}", flush=True)
        print(f"PAIRS {clock} " + " ".join(f"{d / 1e9:.9f}" for d in pairs), flush=True)
"""

LOOPS = ("plain", "thread")


def _script(tmp: str, name: str, body: str) -> str:
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(body))
    return path


def _run(script: str, args: list[str], job: dict | None) -> str:
    env = launch.job_env(job, dict(os.environ, OMP_NUM_THREADS="1"))
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env,
                          timeout=900)
    if proc.returncode != 0 and "STEP_S" not in proc.stdout and "MICRO" not in proc.stdout:
        raise RuntimeError(f"{script} {args} (instrumented: {job is not None}): status {proc.returncode}, "
                           f"stderr: {proc.stderr[-1500:]}")
    return proc.stdout


def _micro_loop(tmp: str, loop: str, rounds: int, chunk: int, batch: int, warmup: int) -> dict:
    script = _script(tmp, "micro.py", MICRO)
    out = {}
    for variant in ("whole_run", "off"):
        folder = tempfile.mkdtemp(prefix=f"micro-{loop}-{variant}-", dir=tmp)
        # A window far longer than the rounds: it stays open while they run.
        job = launch.config(folder, warmup=warmup, steps=10 * rounds * chunk) if variant == "whole_run" else None
        text = _run(script, [loop, str(warmup), str(rounds * chunk), "0", str(batch), str(chunk)], job)
        out[variant] = {}
        for clock, prefix in (("wall", ""), ("cpu", "cpu_")):
            line = next((l for l in text.splitlines() if l.startswith(f"MICRO {clock} ")), None)
            if line is None:
                raise RuntimeError(f"{script} ({loop}, {variant}) printed no MICRO {clock} line: {text[-500:]}")
            on, off = (float(v) for v in line.split()[2:])
            pairs = next((l.split()[2:] for l in text.splitlines() if l.startswith(f"PAIRS {clock} ")), [])
            out[variant].update({
                f"{prefix}on_step_us": round(on * 1e6, 3), f"{prefix}off_step_us": round(off * 1e6, 3),
                f"{prefix}difference_us": round((on - off) * 1e6, 3),
                f"{prefix}overhead_pct": round((on / off - 1) * 100, 3),
                f"{prefix}pair_difference_us": [round(float(d) * 1e6, 3) for d in pairs]})
    return out


def micro(tmp: str, rounds: int, chunk: int, batch: int, warmup: int = 20) -> dict:
    plain = _micro_loop(tmp, "plain", rounds, chunk, batch, warmup)
    thread = _micro_loop(tmp, "thread", rounds, chunk, batch, warmup)
    return {"micro": plain, "micro_thread": thread, "steps_each": rounds * chunk, "batch": batch,
            "meaning": "per training step, with the instrumentation's patches installed (on) against "
                       "removed (off), chunks alternated in one process inside the open window: "
                       "whole_run.difference_us is its cost per step in wall time, cpu_difference_us in "
                       "the process's CPU time (all its threads; steadier on a busy machine), "
                       "off.difference_us the noise (nothing installed); pair_difference_us the same per "
                       "pair of rounds (AB, BA); micro is the plain loop, micro_thread the "
                       "background-thread loop"}


def processes(tmp: str, loop: str, a) -> dict:
    script = _script(tmp, "bench.py", SCRIPT)
    args = [loop, str(a.warmup), str(a.steps), str(a.workers), str(a.batch)]
    times: dict[str, list[float]] = {"plain": [], "whole_run": []}
    for r in range(a.rounds):
        for variant in (("plain", "whole_run") if r % 2 == 0 else ("whole_run", "plain")):
            folder = tempfile.mkdtemp(prefix=f"out-{loop}-{r}-{variant}-", dir=tmp)
            job = None if variant == "plain" else launch.config(folder, warmup=a.warmup, steps=a.steps)
            text = _run(script, args, job)
            line = next((l for l in text.splitlines() if l.startswith("STEP_S ")), None)
            if line is None:
                raise RuntimeError(f"{script} ({loop}, {variant}) printed no STEP_S line: {text[-500:]}")
            times[variant].append(float(line.split()[1]))
    plain, inst = statistics.median(times["plain"]), statistics.median(times["whole_run"])
    return {"step_us": {k: [round(t * 1e6, 2) for t in v] for k, v in times.items()},
            "median_step_us": {"plain": round(plain * 1e6, 2), "whole_run": round(inst * 1e6, 2)},
            "overhead_us_per_step": round((inst - plain) * 1e6, 2),
            "overhead_pct": round((inst / plain - 1) * 100, 2)}


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
            print(json.dumps(micro(tmp, a.rounds, a.steps, a.batch), indent=1))
            return
        out = {"rounds": a.rounds, "steps": a.steps, "workers": a.workers, "batch": a.batch}
        for loop in LOOPS:
            out[loop] = processes(tmp, loop, a)
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
