#!/usr/bin/env bash
# Runs dev.taco.bench.ParallelKernelBench (JMH: fork 1, warmup 3x1s, measurement 5x1s; about 20 s): the TACO encode
# kernel called directly (one core) vs compiled by ParallelKernels (its @Parallel loop over every core), same run.
# Usage: bench/run-parallel.sh   (build first: mvn -pl bench -am package -DskipTests)
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
JAVA="$JAVA_HOME/bin/java"
CP="bench/target/classes:$(cat bench/target/classpath.txt)"
echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# JDK: $("$JAVA" -version 2>&1 | head -1)"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.ParallelKernelBench
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
