#!/usr/bin/env bash
# Issue H on a machine of two GPUs, in one command (on the CPU machine first: bash bench/gpu-prepare.sh):
#   bash bench/gpu-h.sh OUT_DIR                 -> OUT_DIR/gpu-train.json (bench/gpu_h_results.py) and every run's files
#   STAGES="collectives train-nvlink" bash bench/gpu-h.sh OUT_DIR     a subset (one device call each: below)
# Stages (STAGES, in this order by default; "assemble" always runs last):
#   tests           the NCCL GPU tests at two ranks (NcclGpuTest: one JVM, a thread a GPU, a thread that stops;
#                   NcclProcessGpuTest: a process a GPU from torchrun's variables, one killed with SIGKILL mid-all-reduce;
#                   through bench/gpu-tests.sh), then one small model
#                   trained at TP=2 over NCCL and over device-local (fp32, none, taco): the per-step losses side by side
#   collectives     bench/gpu-collectives-nccl.sh (TACO vs NCCL bf16, every op and size, NVLink and NCCL_P2P_DISABLE=1)
#   train-nvlink    TP=2 over NCCL, SHAPES (sequence parallelism off): tokens/s with --compression none and taco and
#   train-no-p2p      none --no-tp-comm (bench/gpu-multi-lib.sh's time_config: four runs a shape), then PyTorch's TP
#                     step on the same shapes and link (bench/torch_tp_run.py -> torch_tp_step.py's worker)
#   sp-nvlink       the same timing with --sequence-parallel, SP_SHAPES (default the first of SHAPES; SP_SHAPES="$SHAPES"
#                     times all three, about 150 s more a link); PyTorch's step has no SP: not run
#   sp-no-p2p
#   curves-nvlink   loss curves, none and taco, CURVE_STEPS (500) steps of CURVE_SHAPE on the bundled corpus, with
#   curves-no-p2p     sequence parallelism off and on (CURVE_SP="0 1")
#   emulated        rank 0 of the same shapes at TP=2 on ONE of the GPUs under the emulated links h200-nvlink-2 and
#                     h200-nopeer-2 (GpuE2E: none and taco), to set the emulation beside the real runs of the same day
# Knobs: SHAPES (D,L,H,T,B; default 1024,8,16,2048,4 2048,8,16,2048,4 768,12,12,1024,8), SP_SHAPES,
# CURVE_SHAPE (the first of SHAPES), CURVE_SP, CURVE_STEPS, CURVE_EVAL (50), TORCH (1; 0 skips PyTorch), and those of
# bench/gpu-multi-lib.sh: DEADLINE (570 s: runs that would end after it are skipped, so that one device call of 600 s
# still ends with gpu-train.json written; 0 = none), N1/N2 (10/160), CALIB (1), LR (4e-4), RUN_TIMEOUT (240), SMOKE.
# On ONE GPU every stage runs as a smoke test (ranks sharing GPU 0 through device-local, SMOKE_LAYERS=2 layers, N1/N2
# 2/5 steps, 20-step curves, PyTorch at world size 1), every row marked "smoke": true. With more than two GPUs it
# uses the first two. Rough estimates on 2 x H200 (not yet measured): tests 90 s, collectives 120 s, train-nvlink 290 s,
# train-no-p2p 340 s, sp-nvlink 100 s, sp-no-p2p 120 s, curves-nvlink 130 s, curves-no-p2p 180 s (about 23 min in all),
# so four calls of 600 s:  STAGES="tests collectives curves-nvlink"  |  "train-nvlink"  |  "train-no-p2p"  |
# "sp-nvlink sp-no-p2p curves-no-p2p". A stage that overruns is cut at DEADLINE (the skipped runs listed in
# OUT/skipped.txt) and can be repeated alone.
# Several calls' OUT folders merge on the CPU machine:
#   python3 bench/gpu_h_results.py --out bench/results/gpu-train.json OUT_1 OUT_2 ...
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
T_START=$(date +%s)
out="${1:-${OUT:-target/gpu-h}}"
# shellcheck disable=SC1091
source bench/gpu-multi-lib.sh # the bundle's environment, $out created and made absolute, the GPUs
STAGES=${STAGES:-tests collectives train-nvlink train-no-p2p sp-nvlink sp-no-p2p curves-nvlink curves-no-p2p emulated}
read -r -d '' -a shapes <<< "${SHAPES:-1024,8,16,2048,4 2048,8,16,2048,4 768,12,12,1024,8}" || true
read -r -d '' -a sp_shapes <<< "${SP_SHAPES:-${shapes[0]}}" || true
curve_shape=${CURVE_SHAPE:-${shapes[0]}}
CMD="STAGES='$STAGES' bash bench/gpu-h.sh OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "stages: $STAGES; $NGPU GPU(s) visible; deadline ${DEADLINE}s"

stage_mode 2 || { python3 bench/gpu_h_results.py --command "$CMD" "$out"; exit 0; }
stage_steps
[ "$S_SMOKE" = true ] && echo "SMOKE: $([ "$S_TRANSPORT" = nccl ] && echo "tiny runs" || echo "the two ranks share GPU 0 (device-local), tiny runs"); nothing here is a link measurement"

timing_stage() { # LINK SP SHAPE...
  local link=$1 sp=$2 s shape
  shift 2
  link_env "$link"
  warm_up "$out/h/$link/warmup-sp$sp" 2 1
  local -a torch_shapes=()
  for s in "$@"; do
    shape=$(stage_shape "$s")
    time_config "$out/h/$link/$(tag "$shape" 2 1 "$sp")" "$link" 2 1 "$sp" "$shape" tp2
    torch_shapes+=("$shape")
  done
  [ "$sp" = 0 ] && torch_tp "$out/h/$link/torch-tp2.json" 2 "$link" "${torch_shapes[@]}"
  link_env nvlink
}

tag() { # D,L,H,T,B TP DP SP
  local D L H T B
  IFS=, read -r D L H T B <<< "$1"
  echo "d$D-l$L-h$H-t$T-b$B-tp$2-dp$3-sp$4"
}

for stage in $STAGES; do
  echo "=== stage $stage at $(( $(date +%s) - T_START ))s"
  case $stage in
    tests)
      run_limited "$out/tests.log" 300 bash bench/gpu-tests.sh "$out/tests" \
        --select-class dev.taco.collective.nccl.NcclGpuTest --select-class dev.taco.collective.nccl.NcclProcessGpuTest
      grep -E "initAll over|failed .* s after|tests (successful|failed|skipped)|MethodSource|=>" "$out/tests.log" \
        | head -30
      if [ "$S_TRANSPORT" = nccl ]; then # TP training over NCCL against the same run with the ranks sharing GPU 0
        small=(--tp 2 --compression fp32,none,taco --hidden-size 256 --num-layers 2 --num-attention-heads 4
               --seq-length 256 --micro-batch-size 4 --steps 30 --eval-interval 10 --codec-error-interval 0 --seed 1
               --overwrite)
        taco_train "$out/tests/tp2-nccl.log" 150 "${small[@]}" --tp-transport nccl --out "$out/tests/tp2-nccl"
        taco_train "$out/tests/tp2-local.log" 150 "${small[@]}" --tp-transport device-local --out "$out/tests/tp2-local"
        python3 bench/gpu_runs.py compare "$out/tests/tp2-nccl" "$out/tests/tp2-local" "$out/tests/nccl-vs-local.json"
      else
        echo "tests: one GPU, no NCCL TP=2 run to compare with device-local"
      fi
      ;;
    collectives)
      run_limited "$out/collectives.log" 420 bash bench/gpu-collectives-nccl.sh "$out/collectives"
      grep -E "GPU\(s\)|^all-|^reduce-|wrote" "$out/collectives.log" | head -40
      ;;
    train-nvlink | train-no-p2p) link_runs "${stage#train-}" && timing_stage "${stage#train-}" 0 "${shapes[@]}" ;;
    sp-nvlink | sp-no-p2p) link_runs "${stage#sp-}" && timing_stage "${stage#sp-}" 1 "${sp_shapes[@]}" ;;
    curves-nvlink | curves-no-p2p)
      link=${stage#curves-}
      link_runs "$link" || continue
      link_env "$link"
      shape=$(stage_shape "$curve_shape")
      for sp in ${CURVE_SP:-0 1}; do
        curve_config "$out/h/$link/curve-$(tag "$shape" 2 1 "$sp")" "$link" 2 1 "$sp" "$shape"
      done
      link_env nvlink
      ;;
    emulated) # the same shapes' rank 0 on one GPU under the two links' models, beside the real runs above
      run_limited "$out/emulated.log" 400 java -Xmx64g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" \
        dev.taco.bench.GpuE2E --out "$out/emulated.json" --no-wire --tp 2 --sp false --codecs none,taco \
        --links h200-nvlink-2,h200-nopeer-2 "${shapes[@]}"
      grep "^emulated link" "$out/emulated.log" | head -20
      ;;
    assemble) ;;
    *) echo "unknown stage $stage (tests collectives train-nvlink train-no-p2p sp-nvlink sp-no-p2p curves-nvlink"\
         "curves-no-p2p emulated assemble)" >&2 ;;
  esac
done
finish bench/gpu_h_results.py
