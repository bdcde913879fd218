#!/usr/bin/env bash
# The loss gap of each codec against none, and the codecs' error on a GPU run's real TP tensors, in one device call:
# `taco train --device cuda --tp 2 --tp-transport device-local` (hidden 384, 6 layers, 6 heads, sequence 256,
# micro-batch 16, the bundled corpus) once per codec and seed, all in ONE JVM one after another
# (dev.taco.bench.ConcurrentRuns: the JVM starts and the kernels compile once); the first seed's `none` run dumps the
# tensors its last step hands its TP collectives (--dump-sites), which CodecTable measures every codec on.
# On the CPU machine first: bash bench/gpu-prepare.sh; then on the GPU machine:   bash bench/gpu-loss-gap.sh [OUT_DIR]
# Knobs (environment): CODECS (none taco fp8-tensor int8-group nccl-fp8 mxfp4 nvfp4 auto), SEEDS (1 2 3), STEPS (500:
# chosen so that the grid of 24 runs fits in 8 minutes on one H100, from the step times of the fidelity runs at this
# shape in bench/results/gpu-train.md), LINK (ib-ndr: what auto prices the wire at), EVAL_ITERS (16), GRID_TIMEOUT (460 s:
# the runs that finished by then are summarised), KEEP_SITES (0: the dumped tensors are deleted once measured).
# DEVICE=cpu (with HIDDEN, LAYERS, HEADS, SEQ, MB for a tiny shape) runs the same logic on the CPU machine, from the
# working tree's build (no bundle), to test the plumbing: DEVICE=cpu STEPS=5 HIDDEN=32 LAYERS=1 HEADS=2 SEQ=32 MB=2.
# Writes OUT_DIR/s<seed>-<codec>/report.json per run, OUT_DIR/runs.log, OUT_DIR/loss-gap.json (LossGap: final
# validation loss per codec and seed), OUT_DIR/sites-<gpu|cpu>.json (per-tensor figures; give it to CodecTable as
# --sites gpu=FILE when the table is merged on the CPU machine) and OUT_DIR/codecs.json, codecs.md (this run alone).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
device="${DEVICE:-cuda}"
if [ "$device" = cpu ]; then
  # shellcheck source=bench/jmh-env.sh
  source bench/jmh-env.sh
  CP="bench/target/classes:runtime/target/classes:collective/target/classes:tornado-kernels/target/classes:$CP"
  export JDK_JAVA_OPTIONS="--enable-native-access=ALL-UNNAMED --add-modules=jdk.incubator.vector"
  gpu_options=""; label=cpu
else
  # shellcheck disable=SC1091
  source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
  JAVA=java; gpu_options="--tp-transport device-local"; label=gpu
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
fi
out="${1:-${OUT:-target/gpu-loss-gap}}"
mkdir -p "$out"
steps="${STEPS-500}"; read -r -a seeds <<< "${SEEDS-1 2 3}"
read -r -a codecs <<< "${CODECS-none taco fp8-tensor int8-group nccl-fp8 mxfp4 nvfp4 auto}"
sites="$out/sites"
rm -rf "$sites"
: > "$out/runs.txt"
for s in "${seeds[@]}"; do
  for c in "${codecs[@]}"; do
    extra=""
    [ "$c" = auto ] && extra="--link ${LINK-ib-ndr}"
    [ "$c" = none ] && [ "$s" = "${seeds[0]}" ] && extra="--dump-sites $sites"
    echo "train --device $device $gpu_options --tp 2 --compression $c --hidden-size ${HIDDEN-384}" \
      "--num-layers ${LAYERS-6} --num-attention-heads ${HEADS-6} --seq-length ${SEQ-256} --micro-batch-size ${MB-16}" \
      "--lr 1e-3 --lr-warmup-iters $(( (steps + 9) / 10 )) --steps $steps --eval-interval $steps" \
      "--eval-iters ${EVAL_ITERS-16} --log-interval $steps --codec-error-interval 0 --seed $s $extra" \
      "--out $out/s$s-${c//[^A-Za-z0-9._=-]/_} --overwrite" >> "$out/runs.txt"
  done
done
t0=$(date +%s)
timeout "${GRID_TIMEOUT-460}" "$JAVA" -Xmx16g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" \
  dev.taco.bench.ConcurrentRuns 1 "$out/runs.txt" > "$out/runs.out" 2> "$out/runs.log"
rc=$?
sed -nE 's/.*(exit [0-9]+ after [0-9]+ s): .*--compression ([^ ]+) .*--seed ([0-9]+).*/\1: \2, seed \3/p' "$out/runs.log"
echo "grid: exit $rc after $(( $(date +%s) - t0 )) s ($(ls "$out"/s*/report.json 2>/dev/null | wc -l) reports)"
[ "$rc" -eq 0 ] || tail -5 "$out/runs.log" >&2
"$JAVA" -cp "$CP" dev.taco.bench.LossGap --out "$out/loss-gap.json" "$out"/s*/report.json || exit 1
"$JAVA" -cp "$CP" dev.taco.bench.CodecTable --sites "$label=$sites" --loss-gap "$out/loss-gap.json" \
  --rows "$out/sites-$label.json" --json "$out/codecs.json" --md "$out/codecs.md" | sed -n '/^| codec/,/^$/p'
[ "${KEEP_SITES-0}" = 1 ] || rm -rf "$sites"
exit "$rc"
