#!/usr/bin/env bash
# GPU check: run the runner's CUDA path on a machine with an NVIDIA GPU and
# PyTorch 2.11 (the libtorch that tch 0.24 expects), from a prebuilt binary —
# no Rust needed there. Writes one bundle per suite under OUT_DIR; about 2–4
# minutes on a recent GPU.
#
#   scripts/gpu-check.sh OUT_DIR
#
# STALLSCOPE_BIN     the binary (default: target/release/stallscope next to this script)
# STALLSCOPE_PYTHON  a python with torch 2.11 (default: /opt/torch/.venv/bin/python3, then python3)
set -euo pipefail

out=${1:?usage: scripts/gpu-check.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
bin=${STALLSCOPE_BIN:-$here/../target/release/stallscope}
python=${STALLSCOPE_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$python" ] || python=python3

# The installed PyTorch's lib/ serves both the link-time libraries
# (libtorch_cpu.so, libc10.so, ...) and libtorch_cuda.so, loaded at run time.
torchlib=$("$python" -c "import torch, os; print(os.path.join(torch.__path__[0], 'lib'))")
export LD_LIBRARY_PATH="$torchlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STALLSCOPE_LIBTORCH="$torchlib"
mkdir -p "$out"
# Process workers run the loader's small binary, built beside the runner
# (`cargo xtask build`); carry both.
worker=$(dirname "$bin")/stallscope-loader-worker
[ -x "$worker" ] || { echo "gpu-check: $worker is missing; build it with cargo xtask build" >&2; exit 2; }

"$bin" env --device cuda:0 --json > "$out/env.json"
"$bin" env --device cuda:0
"$bin" run --preset quickstart --device cuda:0 --out "$out/quickstart"
"$bin" run --preset fashionmnist-batch-sweep --quick --device cuda:0 --out "$out/batch-sweep"
"$bin" run --preset transfer --quick --device cuda:0 --out "$out/transfer"
# The peer engines in the machine's PyTorch (its own Python, not the cache's)
# and prefetch_to_device, which only CUDA has.
STALLSCOPE_PYTHON="$python" "$bin" run "$here/gpu-peers.toml" --device cuda:0 --out "$out/peers" \
  || echo "gpu-check: the peers run recorded failures (see its report above); its bundle is kept"
"$bin" validate "$out/quickstart/bundle.json" "$out/batch-sweep/bundle.json" \
  "$out/transfer/bundle.json" "$out/peers/bundle.json"
echo "bundles under $out"
