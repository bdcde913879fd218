#!/usr/bin/env bash
# GPU check + benchmark of the fused TACO kernels (issue C parts 6-7), for the GPU machine (no JDK there).
#
# On the CPU machine, from the project root, first:   bash bench/gpu-prepare.sh
# then on the GPU machine, from the project root:     bash bench/gpu-codec.sh [OUT_DIR]
#
# Prints PASS/FAIL lines (GPU body == CPU TacoCodec body byte for byte, decode bit for bit), then a timing table
# (1/16/64/256 MiB bf16, median of 20, CUDA events), then the same check and a 64 MiB timing of the mxfp4/nvfp4 fused
# compress (fp32 and bf16 input, as a fraction of a copy: "fp4" in the JSON), and writes OUT_DIR/gpu-codec.json
# (OUT_DIR defaults to $OUT, else bench/results). Exits non-zero if a check failed. About 1-2 minutes.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ls .device/cuda/*.cu >/dev/null 2>&1 || { echo "FAIL bundle: no .device/cuda/*.cu; run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-bench/results}}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
exec java -cp "$CP" dev.taco.bench.GpuCodecBench --out "$out/gpu-codec.json" --command "bash bench/gpu-codec.sh"
