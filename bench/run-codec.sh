#!/usr/bin/env bash
# Runs dev.taco.bench.CodecBench (JMH: fork 1, warmup 2x0.5s, measurement 3x0.5s per codec; about 2-3 minutes for
# all 12 codecs) and prints a markdown table: codec, encode GB/s, decode GB/s (of float32 input), ratio to a plain
# copy of the same bytes measured in the same run.
# Usage: bench/run-codec.sh [codecs=taco;int8-group] [warmup=2] [measure=3] [time=500] [simd=false: the scalar
#        reference kernels]   (builds what is missing first: bench/jmh-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.CodecBench "$@"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
