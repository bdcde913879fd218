#!/usr/bin/env bash
# Issue F on the GPU backend, for the GPU machine (on the CPU machine first: bash bench/gpu-prepare.sh):
#   bash bench/gpu-parallel.sh OUT_DIR
# On one GPU through device-local (the ranks share it): sequence parallelism at TP = 2 (none and taco), TP = 2 x DP = 2,
# and a resume (20 steps uninterrupted; 10 steps saved with --exit-interval; resumed from the checkpoint), then one
# line per check: the runs' final losses, and whether the resumed run's per-step training losses equal the
# uninterrupted run's bit for bit (the GPU's kernels are not all deterministic: the line says what it found).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-target/gpu-parallel}}"
mkdir -p "$out"
taco() { java -Xmx16g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$CP" dev.taco.runtime.cli.TacoCli train \
  --device cuda "$@"; }
fail=0
taco --tp 2 --sequence-parallel --steps 60 --out "$out/sp" > "$out/sp.log" 2>&1 || { echo "FAIL sp"; fail=1; }
taco --tp 2 --data-parallel-size 2 --steps 60 --out "$out/dp" > "$out/dp.log" 2>&1 || { echo "FAIL dp"; fail=1; }
taco --compression none --tp 2 --steps 20 --out "$out/A" > "$out/A.log" 2>&1 || { echo "FAIL A"; fail=1; }
taco --compression none --tp 2 --steps 20 --save "$out/ck" --exit-interval 10 --out "$out/B" > "$out/B.log" 2>&1 \
  || { echo "FAIL B"; fail=1; }
taco --compression none --tp 2 --steps 20 --load "$out/ck" --out "$out/C" > "$out/C.log" 2>&1 || { echo "FAIL C"; fail=1; }
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def runs(d):
    return json.load(open(f"{out}/{d}/report.json"))["runs"]
for d in ("sp", "dp"):
    try:
        r = runs(d)
        print(d, " ".join(f"{x['compression']}: val {x['initial_val_loss']:.4f} -> {x['final_val_loss']:.4f}" for x in r),
              f"taco vs none {100 * (r[1]['final_val_loss'] / r[0]['final_val_loss'] - 1):+.2f}%")
    except Exception as e:
        print(d, "FAIL", e)
try:
    a = {h["step"]: h["train_loss"] for h in runs("A")[0]["history"]}
    c = [(h["step"], h["train_loss"]) for h in runs("C")[0]["history"] if h["train_loss"] is not None]
    same = [s for s, l in c if a[s] == l]
    worst = max(abs(a[s] - l) for s, l in c)
    print(f"resume: steps {c[0][0]}..{c[-1][0]}, {len(same)} of {len(c)} train losses bit-identical, max |diff| {worst:.3e}")
except Exception as e:
    print("resume FAIL", e)
PY
exit $fail
