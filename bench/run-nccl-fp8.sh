#!/usr/bin/env bash
# Runs dev.taco.bench.NcclFp8Fidelity (a few minutes on two cores): the relative L2 error of the all-reduced tensor
# against the exact sum for nccl-fp8 (NCCL's own FP8 all-reduce, both scale rules and E5M2), TACO calibrated per tensor,
# fp8-tensor and bf16, on the host path at TP = 2 and 8, on Gaussian and outlier-channel tensors and on the TP
# all-reduce inputs of a short CPU training run. Results: bench/results/nccl-fp8.md.
# Usage: bench/run-nccl-fp8.sh [rows=1024] [cols=1024] [steps=40] [seed=1]   (builds what is missing first)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.NcclFp8Fidelity "$@" 2>&1 \
  | grep -v '^WARNING: Using incubator modules'
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
