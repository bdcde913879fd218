#!/usr/bin/env bash
# The training step's GEMMs (dev.taco.bench.TrainingGemms: every product of one TP=2 rank's step at the default model
# and at the 4x wider one, plus the square n = 1024) against numpy's OpenBLAS (cblas_sgemm with the same transposes and
# accumulate flag), shape by shape. Modes (MODES, default pair,solo): pair = two callers at once, as the two TP ranks
# on a 2-core machine (OpenBLAS one thread each); solo = one caller, both cores; core = one caller, one core; cpu =
# core timed by the thread's CPU time. pair, solo and core alternate Gemm and OpenBLAS in one JVM (GemmShapesBench
# openblas=LIB: 20 warmup and ALT_ROUNDS, default 100, measured rounds of two 20 ms slices; the ratio is the median
# of the rounds' ratios), since on these shared machines a core's speed changes within a second. In solo, OpenBLAS's
# second thread spins after each call for OPENBLAS_THREAD_TIMEOUT (2^n TSC cycles; its default, n = 28, about 0.1 s,
# took the helper's core from Gemm's next slice: 0.44 of OpenBLAS against 0.82 with n = 22): the script sets n = 21,
# about 1 ms, as long as Gemm's helpers poll before they park. cpu is Gemm's CPU time (not JMH) against
# bench/gemm_openblas.py, one after the other. About 10 s per shape and mode.
# Prints the results list as JSON on stdout ({"m", "k", "n", "op", "model", "mode", "gflops", "openblas_gflops",
# "ratio", ...}) and a markdown table with the load average at each shape on stderr.
# Usage: [MODES=pair,solo,core,cpu] [MODELS=default,wide,square] [KEYS=wide:512x1024x768:ATB:acc,...]
#        [ALT_ROUNDS=100] bench/run-gemm-shapes.sh [GemmShapesBench arguments, for mode cpu]
#        (builds what is missing first: bench/jmh-env.sh; the baseline needs a python3 with numpy, whose wheel
#        bundles OpenBLAS: bench/gemm_openblas.py says so when it is missing)
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
lib=$(python3 bench/gemm_openblas.py lib) || exit 1
alt="openblas=$lib warmup=20 measure=${ALT_ROUNDS:-100} time=20"
has() { [[ ",$MODES," == *",$1,"* ]]; }
while IFS=$'\t' read -r key model _; do
  [[ ",$models," == *",$model,"* ]] || continue
  [[ -z "${KEYS:-}" || ",$KEYS," == *",$key,"* ]] || continue
  apart=$(tr ',' '\n' <<<"$MODES" | grep -x 'cpu' | paste -sd, || true)
  if [ -n "$apart" ]; then
    MODES=$apart python3 bench/gemm_openblas.py measure "$tmp/shapes.tsv" "$key" >>"$tmp/openblas.jsonl" \
      2>"$tmp/openblas.log" || { cat "$tmp/openblas.log" >&2; exit 1; }
    head -1 "$tmp/openblas.log" >"$tmp/openblas.version"
  fi
  if has pair; then java_bench --enable-native-access=ALL-UNNAMED "key=$key" modes=pair $alt || exit 1; fi
  if has core; then
    java_bench "-Dtaco.gemm.threads=1 --enable-native-access=ALL-UNNAMED" "key=$key" modes=core $alt || exit 1
  fi
  if has solo; then
    OPENBLAS_THREAD_TIMEOUT=21 java_bench --enable-native-access=ALL-UNNAMED "key=$key" modes=solo $alt || exit 1
  fi
  if has cpu; then java_bench -Dtaco.gemm.threads=1 "key=$key" modes=cpu "$@" || exit 1; fi
  echo "# $key done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done <"$tmp/shapes.tsv"
echo "# OpenBLAS $lib" >&2
cat "$tmp/openblas.version" 2>/dev/null >&2 || true
touch "$tmp/openblas.jsonl"
python3 bench/gemm_openblas.py merge "$tmp/shapes.tsv" "$tmp/openblas.jsonl" "$tmp/java.jsonl"
