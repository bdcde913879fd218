#!/usr/bin/env bash
# The end-to-end speed-up of TP training with compression under emulated links, in one device call (docs/design.md §9):
# rank 0 of a TP=R group per model shape, codec and link profile (GpuE2E), the wire kernel against its targets, and
# PyTorch's one-GPU step (and one TP=2 rank's share of it) for the same shapes beside ours. On the CPU machine first:
# bash bench/gpu-prepare.sh; then on the GPU machine:   bash bench/gpu-e2e.sh [OUT_DIR]
# Knobs (environment): SHAPES (D,L,H,T,B list), TPS (2,4,8), SPS (false or false,true), SP_SHAPES (shapes also run with
# sequence parallelism), CODECS (none,taco,fp8-tensor,auto), LINKS (the built-in profiles), STEPS (timed steps per link),
# TORCH (1; 0 skips PyTorch's step).
# Writes OUT_DIR/gpu-e2e.json (and gpu-e2e-sp.json), OUT_DIR/torch_gpt1.json; bench/e2e_plot.py draws the PNG.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-target/gpu-e2e}}"
mkdir -p "$out"
read -r -a shapes <<< "${SHAPES-768,12,12,1024,8 1024,8,16,2048,4 2048,8,16,2048,4 4096,4,32,4096,1}"
read -r -a spshapes <<< "${SP_SHAPES-1024,8,16,2048,4}"
tps="${TPS-2,4,8}"; codecs="${CODECS-none,taco,fp8-tensor,auto}"; steps="${STEPS-5}"
links="${LINKS-h200-nvlink-2,h200-nopeer-2,h100-nvlink-8,pcie5-8,ib-ndr,inf}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
java -Xmx64g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" dev.taco.bench.GpuE2E --out "$out/gpu-e2e.json" \
  --steps "$steps" --tp "$tps" --sp false --codecs "$codecs" --links "$links" "${shapes[@]}" 2>&1 \
  | grep -v '^ *{' | grep -vE '^\]|^ "|^\{' | tee "$out/gpu-e2e.log" | cut -c1-240
if [ ${#spshapes[@]} -gt 0 ]; then
  java -Xmx64g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" dev.taco.bench.GpuE2E --out "$out/gpu-e2e-sp.json" \
    --no-wire --steps "$steps" --tp "$tps" --sp true --codecs "$codecs" --links "$links" "${spshapes[@]}" 2>&1 \
    | grep -E "^emulated link" | tee "$out/gpu-e2e-sp.log" | cut -c1-240
fi
[ "${TORCH-1}" = 1 ] && OUT="$out" timeout 120 python3 .device/torch/torch_gpt_step.py "${shapes[@]}" 2>&1 \
  | grep -v "^\s*$" | tail -12
