#!/usr/bin/env bash
# Benchmark of the device collectives' per-rank kernels on ONE GPU (issue D part 7), for the GPU machine:
#   bash bench/gpu-prepare.sh              (CPU machine: build, bundle, pre-translate the kernels)
#   bash bench/gpu-collectives.sh [OUT]    (GPU machine: table on stdout, OUT/gpu-collectives-1gpu.json)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-bench/results}}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
exec java -Xmx16g -cp "$CP" dev.taco.bench.GpuCollectivesBench --out "$out/gpu-collectives-1gpu.json" \
  --command "bash bench/gpu-collectives.sh"
