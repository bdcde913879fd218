#!/usr/bin/env bash
# One training step of the default model (dev.taco.bench.TrainStepBench, JMH: none and taco, TP = 2 as two threads)
# on this build and on an earlier commit, in one session, alternating (earlier, this, earlier, this) so that a change of
# load hits both; prints the table and the JSON object {"ms", "baseline_ms", "speedup", ...} per codec.
# The earlier commit is exported with git archive into ~/.cache/taco/train-step-baseline/<rev>/ (outside the tree:
# ../shared/tools/device-bundle.sh copies every */target/*.jar below it) and built there once (Maven, offline, no install); TrainStepBench.java of THIS tree is compiled against it (it uses only API both have).
# Usage: bench/run-train-step.sh [BASELINE_REV]   (default 2f8c3ff, the last commit before issue G);
#        TRAIN_STEP_JMH_ARGS="-wi 1 -i 1" for a quick check (JMH's own options)
#        (build first: mvn -pl bench -am package -DskipTests)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
rev=$(git rev-parse --short "${1:-2f8c3ff}")
base="${XDG_CACHE_HOME:-$HOME/.cache}/taco/train-step-baseline/$rev"
export MAVEN_OPTS="${MAVEN_OPTS:---sun-misc-unsafe-memory-access=allow}"
if [ ! -f "$base/bench/target/classpath.txt" ]; then
  rm -rf "$base" && mkdir -p "$base"
  git archive "$rev" | tar -x -C "$base"
  (cd "$base" && JAVA_HOME="$JAVA_HOME" PATH="$JAVA_HOME/bin:$PATH" mvn -B -q -ntp -o -DskipTests package -pl bench -am) >&2
fi
proc=$(ls ~/.m2/repository/org/openjdk/jmh/jmh-generator-annprocess/*/jmh-generator-annprocess-*.jar | head -1)
base_cp="$base/bench/target/classes:$(cat "$base/bench/target/classpath.txt")"
mkdir -p "$base/train-step-classes"
"$JAVA_HOME/bin/javac" -d "$base/train-step-classes" -cp "$base_cp" -processorpath "$proc:$base_cp" \
  --add-modules jdk.incubator.vector bench/src/main/java/dev/taco/bench/TrainStepBench.java 2>&1 | grep -v "^warning\|^Note" >&2 || true
out=target/train-step && mkdir -p "$out"
run() { # $1: label, $2: class path
  "$JAVA" --add-modules jdk.incubator.vector -cp "$2" org.openjdk.jmh.Main 'dev.taco.bench.TrainStepBench' \
    -rf json -rff "$out/$1.json" ${TRAIN_STEP_JMH_ARGS:-} > "$out/$1.log" 2>&1
  echo "# $1 done, load $(cut -d' ' -f1-3 /proc/loadavg)"
}
run baseline-1 "$base/train-step-classes:$base_cp"
run current-1 "$CP"
run baseline-2 "$base/train-step-classes:$base_cp"
run current-2 "$CP"
python3 - "$out" "$rev" "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" <<'PY'
import json, sys
out, rev, head = sys.argv[1:4]
def scores(label):
    return {r["params"]["codec"]: r["primaryMetric"]["score"] for r in json.load(open(f"{out}/{label}.json"))}
b = [scores("baseline-1"), scores("baseline-2")]
c = [scores("current-1"), scores("current-2")]
print(f"| codec | {head} ms/step (runs 1, 2) | {rev} ms/step (runs 1, 2) | speed-up (best of each) |")
print("|---|---|---|---|")
res = {}
for codec in b[0]:
    cm, bm = min(x[codec] for x in c), min(x[codec] for x in b)
    print(f"| {codec} | {c[0][codec]:.2f}, {c[1][codec]:.2f} | {b[0][codec]:.2f}, {b[1][codec]:.2f} | {bm / cm:.2f}x |")
    res[codec] = {"ms": round(cm, 3), "baseline_ms": round(bm, 3), "speedup": round(bm / cm, 3),
                  "baseline": rev, "runs_ms": [round(x[codec], 3) for x in c],
                  "baseline_runs_ms": [round(x[codec], 3) for x in b]}
print(json.dumps(res))
PY
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
