"""The seeds/003 CNN's train step in Python PyTorch, timed per step (the Python side of `cargo xtask bench compute-peers`).

Reads one JSON object of arguments (the first command-line argument, else
standard input): `batch`, `steps`, `seed`, `threads`. Builds the model and the
step of the peers harness (python/stallscope_peer/models.py: fashion_cnn,
105,866 parameters, Adam 1e-3, zero_grad to None, forward, mean
cross-entropy, backward, step) on the CPU, generates `steps` distinct
synthetic batches as the runner's compute experiment does, runs 10 untimed
warm-up steps, then times `steps` steps one by one with perf_counter_ns.
Prints one JSON line: the arguments, the versions and `step_ns`.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from stallscope_peer.models import Trainer, parameter_count  # noqa: E402

WARM_UP_STEPS = 10
MODEL = {"name": "fashion_cnn"}
OPTIMIZER = {"name": "adam", "lr": 1e-3}


def parse_args(text: str) -> dict:
    """The arguments, each a positive integer (seed may be 0)."""
    args = json.loads(text)
    if not isinstance(args, dict):
        raise ValueError(f"expected a JSON object of arguments, got {type(args).__name__}")
    out = {}
    for key, low in (("batch", 1), ("steps", 1), ("seed", 0), ("threads", 1)):
        value = args.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{key}: expected an integer >= {low}, got {value!r}")
        out[key] = value
    return out


def measure(batch: int, steps: int, seed: int, threads: int) -> tuple[list[int], int]:
    """Per-step nanoseconds of `steps` train steps after the warm-up, and the parameter count."""
    torch.set_num_threads(threads)
    trainer = Trainer(MODEL, OPTIMIZER, torch.device("cpu"), seed)
    torch.manual_seed(seed)
    batches = [trainer.synthetic_batch(batch) for _ in range(steps)]
    for i in range(WARM_UP_STEPS):
        trainer.step(*batches[i % steps])
    step_ns = []
    for x, y in batches:
        t0 = time.perf_counter_ns()
        trainer.step(x, y)
        step_ns.append(time.perf_counter_ns() - t0)
    return step_ns, parameter_count(trainer.module)


def main() -> int:
    try:
        args = parse_args(sys.argv[1] if len(sys.argv) > 1 else sys.stdin.read())
    except ValueError as e:
        print(f"compute_step: {e}", file=sys.stderr)
        return 2
    step_ns, parameters = measure(**args)
    print(json.dumps({
        **args,
        "model": MODEL["name"],
        "parameters": parameters,
        "optimizer": "adam",
        "lr": OPTIMIZER["lr"],
        "warm_up_steps": WARM_UP_STEPS,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "step_ns": step_ns,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
