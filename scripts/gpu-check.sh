#!/usr/bin/env bash
# GPU check: every CUDA feature of the runner in one run, on a machine with an
# NVIDIA GPU and PyTorch 2.11 (the libtorch that tch 0.24 expects), from a
# prebuilt binary: no Rust needed there. Aimed at under 10 minutes on one GPU.
#
#   scripts/gpu-check.sh OUT_DIR
#
# It runs, each into OUT_DIR/<step>/:
#   quickstart   the quickstart preset (compute, transfer, batch sweep, OOM probe, loader)
#   sweep        the FashionMNIST batch sweep and the OOM probe with its recovery (--quick)
#   transfer     pageable / pinned x blocking / non-blocking copies (--quick)
#   stall        stall attribution, the loader with pinned memory (--quick)
#   peers        the peer engines on CUDA, pinning, side-stream prefetch (gpu-peers.toml)
#   dali         DALI's mixed (nvJPEG) and CPU decoders vs the native loader (gpu-dali.toml)
#   ranks        2 ranks on one device under torchrun, then `stallscope merge` (gpu-ranks.toml)
# then validates every bundle, checks that whole-run runs carry NVML timelines,
# and prints a one-screen summary. Exit status 1 when any step failed or any
# bundle is invalid; every bundle written is kept.
#
# STALLSCOPE_BIN     the binary (default: target/release/stallscope next to this script)
# STALLSCOPE_PYTHON  a python with torch 2.11 (default: /opt/torch/.venv/bin/python3, then python3)
# TORCHRUN           torchrun (default: beside that python)
set -uo pipefail

out=${1:?usage: scripts/gpu-check.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
bin=${STALLSCOPE_BIN:-$here/../target/release/stallscope}
python=${STALLSCOPE_PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$python" ] || python=python3
torchrun=${TORCHRUN:-$(dirname "$python")/torchrun}

fail() {
  echo "gpu-check: $*" >&2
  exit 2
}
[ -x "$bin" ] || fail "$bin is missing; build it with cargo xtask build"
# Process workers run the loader's small binary, built beside the runner.
worker=$(dirname "$bin")/stallscope-loader-worker
[ -x "$worker" ] || fail "$worker is missing; build it with cargo xtask build"

# The installed PyTorch's lib/ serves both the link-time libraries
# (libtorch_cpu.so, libc10.so, ...) and libtorch_cuda.so, loaded at run time.
torchlib=$("$python" -c "import torch, os; print(os.path.join(torch.__path__[0], 'lib'))") ||
  fail "$python has no torch"
export LD_LIBRARY_PATH="$torchlib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export STALLSCOPE_LIBTORCH="$torchlib"
export STALLSCOPE_PYTHON="$python"
mkdir -p "$out"

failed=()
declare -A took
step() {
  # step NAME COMMAND...: run one part, keep going when it fails.
  local name=$1 start rc
  shift
  echo
  echo "== $name: $*"
  start=$(date +%s)
  "$@"
  rc=$?
  took[$name]=$(($(date +%s) - start))
  if [ "$rc" -ne 0 ]; then
    echo "gpu-check: step $name exited $rc" >&2
    failed+=("$name")
  fi
}

"$bin" env --device cuda:0 --json >"$out/env.json" || failed+=(env)
"$bin" env --device cuda:0

step quickstart "$bin" run --preset quickstart --device cuda:0 --out "$out/quickstart"
step sweep "$bin" run --preset fashionmnist-batch-sweep --quick --device cuda:0 --out "$out/sweep"
step transfer "$bin" run --preset transfer --quick --device cuda:0 --out "$out/transfer"
step stall "$bin" run --preset stall --quick --device cuda:0 --out "$out/stall"
step peers "$bin" run "$here/gpu-peers.toml" --device cuda:0 --out "$out/peers"
step dali "$bin" run "$here/gpu-dali.toml" --device cuda:0 --out "$out/dali"
if [ -x "$torchrun" ]; then
  # Both ranks on the one device: an explicit --device wins over LOCAL_RANK.
  step ranks "$torchrun" --no-python --nproc-per-node 2 --master-port 29533 \
    "$bin" run "$here/gpu-ranks.toml" --device cuda:0 --out "$out/ranks"
  step merge "$bin" merge "$out/ranks"
else
  echo "gpu-check: no torchrun at $torchrun; the ranks step is not run" >&2
  failed+=(ranks)
fi

mapfile -t bundles < <(find "$out" -name 'bundle*.json' | sort)
[ "${#bundles[@]}" -gt 0 ] || fail "no bundle was written under $out"
echo
echo "== validate: ${#bundles[@]} bundles"
"$bin" validate "${bundles[@]}" || failed+=(validate)

# One screen: per bundle its state, configurations, failures, and whether
# the whole-run runs carry GPU timelines (NVML) and the ranks a comm stage.
"$python" - "${bundles[@]}" <<'PY' || failed+=(timelines)
import json, sys
bad = 0
print(f"\n{'bundle':<34} {'state':<9} {'configs':>7} {'failed':>6} {'gpu tl':>7} {'util %':>7}")
for path in sys.argv[1:]:
    b = json.load(open(path))
    configs = [c for e in b["experiments"] for c in e["configurations"]]
    failed = sum(1 for c in configs if c.get("failure"))
    whole = [r for c in configs for r in c["runs"] if r["timing_mode"] == "whole_run"]
    tl = [r["timeline"] for r in whole if r.get("timeline")]
    gpu = [t["gpu"] for t in tl if t.get("gpu")]
    util = [u for g in gpu for u in g.get("utilization_percent", [])]
    mean = f"{sum(util) / len(util):.0f}" if util else "-"
    name = path.split("/")[-2] + "/" + path.split("/")[-1]
    print(f"{name[-34:]:<34} {b['status']['state']:<9} {len(configs):>7} {failed:>6} "
          f"{len(gpu):>3}/{len(tl):<3} {mean:>7}")
    # On a GPU machine NVML must load; other reasons (a loader-only loop,
    # "model = none") are printed but are not failures.
    reasons = sorted({t.get("gpu_not_available", "no reason recorded") for t in tl if not t.get("gpu")})
    for why in reasons:
        print(f"  no GPU timeline: {why}")
        if why.startswith("NVML") or why in ("the device is the CPU", "no reason recorded"):
            bad += 1
    # A configuration that did not run: an engine missing from this Python is
    # printed; DALI's mixed decoder refused for want of CUDA is a failure here.
    for c in configs:
        na = c.get("not_applicable") or {}
        why = na.get("engine") or na.get("dali_device")
        if not c["runs"] and why:
            print(f"  not run: {c['id']}: {why}")
            if why.startswith("'mixed' decodes with nvJPEG"):
                bad += 1
sys.exit(1 if bad else 0)
PY

echo
for name in "${!took[@]}"; do printf '  %-10s %4d s\n' "$name" "${took[$name]}"; done | sort
if [ "${#failed[@]}" -gt 0 ]; then
  echo "gpu-check: FAILED: ${failed[*]} (bundles under $out are kept)" >&2
  exit 1
fi
echo "gpu-check: every step passed; bundles under $out"
