#!/usr/bin/env bash
# Fidelity at GPU scale (issue E part 7), for the GPU machine: a ~11 M-parameter GPT (hidden 384, 6 layers, 6 heads,
# sequence 256, micro-batch 16) trained on the bundled corpus at TP=2 (ranks sharing the GPU through device-local) for
# each codec that has GPU kernels and each seed, with `taco train --device cuda`; then one summary of best and final
# validation loss per codec. On the CPU machine first: bash bench/gpu-prepare.sh. On the GPU machine:
#   bash bench/gpu-fidelity.sh OUT_DIR [STEPS] [SEEDS...]
# Writes OUT_DIR/fid-<seed>-<codec>/report.json per run and OUT_DIR/fidelity.json:
#   [{"codec", "seeds", "best_val", "final_val", "best_val_mean", "best_val_spread", ...}]. The plot is drawn on the
# CPU machine (the bundle's Java runtime has no java.desktop) from the results file that collects these summaries:
#   java -cp "$CP" dev.taco.bench.FidelityPlot bench/results/gpu-train-1gpu.json bench/results/gpu-fidelity.png
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-target/gpu-fidelity}}"; shift || true
steps="${1:-2000}"; shift || true
seeds=("$@"); [ ${#seeds[@]} -gt 0 ] || seeds=(1 2 3)
codecs="${FIDELITY_CODECS:-none,taco,int8-group,fp8-tensor}"
# One run per (seed, codec), in ONE JVM (dev.taco.bench.ConcurrentRuns, FIDELITY_JOBS at a time, 1 by default: more
# at once bought nothing, below). No codec-error sampling by default (FIDELITY_CODEC_ERROR_INTERVAL=0): a sample
# encodes and decodes all 24 sites' tensors with the CPU codec on rank 0 while rank 1 waits, and at the CLI's default
# (every 10th step) that, not the GPU, set the pace of the compressed runs: 6, then 2 of them at once finished none of
# 5000 steps in 560 and 330 s (device runs 18 and 20 of session 6); without it one int8-group run took 82-89 s and one
# fp8-tensor run 117-119 s (runs 3 and 4 of session 7). The 11 M-parameter step leaves the H200 mostly idle, and
# threads share one CUDA context where processes would be time-sliced; yet 6 runs at once took 410 s each, no faster
# than one after another (run 17 of session 6), and 12 at once (24 polling rank threads on 16 cores) finished none of
# 5000 steps in 500 s (run 13). Each run writes OUT_DIR/fid-<seed>-<codec>/report.json.
# The warmup is a tenth of the steps (--lr-warmup-iters), the schedule of the none/taco comparison of session 6.
mkdir -p "$out"
: > "$out/runs.txt"
for s in "${seeds[@]}"; do
  for c in ${codecs//,/ }; do
    echo "train --device ${FIDELITY_DEVICE:-cuda} --tp 2 --compression $c --hidden-size ${FIDELITY_HIDDEN:-384}" \
      "--num-layers ${FIDELITY_LAYERS:-6} --num-attention-heads 6 --seq-length ${FIDELITY_SEQ:-256}" \
      "--micro-batch-size 16 --lr 1e-3 --lr-warmup-iters $((steps / 10)) --steps $steps --eval-interval 100" \
      "--eval-iters 16 --seed $s --codec-error-interval ${FIDELITY_CODEC_ERROR_INTERVAL:-0}" \
      "--out $out/fid-$s-$c" >> "$out/runs.txt"
  done
done
java -Xmx48g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" dev.taco.bench.ConcurrentRuns \
  "${FIDELITY_JOBS:-1}" "$out/runs.txt" 2> "$out/runs.log" | grep -E "^(none|taco|int8|fp8) |runs done"
rc=${PIPESTATUS[0]}
grep -E "exit [0-9]+ after|FAIL" "$out/runs.log"
[ "$rc" -eq 0 ] || { echo "FAIL a fidelity run (exit $rc); its log: $out/runs.log" >&2; tail -20 "$out/runs.log" >&2; exit 1; }
python3 - "$out" "${seeds[@]}" <<'PY'
import json, statistics, sys
out, seeds = sys.argv[1], sys.argv[2:]
rows = {}
import glob
for path in sorted(glob.glob(f"{out}/fid-*/report.json")):
    s = path.split("/fid-")[1].split("-")[0]
    rep = json.load(open(path))
    for run in rep["runs"]:
        vals = [h["val_loss"] for h in run["history"] if h["val_loss"] is not None]
        r = rows.setdefault(run["compression"], {"codec": run["compression"], "seeds": [], "best_val": [],
                                                 "final_val": [], "best_step": []})
        r["seeds"].append(int(s))
        r["best_val"].append(min(vals))
        r["final_val"].append(vals[-1])
        r["best_step"].append([h["step"] for h in run["history"] if h["val_loss"] == min(vals)][0])
for r in rows.values():
    r["best_val_mean"] = statistics.mean(r["best_val"])
    r["best_val_spread"] = max(r["best_val"]) - min(r["best_val"])
    r["final_val_mean"] = statistics.mean(r["final_val"])
base = rows.get("none")
for r in rows.values():
    if base: r["best_val_vs_none"] = r["best_val_mean"] / base["best_val_mean"] - 1
json.dump(list(rows.values()), open(f"{out}/fidelity.json", "w"), indent=1)
print(json.dumps(list(rows.values()), indent=1))
PY
