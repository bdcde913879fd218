#!/usr/bin/env bash
# One training step of the default model (dev.taco.bench.TrainStepBench's step: none and taco, TP = 2 as two threads)
# on this build and on an earlier commit, taking turns in one JVM (dev.taco.bench.TrainStepAlternation: 20 rounds of
# 1.5 s of steps per side after 5 warm-up rounds, about 3 minutes); prints the table and one line of JSON,
# {"ms", "baseline_ms", "speedup", ...} per codec.
# The earlier commit is built by bench/baseline-build.sh; TrainStepBench.java of THIS tree is compiled against it (it
# uses only API both have).
# Usage: bench/run-train-step.sh [BASELINE_REV] [codecs=none,taco] [rounds=20] [warmup=5] [slice=1500]
#        (default 2f8c3ff, the last commit before issue G; JMH's TrainStepBench alone gives this build's step time)
#        (builds what is missing first: bench/jmh-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
# shellcheck source=bench/baseline-build.sh
source bench/baseline-build.sh # takes a leading revision off "$@"
proc=$(ls ~/.m2/repository/org/openjdk/jmh/jmh-generator-annprocess/*/jmh-generator-annprocess-*.jar | head -1)
mkdir -p "$base/train-step-classes"
"$JAVA_HOME/bin/javac" -d "$base/train-step-classes" -cp "$base_cp" -processorpath "$proc:$base_cp" \
  --add-modules jdk.incubator.vector bench/src/main/java/dev/taco/bench/TrainStepBench.java 2>&1 | grep -v -E "^(warning|Note)|^[0-9]+ warnings?$" >&2 || true
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.TrainStepAlternation \
  "baseline=$base/train-step-classes:$base_cp" "$@"
echo "# baseline: $rev; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
