#!/usr/bin/env bash
# Does a compressed GPU run's wall time follow its GPU time, calibration included? (docs/design.md §9) In one device
# call: GPT-2 small (hidden 768, 12 layers, 12 heads, T 1024, B 8) at TP=2 device-local for STEPS steps (800), with
# `none` and with `taco`, wall time of the whole command each (JFR=1: a Java Flight Recorder profile of each, both
# runs alike, since the recorder's own cost would otherwise count against one of them).
# On the CPU machine first: bash bench/gpu-prepare.sh; then on the GPU machine:   bash bench/gpu-calibration.sh [OUT_DIR]
# Writes OUT_DIR/run-<codec>/ (report.json, metrics.jsonl), OUT_DIR/run-<codec>.log, OUT_DIR/<codec>.jfr (JFR=1).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-target/gpu-calibration}}"
mkdir -p "$out"
steps="${STEPS-800}"
for c in ${CODECS-none taco}; do
  jfr=""; [ "${JFR-0}" = 1 ] && jfr="-XX:StartFlightRecording=filename=$out/$c.jfr,settings=profile"
  t0=$(date +%s%N)
  timeout "${RUN_TIMEOUT-200}" java -Xmx16g $jfr -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" \
    dev.taco.runtime.cli.TacoCli train --device cuda --tp 2 --tp-transport device-local --compression "$c" \
    --hidden-size 768 --num-layers 12 --num-attention-heads 12 --seq-length 1024 --micro-batch-size 8 \
    --codec-error-interval 0 --steps "$steps" --out "$out/run-$c" > "$out/run-$c.log" 2>&1
  rc=$?
  echo "$c: rc $rc, wall $(( ($(date +%s%N) - t0) / 1000000 )) ms for $steps steps (the whole command)"
  grep -E "^$c |calibration:|GPU time per step" "$out/run-$c.log" | head -8
done
