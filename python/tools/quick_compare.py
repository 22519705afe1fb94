"""Loader-only images/s of the peers engines on generated JPEGs (pytorch workers 0/2, spdl concurrency 1/2).

    python python/tools/quick_compare.py            # with the peers venv's python

Writes 64 JPEGs of 500 x 375 (quality 90) to a temporary folder, then runs
the harness (`python -m stallscope_peer`, one process per configuration) with
model `none`: resize the shorter side to 256, centre crop 224, batch 32,
whole_run mode. Prints images/s of every epoch (epoch 0 includes starting
workers; the later ones are steady).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parents[1]


def make_jpegs(folder: Path, count: int, width: int, height: int, seed: int = 0) -> list[list]:
    """Photo-like content (gradients, blobs, mild noise) so decoding costs what real photos cost."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    files = []
    for i in range(count):
        img = np.zeros((height, width, 3), np.float32)
        for c in range(3):
            fx, fy, phase = rng.uniform(0.002, 0.02, 2).tolist() + [rng.uniform(0, 6.28)]
            img[..., c] = 128 + 90 * np.sin(xx * fx + yy * fy + phase)
        for _ in range(6):
            cx, cy = rng.uniform(0, width), rng.uniform(0, height)
            r = rng.uniform(20, 120)
            mask = (xx - cx) ** 2 + (yy - cy) ** 2 < r * r
            img[mask] = rng.uniform(0, 255, 3)
        img += rng.normal(0, 6, img.shape)
        path = folder / f"img{i:03d}.jpg"
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(path, quality=90)
        files.append([str(path), i % 10])
    return files


def request(engine: str, files, batches, workers: int = 0, concurrency: int = 1) -> dict:
    return {
        "protocol": 1, "engine": engine, "device": "cpu", "torch_threads": 1, "weights_seed": 0,
        "model": {"name": "none"},
        "source": {"kind": "images", "files": files, "resize": 256, "crop": 224,
                   "random_crop": False, "flip": False},
        "loader": {"batch_size": 32, "workers": workers, "prefetch": 2, "persistent": False,
                   "pin_memory": False, "context": "fork", "drop_last": False,
                   "concurrency": concurrency, "spdl_workers": "threads", "prefetch_to_device": False},
        "non_blocking": False, "epochs": len(batches), "modes": ["whole_run"], "batches": batches,
        "augment_seed": 0,
    }


def run(req: dict) -> list[dict]:
    env = dict(os.environ, PYTHONPATH=str(PYTHON_DIR), PYTHONDONTWRITEBYTECODE="1")
    env.pop("STALLSCOPE_HARNESS_FAULT", None)
    p = subprocess.run([sys.executable, "-m", "stallscope_peer"], input=json.dumps(req),
                       capture_output=True, text=True, env=env, timeout=600)
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    if p.returncode != 0 or not lines or lines[-1].get("type") != "done":
        raise SystemExit(f"harness failed ({p.returncode}): {lines[-1:]}\n{p.stderr[-2000:]}")
    return [x for x in lines if x["type"] == "epoch"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="stallscope-quick-compare-"))
    try:
        files = make_jpegs(folder, args.images, 500, 375)
        rng = random.Random(0)
        batches = []
        for _ in range(args.epochs):
            order = list(range(len(files)))
            rng.shuffle(order)
            batches.append([order[i:i + 32] for i in range(0, len(order), 32)])
        configs = [
            ("pytorch workers=0", request("pytorch", files, batches, workers=0)),
            ("pytorch workers=2", request("pytorch", files, batches, workers=2)),
            ("spdl concurrency=1", request("spdl", files, batches, concurrency=1)),
            ("spdl concurrency=2", request("spdl", files, batches, concurrency=2)),
        ]
        print(f"{args.images} JPEGs 500x375 q90 -> resize 256, centre crop 224, batch 32, model none, "
              f"{os.cpu_count()} CPUs")
        print(f"{'configuration':22s} " + " ".join(f"{'epoch ' + str(e):>10s}" for e in range(args.epochs))
              + "   (images/s)")
        for name, req in configs:
            epochs = run(req)
            rates = [e["samples"] / e["seconds"] for e in epochs]
            print(f"{name:22s} " + " ".join(f"{r:10.1f}" for r in rates))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
