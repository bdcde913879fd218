#!/usr/bin/env bash
# Runs dev.taco.bench.GemmBench (JMH: fork 1, warmup 2x1s, measurement 3x2s) and prints a markdown table with
# GFLOP/s, vector/naive and the ratio to the OpenBLAS anchor (185 GFLOP/s on the 2-core CPU machines).
# Also measures numpy (OpenBLAS) SGEMM in the same run when python3 + numpy are available.
# Usage: bench/run-gemm.sh [n=512,1024] [naiveMaxN=512] [anchor=GFLOPS]
#        (builds what is missing first: bench/jmh-env.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/jmh-env.sh
source bench/jmh-env.sh
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE # numpy's OpenBLAS picks its own kernels (SkylakeX here), as the machine notes ask
sizes=512,1024
for a in "$@"; do
  case $a in n=*) sizes=${a#n=} ;; esac
done
if python3 -c 'import numpy' 2>/dev/null; then
  SIZES=$sizes python3 - <<'PY'
import numpy as np, os, time
for n in map(int, os.environ['SIZES'].split(',')):
    a = np.random.rand(n, n).astype(np.float32); b = np.random.rand(n, n).astype(np.float32)
    for _ in range(3): a @ b
    ts = []
    for _ in range(20):
        t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
    ts.sort(); med = ts[len(ts)//2]
    print(f"# numpy {np.__version__} (OpenBLAS) sgemm n={n}: median {med*1e3:.2f} ms = {2*n**3/med/1e9:.1f} GFLOP/s (same run)")
PY
else
  echo "# $(command -v python3) has no numpy: numpy's OpenBLAS is NOT measured in this run (pip install numpy; its" \
    "wheel bundles OpenBLAS); the table's ratio is to GemmBench's fixed anchor instead" >&2
fi
exec "$JAVA" --add-modules jdk.incubator.vector -cp "$CP" dev.taco.bench.GemmBench "$@"
