#!/usr/bin/env bash
# Runs dev.taco.bench.CodecBench (JMH: fork 1, warmup 2x0.5s, measurement 3x0.5s per codec; about 2-3 minutes for
# all 12 codecs) and prints a markdown table: codec, encode GB/s, decode GB/s (of float32 input), ratio to a plain
# copy of the same bytes measured in the same run.
# Usage: bench/run-codec.sh [codecs=taco;int8-group] [warmup=2] [measure=3] [time=500]
#        (build first: mvn -pl bench -am package -DskipTests)
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
JAVA="$JAVA_HOME/bin/java"
CP="bench/target/classes:$(cat bench/target/classpath.txt)"
echo "# machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) CPUs (shared with other developers); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# JDK: $("$JAVA" -version 2>&1 | head -1)"
echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.CodecBench "$@"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
