#!/usr/bin/env bash
# CPU-machine step before bench/gpu-codec.sh: builds the jars, makes the .device bundle
# (../shared/tools/device-bundle.sh) and translates the GPU kernels (dev.taco.kernels.gpu.TacoGpuKernels) to CUDA C
# in .device/cuda/ (the bundle's jlink'd runtime has no jdk.compiler, so translation happens here; NVRTC compiles
# the units on the GPU machine at first use).
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
export PATH="$JAVA_HOME/bin:$PATH"
mvn -q -o -DskipTests package
../shared/tools/device-bundle.sh
"$JAVA_HOME/bin/java" -cp "tornado-kernels/target/classes:$(ls .device/lib/jna-*.jar | tr '\n' ':')" \
  dev.taco.kernels.gpu.TacoCudaSources tornado-kernels/src/main/java .device/cuda
