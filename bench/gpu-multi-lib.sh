# Sourced by bench/gpu-h.sh and bench/gpu-scaling.sh (with $out set), on the GPU machine: the bundle's environment,
# the GPU count, a deadline so that one device call (600 s) ends with its results written, and the timed training runs.
#
# A config's step time comes from TWO runs that differ only in --steps (N1 and N2): report.json's wall_seconds and
# tokens_per_second cover the whole Trainer.run (NCCL init, model allocation, calibration, the evaluations), so the
# step time is (wall(N2) - wall(N1)) / (N2 - N1), the same for --no-tp-comm. Each config is four runs: none,taco at
# N1 and N2, none --no-tp-comm at N1 and N2 (bench/gpu_runs.py does the arithmetic). A start-up that varies by d
# seconds between the two runs moves the step time by d / (N2 - N1): raise N2 where the budget allows. Every 10th step
# (1, 11, 21, ...) rank 0 times op by op and waits for each TP collective (Trainer.TIMED_INTERVAL), in both runs alike.
# Knobs (environment): DEADLINE (s after the script started by which every run has ended, 0 = none; default 570 for
# the device tool's 600 s per call), RUN_TIMEOUT (one run's limit, 240), N1/N2 (10/160), CALIB (--calibration-steps of
# the timed runs, 1), LR (4e-4), WARMUP (50), SMOKE (unset: automatic on one GPU; 1: force tiny runs; 0: never),
# SMOKE_LAYERS (2: --num-layers of every smoke run), TACO_CACHE (default ${TMPDIR:-/tmp}/taco-cache: the PTX cache,
# outside .device so that it outlives a call that carries .device again while the machine stays warm).

T_START=${T_START:-$(date +%s)}

# the bundle's environment with the PTX cache outside .device; $out (set by the script) created, made absolute
export TACO_CACHE="${TACO_CACHE:-${TMPDIR:-/tmp}/taco-cache}"
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd)
DEADLINE=${DEADLINE:-570}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
RESERVE=${RESERVE:-20}
LR=${LR:-4e-4}
WARMUP=${WARMUP:-50}
CALIB=${CALIB:-1}
SMOKE_LAYERS=${SMOKE_LAYERS:-2}
JAVA_XMX=${JAVA_XMX:-32g}

# the GPUs this script may use: CUDA_VISIBLE_DEVICES's entries when set, else nvidia-smi -L's (MIG lines left out)
gpu_list() {
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    tr ',' '\n' <<< "$CUDA_VISIBLE_DEVICES" | sed '/^\s*$/d'
  else
    nvidia-smi -L 2>/dev/null | sed -n 's/^GPU \([0-9]\+\):.*/\1/p'
  fi
}
mapfile -t GPU_IDS < <(gpu_list)
NGPU=${#GPU_IDS[@]}
[ "$NGPU" -ge 1 ] || { echo "FAIL no GPU (nvidia-smi -L lists none)" >&2; exit 2; }

# seconds left before the deadline (a large number without one)
left() {
  if [ "${DEADLINE:-0}" -le 0 ]; then echo 1000000; else echo $(( DEADLINE - ($(date +%s) - T_START) )); fi
}

# one logged step under a timeout capped by the deadline: run_limited LOG LIMIT_S COMMAND...
# returns the command's status, 124 when it timed out, 125 when the deadline left no time to start it
run_limited() {
  local log=$1 lim=$2 l
  shift 2
  l=$(( $(left) - RESERVE ))
  [ "$l" -lt "$lim" ] && lim=$l
  mkdir -p "$(dirname "$log")"
  if [ "$lim" -lt 15 ]; then
    echo "SKIP (deadline ${DEADLINE}s): ${log%.log}" | tee -a "$out/skipped.txt" >&2
    return 125
  fi
  # SIGTERM first: taco train finishes the step, writes a partial report.json (stopped: "signal") and exits 143
  timeout -k 20 "$lim" "$@" < /dev/null > "$log" 2>&1
  local rc=$?
  [ $rc -eq 0 ] || echo "rc $rc$([ $rc -eq 124 ] && echo " (timed out after ${lim}s)") at $(( $(date +%s) - T_START ))s: $log" \
    | tee -a "$out/failed.txt" >&2
  return $rc
}

taco_train() { # LOG LIMIT_S ARGS...: one `taco train --device cuda` run
  local log=$1 lim=$2
  shift 2
  run_limited "$log" "$lim" java -Xmx"$JAVA_XMX" -cp "$CP" dev.taco.runtime.cli.TacoCli train --device cuda "$@"
}

# The mode of a stage that needs NEED GPUs. Sets S_SMOKE (true|false), S_TRANSPORT (nccl|device-local), S_GPUS (the
# GPUs it runs on: NEED, or 1 in a smoke run on one GPU) and exports CUDA_VISIBLE_DEVICES as the first S_GPUS ids.
# Returns 1 (skip) on a machine of 1 < GPUs < NEED unless SMOKE=1, and when SMOKE=0 and GPUs < NEED.
stage_mode() {
  local need=$1
  if [ "$NGPU" -ge "$need" ]; then
    S_GPUS=$need S_TRANSPORT=nccl S_SMOKE=false
    [ "${SMOKE:-}" = 1 ] && S_SMOKE=true
  elif [ "${SMOKE:-}" = 0 ] || { [ "$NGPU" -gt 1 ] && [ "${SMOKE:-}" != 1 ]; }; then
    echo "skip: needs $need GPUs, this machine has $NGPU (SMOKE=1 runs it as a smoke test with the ranks on GPU 0)"
    return 1
  else # the ranks share GPU 0 through device-local: a smoke test of the code path, never a link measurement
    S_GPUS=1 S_TRANSPORT=device-local S_SMOKE=true
  fi
  CUDA_VISIBLE_DEVICES=$(IFS=,; echo "${GPU_IDS[*]:0:$S_GPUS}")
  export CUDA_VISIBLE_DEVICES
  return 0
}

# the link's environment: link_env nvlink|no-p2p (NCCL_P2P_DISABLE=1: NCCL through host memory)
link_env() {
  unset NCCL_P2P_DISABLE
  [ "$1" = no-p2p ] && export NCCL_P2P_DISABLE=1
  return 0
}

# whether a training stage on this link means anything: device-local has no link, so with the ranks sharing GPU 0
# the no-p2p stages would repeat the nvlink ones (the collective benchmark, NCCL at world size 1, still runs both)
link_runs() { # LINK
  if [ "$1" = no-p2p ] && [ "$S_TRANSPORT" != nccl ]; then
    echo "skip: device-local has no link; the no-p2p stage would repeat the nvlink one"
    return 1
  fi
  return 0
}

# step counts of this stage's timed runs and curves (tiny in a smoke run)
stage_steps() {
  if [ "$S_SMOKE" = true ]; then
    S_N1=${SMOKE_N1:-2} S_N2=${SMOKE_N2:-5} S_CURVE=${SMOKE_CURVE_STEPS:-20} S_CURVE_EVAL=10
  else
    S_N1=${N1:-10} S_N2=${N2:-160} S_CURVE=${CURVE_STEPS:-500} S_CURVE_EVAL=${CURVE_EVAL:-50}
  fi
}

# D,L,H,T,B with L replaced by SMOKE_LAYERS in a smoke run (0 keeps it)
stage_shape() {
  local D L H T B
  IFS=, read -r D L H T B <<< "$1"
  [ "$S_SMOKE" = true ] && [ "$SMOKE_LAYERS" -gt 0 ] && L=$SMOKE_LAYERS
  echo "$D,$L,$H,$T,$B"
}

# meta.json of a config folder: what the assembler needs beyond report.json
write_meta() { # DIR KIND LINK TP DP SP SHAPE MODE
  local D L H T B
  IFS=, read -r D L H T B <<< "$7"
  mkdir -p "$1"
  cat > "$1/meta.json" <<EOF
{"kind": "$2", "link": "$3", "tp": $4, "dp": $5, "sequence_parallel": $([ "$6" = 1 ] && echo true || echo false),
 "hidden": $D, "layers": $L, "heads": $H, "seq": $T, "micro_batch": $B, "mode": "$8",
 "transport": "$S_TRANSPORT", "smoke": $S_SMOKE, "gpus_used": $S_GPUS, "gpus_visible": $NGPU,
 "n1": ${S_N1:-0}, "n2": ${S_N2:-0}, "calibration_steps": $CALIB, "lr": "$LR",
 "nccl_p2p_disable": "${NCCL_P2P_DISABLE:-}", "command": "${CMD//\"/\'}"}
EOF
}

shape_args() { # D,L,H,T,B -> the taco train flags
  local D L H T B
  IFS=, read -r D L H T B <<< "$1"
  echo "--hidden-size $D --num-layers $L --num-attention-heads $H --seq-length $T --micro-batch-size $B"
}

# Compiles every kernel the stage's runs use once (NVRTC, into the PTX cache) in one JVM, so that no timed run pays
# for it: none and taco, sequence parallelism on and off, head sizes 64 (flash attention) and 128 (GEMM attention).
warm_up() { # DIR TP DP
  local dir=$1 tp=$2 dp=$3 f hd sp
  mkdir -p "$dir"
  f="$dir/warmup-runs.txt"
  : > "$f"
  for hd in 64 128; do
    for sp in "" --sequence-parallel; do
      echo "train --device cuda --tp $tp --data-parallel-size $dp --tp-transport $S_TRANSPORT --compression none,taco" \
        "--hidden-size $((hd * tp)) --num-layers 1 --num-attention-heads $tp --seq-length 256 --micro-batch-size 2" \
        "--steps 3 --eval-iters 1 --codec-error-interval 0 $sp --overwrite --out $dir/warmup-$hd${sp:+-sp}" >> "$f"
    done
  done
  run_limited "$dir/warmup.log" 180 java -Xmx"$JAVA_XMX" -cp "$CP" dev.taco.bench.ConcurrentRuns 1 "$f"
}

# One timed config: none,taco at N1 and N2 steps, none --no-tp-comm at N1 and N2 (into DIR/{n1,n2,nc1,nc2}).
time_config() { # DIR LINK TP DP SP SHAPE MODE
  local dir=$1 link=$2 tp=$3 dp=$4 sp=$5 shape=$6 mode=$7
  local -a common
  read -r -a common <<< "$(shape_args "$shape")"
  common+=(--tp "$tp" --tp-transport "$S_TRANSPORT" --codec-error-interval 0 --calibration-steps "$CALIB"
           --eval-interval 1000000 --eval-iters 4 --log-interval 1000000 --lr "$LR" --lr-warmup-iters "$WARMUP"
           --seed 1 --overwrite)
  [ "$dp" -gt 1 ] && common+=(--data-parallel-size "$dp")
  [ "$sp" = 1 ] && common+=(--sequence-parallel)
  write_meta "$dir" timing "$link" "$tp" "$dp" "$sp" "$shape" "$mode"
  echo "== $(basename "$dir") ($link, $S_TRANSPORT$([ "$S_SMOKE" = true ] && echo ", SMOKE")) at $(( $(date +%s) - T_START ))s"
  taco_train "$dir/n1.log" "$RUN_TIMEOUT" "${common[@]}" --compression none,taco --steps "$S_N1" --out "$dir/n1"
  taco_train "$dir/n2.log" "$RUN_TIMEOUT" "${common[@]}" --compression none,taco --steps "$S_N2" --out "$dir/n2"
  # the losses of --no-tp-comm runs are wrong by design: a small learning rate keeps them finite (the step time does
  # not depend on it), since a diverged run stops with an error and leaves no time
  taco_train "$dir/nc1.log" "$RUN_TIMEOUT" "${common[@]}" --compression none --no-tp-comm --lr 1e-5 --steps "$S_N1" \
    --out "$dir/nc1"
  taco_train "$dir/nc2.log" "$RUN_TIMEOUT" "${common[@]}" --compression none --no-tp-comm --lr 1e-5 --steps "$S_N2" \
    --out "$dir/nc2"
  python3 bench/gpu_runs.py summary "$dir" || true
}

# A loss curve: none,taco over S_CURVE steps with evaluations every S_CURVE_EVAL (calibration at the CLI's default).
curve_config() { # DIR LINK TP DP SP SHAPE
  local dir=$1 link=$2 tp=$3 dp=$4 sp=$5 shape=$6
  local -a args
  read -r -a args <<< "$(shape_args "$shape")"
  args+=(--tp "$tp" --tp-transport "$S_TRANSPORT" --codec-error-interval 0 --eval-interval "$S_CURVE_EVAL"
         --eval-iters 8 --log-interval 50 --lr "$LR" --lr-warmup-iters "$WARMUP" --seed 1 --overwrite
         --compression none,taco --steps "$S_CURVE")
  [ "$dp" -gt 1 ] && args+=(--data-parallel-size "$dp")
  [ "$sp" = 1 ] && args+=(--sequence-parallel)
  write_meta "$dir" curve "$link" "$tp" "$dp" "$sp" "$shape" curve
  echo "== curve $(basename "$dir") ($link, $S_CURVE steps) at $(( $(date +%s) - T_START ))s"
  taco_train "$dir/run.log" "${CURVE_TIMEOUT:-420}" "${args[@]}" --out "$dir/run"
  grep -sE "^(none|taco) .*[0-9]$|taco vs none" "$dir/run.log" | head -4
}

# PyTorch's Megatron-style TP step (../shared/tools/torch_tp_step.py's worker, through bench/torch_tp_run.py) on the
# given shapes at TP = the stage's GPUs, on the current link: OUT_FILE
torch_tp() { # OUT_FILE TP LINK SHAPE...
  local f=$1 tp=$2 link=$3
  shift 3
  [ "${TORCH:-1}" = 1 ] || return 0
  local ws=$tp
  [ "$S_TRANSPORT" = nccl ] || ws=1
  echo "== torch TP=$tp (world size $ws) $link: $*"
  run_limited "${f%.json}.log" "${TORCH_TIMEOUT:-240}" python3 bench/torch_tp_run.py --tp "$tp" --world-size "$ws" \
    --link "$link" --smoke "$S_SMOKE" --out "$f" "$@"
  grep -E "step .* ms" "${f%.json}.log" | head -8
}

finish() { # RESULTS_SCRIPT: the assemble step every staged script ends with (over $out), then the runs that failed or
  # were skipped by the deadline; exit status 0 (a partial run still writes what it has)
  echo "=== assemble at $(( $(date +%s) - T_START ))s"
  python3 "$1" --command "$CMD" "$out"
  [ -s "$out/failed.txt" ] && { echo "failed runs:"; cat "$out/failed.txt"; }
  [ -s "$out/skipped.txt" ] && { echo "skipped (deadline):"; cat "$out/skipped.txt"; }
  exit 0
}
