#!/usr/bin/env bash
# GPU self-check of the CUDA backend (dev.taco.kernels.cuda), for the GPU machine, which has no JDK or Maven.
#
# On a CPU machine, from the project root:
#   bash bench/gpu-prepare.sh
# then on the GPU machine, from the project root (the tree with .device/):
#   bash tornado-kernels/gpu-check.sh [--device N] [--only round-trip,vector-add,...]
#
# Prints one "PASS name: detail" or "FAIL name: error" line per check and "N passed, M failed"; exits
# non-zero if any check failed (2 when CUDA itself is unavailable). Checks: device, round-trip, nvrtc-cache,
# nvrtc-error, vector-add, headers-bf16-fp8, task-graph, cuda-graph, copy-bandwidth, launch-overhead, launch-error.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine first" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
exec java -cp "$CP" dev.taco.kernels.cuda.GpuSelfCheck "$@"
