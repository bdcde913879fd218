#!/usr/bin/env bash
# GPU half of the kernel-compiler semantics corpus (issue C): compiles every gpu-semantics/<kernel>.cu with nvcc,
# runs it on the GPU and compares with the JVM's outputs embedded in it (bit-exact; transcendental within 4 ulp).
# The .cu and .expected files are generated on a CPU machine by GpuSemanticsTest (mvn test); no Java is needed here.
#   usage: tornado-kernels/gpu-semantics.sh [arch, default sm_90]
# The programs share the helpers in gpu-semantics/java_semantics.cuh and their comparison in harness_check.cuh (take
# both along).
# Writes gpu-semantics/out/<kernel>.actual (same format as <kernel>.expected, so `diff` shows the differences).
# Exit status: 0 if every kernel matches, 1 otherwise.
set -u
cd "$(dirname "$0")/gpu-semantics"
arch="${1:-sm_90}"
mkdir -p out
fail=0
for cu in *.cu; do
  k="${cu%.cu}"
  if ! nvcc -std=c++17 -O2 -arch="$arch" -o "out/$k" "$cu" > "out/$k.nvcc.log" 2>&1; then
    echo "FAIL $k: nvcc failed"; cat "out/$k.nvcc.log"; fail=1; continue
  fi
  if "./out/$k" > "out/$k.actual" 2> "out/$k.log"; then
    echo "OK   $k ($(tail -1 "out/$k.log"))"
  else
    echo "FAIL $k:"; head -20 "out/$k.log"; fail=1
  fi
done
exit $fail
