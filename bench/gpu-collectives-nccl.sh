#!/usr/bin/env bash
# TACO against NCCL bf16 on every GPU of the machine, over NVLink and without P2P (issue H's collective benchmark), in one
# command for the GPU machine (after bash bench/gpu-prepare.sh on the CPU machine):
#   bash bench/gpu-collectives-nccl.sh [OUT]     -> OUT/gpu-collectives-nvlink.json, OUT/gpu-collectives-no-p2p.json
# On one GPU it runs at world size 1, a smoke test of the code path.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-bench/results}}"
nvidia-smi -L
java -Xmx64g -cp "$CP" dev.taco.bench.GpuNcclCollectivesBench --link nvlink --out "$out/gpu-collectives-nvlink.json" \
  --command "bash bench/gpu-collectives-nccl.sh" || exit 1
NCCL_P2P_DISABLE=1 java -Xmx64g -cp "$CP" dev.taco.bench.GpuNcclCollectivesBench --link no-p2p \
  --out "$out/gpu-collectives-no-p2p.json" --command "NCCL_P2P_DISABLE=1 bash bench/gpu-collectives-nccl.sh"
