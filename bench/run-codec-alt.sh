#!/usr/bin/env bash
# Every codec's encode and decode on this build and on an earlier commit, each as a fraction of a copy, alternated in
# one JVM (dev.taco.bench.CodecAlternation: 40 rounds of 20 ms slices, copy / this / earlier; about 8 minutes for the
# 12 codecs). Prints a markdown table and a JSON list (per codec: fractions, the earlier build's, the gain, quartiles).
# Usage: bench/run-codec-alt.sh [BASELINE_REV] [codecs=a,b] [rounds=40] [warmup=10] [slice=20]
#        (default 2f8c3ff, the last commit before issue G, built by bench/baseline-build.sh; this tree is built
#        first where anything is missing: bench/jmh-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
# shellcheck source=bench/baseline-build.sh
source bench/baseline-build.sh # takes a leading revision off "$@"
echo "# baseline: $rev ($base)"
"$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.CodecAlternation "baseline=$base_cp" "$@"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
