#!/usr/bin/env bash
# Long training runs across device calls (each at most 10 minutes): every run of SPEC that has not reached its steps
# goes on from its newest checkpoint (--load), stops in time to save within BUDGET seconds of this script's start
# (--exit-duration-in-mins), and the script prints which runs are finished. The steps are those of one uninterrupted run,
# bit for bit on the CPU (CheckpointTest). On the GPU machine, after bash bench/gpu-prepare.sh on the CPU machine:
#   bash bench/gpu-continue.sh SPEC [SAVE_DIR]        SAVE_DIR: runs/continue (git-ignored)
# SPEC: one run a line, "NAME STEPS OPTION..." (taco train's options, split at spaces: the codec, seed and shape; not
# --save, --load, --out or --steps, which the script sets); "#" starts a comment. bench/continue.spec is an example.
# Environment: BUDGET (540 s), MARGIN (30 s kept for the JVM's start and the last save), SAVE_INTERVAL (0: a checkpoint
# only where a call stops or a run ends), DEVICE (cuda; cpu runs ./taco train on this machine: the same script tried
# without a GPU), JAVA_OPTS (-Xmx16g).
# Each run saves into SAVE_DIR/NAME (Megatron's layout) and each call's report into SAVE_DIR/NAME/calls/from-STEP/.
# Between calls: a warm machine keeps SAVE_DIR (ignored files stay there); a fresh one has it only if it travels. So,
# with $OUT set, the newest checkpoint of every run and the reports are packed into $OUT/continue.tar.NN (15 MiB parts)
# when they fit into MAX_BACK_MIB (56; what comes back from a call is at most 64 MiB); on the CPU machine
#   mkdir -p runs/continue && cat FILES_AT/continue.tar.* | tar -x -C runs/continue
# and the next call carries runs/continue (the travelling tree, .device and data/ included, is at most 64 MiB).
# docs/gpu.md says which sizes can travel. Writes $OUT/continue.log and $OUT/status.txt (or SAVE_DIR/'s without $OUT).
# Exit status: 0 every run finished, 3 some are unfinished (call again), 1 a run failed (its log's end is printed).
set -uo pipefail
start=$(date +%s)
spec=$(realpath -m "${1:?usage: bash bench/gpu-continue.sh SPEC [SAVE_DIR]}")
[ -z "${2:-}" ] || save=$(realpath -m "$2")
cd "$(dirname "$0")/.." || exit 2
save="${save:-runs/continue}"
[ -f "$spec" ] || { echo "gpu-continue: no spec file $spec" >&2; exit 2; }
budget="${BUDGET:-540}" margin="${MARGIN:-30}" device="${DEVICE:-cuda}"
if [ "$device" = cpu ]; then
  train=(./taco train --device cpu)
else
  # shellcheck disable=SC1091
  source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
  read -r -a jvm <<< "${JAVA_OPTS:--Xmx16g}"
  train=(java "${jvm[@]}" -cp "$CP" dev.taco.runtime.cli.TacoCli train --device "$device")
fi
mkdir -p "$save"
report="${OUT:-$save}"
log="$report/continue.log"
: > "$log"
failed=0
# the spec on descriptor 3: the runs read nothing of it from their standard input
while read -r -u 3 name steps rest; do
  case "$name" in ''|'#'*) continue ;; esac
  read -r -a opts <<< "${rest%%#*}"
  for o in "${opts[@]}"; do
    case "$o" in --save|--load|--out|--steps|--train-iters|--exit-duration-in-mins)
      echo "gpu-continue: $spec, run $name: $o is the script's to set" >&2; exit 2 ;;
    esac
  done
  dir="$save/$name"
  at=$(cat "$dir/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
  [ "$at" -ge "$steps" ] 2>/dev/null && continue
  left=$(( start + budget - $(date +%s) ))
  if [ "$left" -le "$margin" ]; then
    echo "$name: no time left in this call (step $at of $steps)" | tee -a "$log"
    continue
  fi
  mins=$(awk -v s="$((left - margin))" 'BEGIN { printf "%.4f", s / 60 }')
  echo "== $name: from step $at of $steps, --exit-duration-in-mins $mins" | tee -a "$log"
  mkdir -p "$dir"
  # SIGTERM at the budget's end stops a run after its step, saving; KILL 20 s later
  timeout -k 20 "$left" "${train[@]}" "${opts[@]}" --steps "$steps" \
    --save "$dir" --load "$dir" --save-interval "${SAVE_INTERVAL:-0}" --exit-duration-in-mins "$mins" \
    --out "$dir/calls/from-$at" --overwrite </dev/null >> "$log" 2>&1
  rc=$?
  case $rc in
    0|124|143) ;;
    *) failed=1; echo "$name: failed with exit status $rc; the end of its log:" >&2; tail -5 "$log" >&2 ;;
  esac
done 3< "$spec"
unfinished=0
{
  printf '%-24s %8s %8s  %s\n' run step steps state
  while read -r -u 3 name steps _; do
    case "$name" in ''|'#'*) continue ;; esac
    at=$(cat "$save/$name/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)
    state=finished
    [ "$at" -ge "$steps" ] || { state=unfinished; unfinished=1; }
    printf '%-24s %8s %8s  %s\n' "$name" "$at" "$steps" "$state"
  done 3< "$spec"
} > "$report/status.txt"
cat "$report/status.txt"
if [ -n "${OUT:-}" ]; then
  # what a fresh machine needs: each run's newest checkpoint, and the reports of the calls so far
  files=()
  for d in "$save"/*/; do
    n=$(basename "$d")
    it=$(cat "$d/latest_checkpointed_iteration.txt" 2>/dev/null) || continue
    files+=("$n/latest_checkpointed_iteration.txt" "$(printf '%s/iter_%07d' "$n" "$it")")
    [ -d "$d/calls" ] && files+=("$n/calls")
  done
  if [ ${#files[@]} -gt 0 ]; then
    mib=$(( ($(cd "$save" && du -cb "${files[@]}" | tail -1 | cut -f1) + (1 << 20) - 1) >> 20 ))
    if [ "$mib" -le "${MAX_BACK_MIB:-56}" ]; then
      tar -C "$save" -c "${files[@]}" | split -b 15m -d -a 2 - "$OUT/continue.tar."
      echo "packed: $mib MiB into $OUT/continue.tar.* (cat them | tar -x -C runs/continue on the CPU machine)"
    else
      echo "not packed: the newest checkpoints take $mib MiB, more than ${MAX_BACK_MIB:-56} MiB can come back;" \
        "they go on only on this machine while it is warm"
    fi
  fi
fi
[ "$failed" = 0 ] || exit 1
[ "$unfinished" = 0 ] || exit 3
exit 0
