"""The instrumentation's overhead per training step, for a plain loop and a background-thread loop, two ways.

    python -m stallscope_job.overhead [--rounds 5] [--steps 2000] [--warmup 50] [--workers 0]
    python -m stallscope_job.overhead --micro [--rounds 400] [--chunk 10]

Two loops, each the step of fixtures/job/train_self_timed.py (the script `cargo xtask bench
job-overhead` runs: an MLP 128 -> 512 -> 512 -> 10, batches of 64 from an in-memory DataLoader; a
light loop is the worst case, its steps are short): **plain** (`for x, y in loader`: the training thread calls next()) and **thread** (a
daemon thread iterates the DataLoader into a `queue.Queue(maxsize=2)`; the training thread calls
get(): MONAI's ThreadBuffer, prefetch_generator's BackgroundGenerator).

Default: each loop as one self-timing script, with and without STALLSCOPE_JOB (whole-run),
interleaved processes. The script times its steps [warmup, warmup + steps) from its optimizer's own
step post-hook (which torch runs before stallscope's global one, so the last step is timed before the
instrumented process ends) and prints the mean.

--micro: one process per loop and variant; short chunks of steps (10) with the instrumentation's
patches installed and removed in turn (stallscope_job.patches undoes and redoes them in place),
inside the open window. Each round is a pair, one chunk on and one off (on-off, off-on, ...), so
the machine's drift, which is slow beside a chunk of tens of milliseconds, falls on both halves
alike; each pair's share (on / off - 1, wall time) is one sample of the instrumentation's cost,
free of the noise between processes, and `cargo xtask bench job-overhead` takes their median with
its confidence interval. The same script without STALLSCOPE_JOB (variant `off`, nothing to
install) is the A/A check: its interval should hold 0. `micro` is the plain loop's, `micro_thread`
the thread loop's.
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
    wall, cpu = time.perf_counter_ns, time.process_time_ns
    for r in range(rounds):  # one pair of chunks per round: on then off, or off then on
        got = {}
        for on in ((True, False) if r % 2 == 0 else (False, True)):
            instrumented(on)
            t, c = wall(), cpu()
            for _ in range(chunk):
                step(*next(it))
            got[on] = (wall() - t, cpu() - c)
        print("PAIR", *got[True], *got[False], flush=True)
    instrumented(True)
    print("DONE", chunk, flush=True)
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


def _pairs(text: str, where: str) -> tuple[int, list[tuple[int, int, int, int]]]:
    """The chunk and each pair's (on wall, on CPU, off wall, off CPU) ns of a MICRO script's output."""
    pairs = [tuple(int(v) for v in l.split()[1:5]) for l in text.splitlines() if l.startswith("PAIR ")]
    done = [l for l in text.splitlines() if l.startswith("DONE ")]
    if not pairs or not done:
        raise RuntimeError(f"{where} printed no PAIR or DONE line: {text[-500:]}")
    return int(done[0].split()[1]), pairs


def _variant(pairs: list[tuple[int, int, int, int]], chunk: int) -> dict:
    """One variant's figures: totals per step, and per pair the difference (µs) and the share."""
    n = len(pairs) * chunk
    on, on_cpu, off, off_cpu = (sum(p[i] for p in pairs) / n / 1e3 for i in range(4))
    return {"pairs": len(pairs), "chunk": chunk,
            "on_step_us": round(on, 3), "off_step_us": round(off, 3),
            "difference_us": round(on - off, 3), "overhead_pct": round((on / off - 1) * 100, 3),
            "cpu_on_step_us": round(on_cpu, 3), "cpu_off_step_us": round(off_cpu, 3),
            "cpu_difference_us": round(on_cpu - off_cpu, 3),
            "pair_difference_us": [round((a - c) / chunk / 1e3, 3) for a, _, c, _ in pairs],
            "pair_share": [round(a / c - 1, 6) for a, _, c, _ in pairs]}


def _micro_loop(tmp: str, loop: str, rounds: int, chunk: int, batch: int, warmup: int) -> dict:
    script = _script(tmp, "micro.py", MICRO)
    out = {}
    for variant in ("whole_run", "off"):
        folder = tempfile.mkdtemp(prefix=f"micro-{loop}-{variant}-", dir=tmp)
        # A window far longer than the rounds: it stays open while they run.
        job = launch.config(folder, warmup=warmup, steps=10 * rounds * chunk) if variant == "whole_run" else None
        text = _run(script, [loop, str(warmup), str(rounds * chunk), "0", str(batch), str(chunk)], job)
        got_chunk, pairs = _pairs(text, f"{script} ({loop}, {variant})")
        out[variant] = _variant(pairs, got_chunk)
    return out


def micro(tmp: str, rounds: int, chunk: int, batch: int, warmup: int = 20) -> dict:
    plain = _micro_loop(tmp, "plain", rounds, chunk, batch, warmup)
    thread = _micro_loop(tmp, "thread", rounds, chunk, batch, warmup)
    return {"micro": plain, "micro_thread": thread, "rounds": rounds, "chunk": chunk, "batch": batch,
            "meaning": "per training step, with the instrumentation's patches installed (on) against "
                       "removed (off), in one process inside the open window: each round one chunk "
                       "of `chunk` steps on and one off, in the order on-off, off-on, ...; "
                       "pair_share[i] = round i's on time / off time - 1 (wall), "
                       "pair_difference_us[i] its difference per step; the totals over all rounds "
                       "in wall and in the process's CPU time (all its threads); variant `off` runs "
                       "the same with nothing installed (no STALLSCOPE_JOB): the A/A noise; micro is "
                       "the plain loop, micro_thread the background-thread loop"}


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
    parser.add_argument("--rounds", type=int, default=None, help="default 5, --micro 400")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--micro", action="store_true")
    parser.add_argument("--chunk", type=int, default=10, help="--micro: steps per chunk")
    a = parser.parse_args()
    a.rounds = a.rounds or (400 if a.micro else 5)
    with tempfile.TemporaryDirectory(prefix="stallscope-overhead-") as tmp:
        if a.micro:
            print(json.dumps(micro(tmp, a.rounds, a.chunk, a.batch), indent=1))
            return
        out = {"rounds": a.rounds, "steps": a.steps, "workers": a.workers, "batch": a.batch}
        for loop in LOOPS:
            out[loop] = processes(tmp, loop, a)
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
