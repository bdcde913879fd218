#!/usr/bin/env bash
# Runs dev.taco.bench.ParallelKernelBench (JMH: fork 1, warmup 3x1s, measurement 5x1s; about 20 s): the TACO encode
# kernel called directly (one core) vs compiled by ParallelKernels (its @Parallel loop over every core), same run.
# Usage: bench/run-parallel.sh   (build first: mvn -pl bench -am package -DskipTests)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.ParallelKernelBench
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
