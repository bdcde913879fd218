#!/usr/bin/env bash
# GPU training step of the Java runtime against PyTorch's on the same GPU (issue E part 6), for the GPU machine.
# On the CPU machine first: bash bench/gpu-prepare.sh (it also copies ../shared/tools/torch_gpt_step.py into
# .device/torch/). On the GPU machine:   bash bench/gpu-train.sh [OUT_DIR] [D,L,H,T,B ...]
# Writes OUT_DIR/gpu-train-step.json (ours) and OUT_DIR/torch_gpt1.json (PyTorch eager, bf16 autocast, SDPA).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-bench/results}}"; shift || true
shapes=("$@"); [ ${#shapes[@]} -gt 0 ] || shapes=(128,4,4,128,8 768,12,12,1024,8)
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
java -Xmx32g -cp "$CP" dev.taco.bench.GpuTrainStep --out "$out/gpu-train-step.json" "${shapes[@]}"
OUT="$out" python3 .device/torch/torch_gpt_step.py "${shapes[@]}" 2>&1 | grep -v "^\s*$" | tail -20
