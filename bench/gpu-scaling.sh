#!/usr/bin/env bash
# Issue I on a machine of four or eight GPUs, in one command (on the CPU machine first: bash bench/gpu-prepare.sh):
#   bash bench/gpu-scaling.sh OUT_DIR           -> OUT_DIR/gpu-scaling.json (bench/gpu_scaling_results.py) and the runs
#   STAGES="train4-nvlink" bash bench/gpu-scaling.sh OUT_DIR        a subset (one device call each: below)
# Stages (STAGES, in this order by default; "assemble" always runs last):
#   collectives-4   bench/gpu-collectives-nccl.sh on the first 4 GPUs (TACO vs NCCL bf16, NVLink and NCCL_P2P_DISABLE=1)
#   collectives-8   the same on 8 GPUs
#   train4-nvlink   every CONFIGS entry with TP x DP = 4 (8, 2), over NCCL on that link: tokens/s with --compression
#   train8-nvlink     none and taco and none --no-tp-comm (bench/gpu-multi-lib.sh's time_config: four runs a config),
#   train4-no-p2p     then PyTorch's TP step (torch_tp_step.py's worker through bench/torch_tp_run.py) on the DP = 1
#   train8-no-p2p     shapes at the same TP; train2-* are the 2-GPU points the scaling efficiencies are measured from
#   train2-nvlink
#   train2-no-p2p
# CONFIGS: MODE:TP:DP:D,L,H,T,B entries; MODE strong (the same model at every size) or weak (hidden grown with TP, about
# the same parameters per GPU: 12 L D^2 / TP); heads of 64 everywhere (flash attention). The default:
#   strong:2:1:2048,8,32,2048,4  strong:4:1:2048,8,32,2048,4  strong:8:1:2048,8,32,2048,4
#   strong:4:2:2048,8,32,2048,4  strong:2:4:2048,8,32,2048,4
#   weak:2:1:1024,8,16,2048,4    weak:4:1:1536,8,24,2048,4    weak:8:1:2048,8,32,2048,4   (= strong TP=8: run once)
# SP (default 1: --sequence-parallel on every run; "0 1" both), TORCH (1), and bench/gpu-multi-lib.sh's knobs:
# DEADLINE (570 s, so that one device call of 600 s still ends with gpu-scaling.json written; 0 = none), N1/N2
# (10/160), CALIB (1), LR (4e-4), RUN_TIMEOUT (240), SMOKE.
# On 4 GPUs the 8-GPU stages are skipped (SMOKE=1 runs them with the ranks sharing GPU 0). On ONE GPU every stage is
# a smoke test (device-local, SMOKE_LAYERS=2 layers, N1/N2 2/5 steps, PyTorch at world size 1; the no-p2p training
# stages and the second collective stage, which would repeat the others, are skipped), rows marked "smoke": true.
# Rough estimates on 8 x H200 (not yet measured): collectives-4 130 s, collectives-8 150 s, train2-nvlink 220 s,
# train4-nvlink 200 s, train8-nvlink 300 s, train2-no-p2p 270 s, train4-no-p2p 260 s, train8-no-p2p 390 s (about
# 32 min in all), so six calls of 600 s:  STAGES="collectives-4 collectives-8"  |  "train4-nvlink train2-nvlink"  |
# "train8-nvlink"  |  "train4-no-p2p"  |  "train8-no-p2p"  |  "train2-no-p2p"  (on 4 GPUs: the first, the second,
# the fourth and the last). A stage that overruns is cut at DEADLINE (OUT/skipped.txt) and can be repeated alone.
# Several calls' OUT folders merge on the CPU machine:
#   python3 bench/gpu_scaling_results.py --out bench/results/gpu-scaling.json OUT_1 OUT_2 ...
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
T_START=$(date +%s)
out="${1:-${OUT:-target/gpu-scaling}}"
# shellcheck disable=SC1091
source bench/gpu-multi-lib.sh # the bundle's environment, $out created and made absolute, the GPUs
STAGES=${STAGES:-collectives-4 collectives-8 train4-nvlink train8-nvlink train4-no-p2p train8-no-p2p train2-nvlink train2-no-p2p}
read -r -d '' -a configs <<< "${CONFIGS:-strong:2:1:2048,8,32,2048,4 strong:4:1:2048,8,32,2048,4 strong:8:1:2048,8,32,2048,4
  strong:4:2:2048,8,32,2048,4 strong:2:4:2048,8,32,2048,4 weak:2:1:1024,8,16,2048,4 weak:4:1:1536,8,24,2048,4
  weak:8:1:2048,8,32,2048,4}" || true
CMD="STAGES='$STAGES' bash bench/gpu-scaling.sh OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
echo "stages: $STAGES; $NGPU GPU(s) visible; deadline ${DEADLINE}s"

tag() { # D,L,H,T,B TP DP SP
  local D L H T B
  IFS=, read -r D L H T B <<< "$1"
  echo "d$D-l$L-h$H-t$T-b$B-tp$2-dp$3-sp$4"
}

# the configs of G GPUs, one line each "MODES TP DP SHAPE": a (TP, DP, shape) listed in both modes runs once
configs_of() { # G
  local c mode tp dp shape
  for c in "${configs[@]}"; do
    IFS=: read -r mode tp dp shape <<< "$c"
    [ $((tp * dp)) -eq "$1" ] && echo "$tp $dp $shape $mode"
  done | awk '{k = $1 " " $2 " " $3; if (!(k in m)) { o[++n] = k; m[k] = $4 } else if (index("+" m[k] "+", "+" $4 "+") == 0)
              m[k] = m[k] "+" $4} END { for (i = 1; i <= n; i++) print m[o[i]], o[i] }'
}

train_stage() { # G LINK
  local g=$1 link=$2 modes tp dp shape sp tdp=1
  local -a torch_shapes=()
  stage_mode "$g" || return 0
  stage_steps
  link_runs "$link" || return 0
  [ "$S_SMOKE" = true ] && echo "SMOKE: $([ "$S_TRANSPORT" = nccl ] && echo "tiny runs" || echo "the $g ranks share GPU 0 (device-local), tiny runs"); not a scaling measurement"
  local todo
  todo=$(configs_of "$g")
  [ -n "$todo" ] || { echo "no CONFIGS entry with TP x DP = $g"; return 0; }
  link_env "$link"
  read -r _ tp dp _ <<< "$(head -1 <<< "$todo")"
  warm_up "$out/i/$link/warmup-g$g" "$tp" "$dp"
  while read -r modes tp dp shape; do
    shape=$(stage_shape "$shape")
    for sp in ${SP:-1}; do
      time_config "$out/i/$link/$(tag "$shape" "$tp" "$dp" "$sp")" "$link" "$tp" "$dp" "$sp" "$shape" "$modes"
    done
    [ "$dp" = 1 ] && [[ " ${torch_shapes[*]} " != *" $shape "* ]] && torch_shapes+=("$shape") && tdp=$tp
  done <<< "$todo"
  [ ${#torch_shapes[@]} -gt 0 ] && torch_tp "$out/i/$link/torch-tp$tdp.json" "$tdp" "$link" "${torch_shapes[@]}"
  link_env nvlink
}

for stage in $STAGES; do
  echo "=== stage $stage at $(( $(date +%s) - T_START ))s"
  case $stage in
    collectives-4 | collectives-8)
      g=${stage#collectives-}
      stage_mode "$g" || continue
      if [ -e "$out/collectives-r$S_GPUS/gpu-collectives-nvlink.json" ]; then
        echo "skip: the collectives at $S_GPUS rank(s) ran already ($out/collectives-r$S_GPUS)"
        continue
      fi
      [ "$S_GPUS" -lt "$g" ] && echo "SMOKE: $S_GPUS GPU, the collectives at world size $S_GPUS"
      run_limited "$out/collectives-r$S_GPUS.log" 420 bash bench/gpu-collectives-nccl.sh "$out/collectives-r$S_GPUS"
      grep -E "GPU\(s\)|^all-|^reduce-|wrote" "$out/collectives-r$S_GPUS.log" | head -40
      ;;
    train[0-9]*-nvlink | train[0-9]*-no-p2p)
      g=${stage%%-*}
      g=${g#train}
      train_stage "$g" "${stage#*-}"
      ;;
    assemble) ;;
    *) echo "unknown stage $stage (collectives-4 collectives-8 train4-nvlink train8-nvlink train4-no-p2p train8-no-p2p"\
         "train2-nvlink train2-no-p2p assemble)" >&2 ;;
  esac
done
finish bench/gpu_scaling_results.py
