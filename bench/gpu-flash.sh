#!/usr/bin/env bash
# Flash attention on the GPU machine, in one device call (issue E): the GPU tests that touch attention, the training
# step with flash attention against the GEMM attention and PyTorch's step in the same run, and the step rate of short
# fidelity-shaped runs (to plan bench/gpu-fidelity.sh). On the CPU machine first: bash bench/gpu-prepare.sh. Then:
#   bash bench/gpu-flash.sh OUT_DIR
# Knobs (environment): SHAPES (D,L,H,T,B list for ours and PyTorch; default the four of gpu-train-1gpu.json),
# GEMM_SHAPES (ours again with --no-flash; default the two large ones; empty: skip), TEST_CLASSES (default the flash,
# model and CLI GPU tests; empty: skip), PROBE_CODECS (default "none int8-group"; empty: skip) and PROBE_STEPS (300).
# Writes OUT_DIR/tests/ (JUnit XML), OUT_DIR/gpu-train-step.json (flash), OUT_DIR/gpu-train-step-gemm.json,
# OUT_DIR/torch_gpt1.json and OUT_DIR/probe-*/report.json; prints a summary.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-target/gpu-flash}}"
mkdir -p "$out"
read -r -a shapes <<< "${SHAPES-128,4,4,128,8 512,8,8,512,8 768,12,12,1024,8 1024,8,16,2048,4}"
read -r -a gemm <<< "${GEMM_SHAPES-768,12,12,1024,8 1024,8,16,2048,4}"
read -r -a tests <<< "${TEST_CLASSES-dev.taco.runtime.layers.FlashAttentionGpuTest dev.taco.runtime.model.GptCudaGpuTest dev.taco.runtime.cli.TacoCliGpuTest}"
if [ ${#tests[@]} -gt 0 ]; then
  sel=()
  for c in "${tests[@]}"; do sel+=(--select-class "$c"); done
  timeout 240 bash bench/gpu-tests.sh "$out/tests" "${sel[@]}" > "$out/tests.log" 2>&1
  echo "tests rc $?"
  grep -E "flash on the GPU|GPU vs emulator|bf16 mode vs CPU|graph replay|tests (successful|failed)|MethodSource|=>" \
    "$out/tests.log" | head -60
fi
if [ ${#shapes[@]} -gt 0 ]; then
  timeout 150 bash bench/gpu-train.sh "$out" "${shapes[@]}" 2>&1 | grep -E "^gpu:|ms/step|step_ms" | cut -c1-220
fi
if [ ${#gemm[@]} -gt 0 ]; then
  timeout 60 java -Xmx32g -cp "$CP" dev.taco.bench.GpuTrainStep --no-flash --out "$out/gpu-train-step-gemm.json" \
    "${gemm[@]}" 2>&1 | grep "ms/step" | cut -c1-200
fi
steps=${PROBE_STEPS:-300}
for c in ${PROBE_CODECS-none int8-group}; do
  t0=$(date +%s%N)
  timeout 100 java -Xmx16g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" dev.taco.runtime.cli.TacoCli train \
    --device cuda --tp 2 --compression "$c" --hidden-size 384 --num-layers 6 --num-attention-heads 6 --seq-length 256 \
    --micro-batch-size 16 --lr 1e-3 --lr-warmup-iters 500 --steps "$steps" --eval-interval 100 --eval-iters 16 --seed 1 \
    --codec-error-interval 0 --out "$out/probe-$c" > "$out/probe-$c.log" 2>&1
  rc=$?
  echo "probe $c rc $rc $(( ($(date +%s%N) - t0) / 1000000 )) ms for $steps steps: $(grep -E "^$c " "$out/probe-$c.log" | head -1)"
done
