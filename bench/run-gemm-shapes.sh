#!/usr/bin/env bash
# The training step's GEMMs (dev.taco.bench.TrainingGemms: every product of one TP=2 rank's step at the default model
# and at the 4x wider one, plus the square n = 1024) through dev.taco.bench.GemmShapesBench (JMH, fork 1, warmup 3x0.3s,
# measurement 5x0.3s, best iteration) and numpy's OpenBLAS (bench/gemm_openblas.py: cblas_sgemm with the same
# transposes and accumulate flag, best of 5 rounds of 0.25 s), shape by shape in the same run, so that both sides of a
# ratio see the same load. Modes (MODES, default pair,solo): pair = two callers at once, as the two TP ranks on a
# 2-core machine (OpenBLAS one thread each); solo = one caller, both cores; core = one caller, one core; cpu = core
# timed by the thread's CPU time (not JMH; for a machine shared with other work, where wall-clock ratios scatter).
# About 10 s per shape and mode: 8 minutes for the 25 shapes in two modes.
# Prints the results list as JSON on stdout ({"m", "k", "n", "op", "model", "mode", "gflops", "openblas_gflops",
# "ratio", ...}) and a markdown table with the load average at each shape on stderr.
# Usage: [MODES=pair,solo,core,cpu] [MODELS=default,wide,square] [KEYS=wide:512x1024x768:ATB:acc,...]
#        bench/run-gemm-shapes.sh [GemmShapesBench arguments]
#        (build first: mvn -pl bench -am package -DskipTests)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh >&2
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS OMP_NUM_THREADS # OpenBLAS picks its own kernel and threads
export MODES=${MODES:-pair,solo}
models=${MODELS:-default,wide,square}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Runs GemmShapesBench with the given JVM options and arguments, appending its JSON lines; waits while another JMH
# run on the machine holds JMH's lock (up to 20 minutes), since two at once would disturb each other's figures.
java_bench() {
  local try opts=$1
  shift
  for try in $(seq 40); do
    # shellcheck disable=SC2086
    if "$JAVA" $opts --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.GemmShapesBench "$@" \
      >>"$tmp/java.jsonl" 2>"$tmp/jmh.log"; then
      return 0
    fi
    grep -q "Unable to acquire the JMH lock" "$tmp/jmh.log" || break
    echo "# another JMH run holds the lock; waiting 30 s" >&2
    sleep 30
  done
  cat "$tmp/jmh.log" >&2
  return 1
}
"$JAVA" -cp "$CP" dev.taco.bench.GemmShapesBench shapes >"$tmp/shapes.tsv"
while IFS=$'\t' read -r key model _; do
  [[ ",$models," == *",$model,"* ]] || continue
  [[ -z "${KEYS:-}" || ",$KEYS," == *",$key,"* ]] || continue
  python3 bench/gemm_openblas.py measure "$tmp/shapes.tsv" "$key" >>"$tmp/openblas.jsonl" 2>"$tmp/openblas.log" \
    || { cat "$tmp/openblas.log" >&2; exit 1; }
  jmh=$(tr ',' '\n' <<<"$MODES" | grep -vx cpu | paste -sd, || true)
  if [ -n "$jmh" ]; then java_bench "" "key=$key" "modes=$jmh" "$@" || exit 1; fi
  if [[ ",$MODES," == *",cpu,"* ]]; then java_bench -Dtaco.gemm.threads=1 "key=$key" modes=cpu "$@" || exit 1; fi
  echo "# $key done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done <"$tmp/shapes.tsv"
head -1 "$tmp/openblas.log" >&2
python3 bench/gemm_openblas.py merge "$tmp/shapes.tsv" "$tmp/openblas.jsonl" "$tmp/java.jsonl"
