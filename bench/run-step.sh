#!/usr/bin/env bash
# Runs dev.taco.bench.TrainStepProfile (a timed loop, about 30 s): one CPU training step of the default ./taco train model
# (TP = 2 as two threads, exact all-reduces), median/mean ms per step and rank 0's time per Ops call; then
# dev.taco.bench.LayerBench, each CPU layer's vectorised path against its scalar kernel at the default shapes.
# Usage: bench/run-step.sh [steps=30] [warmup=30]   (builds what is missing first: bench/jmh-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
java_main() {
  "$JAVA" --add-modules jdk.incubator.vector -XX:+UseParallelGC -cp "$CP" "$@" 2>&1 | grep -v '^WARNING: Using incubator modules'
}
java_main dev.taco.bench.TrainStepProfile "$@"
java_main dev.taco.bench.LayerBench
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
