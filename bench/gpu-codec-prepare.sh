#!/usr/bin/env bash
# CPU-machine step before bench/gpu-codec.sh: builds and installs the jars, makes the .device bundle
# (../shared/tools/device-bundle.sh) and translates the GPU kernels (dev.taco.kernels.gpu.TacoGpuKernels, the
# specialisations TacoCudaSources.kernels() lists) to CUDA C in .device/cuda/ (the bundle's jlink'd runtime has no
# jdk.compiler, so translation happens here; NVRTC compiles the units on the GPU machine at first use).
set -euo pipefail
cd "$(dirname "$0")/.."
export JAVA_HOME=${JAVA_HOME:-/usr/lib/jvm/temurin-25-jdk-amd64}
export PATH="$JAVA_HOME/bin:$PATH"
# install, not package: device-bundle.sh's dependency:copy-dependencies resolves the sibling modules from ~/.m2
mvn -q -DskipTests install
../shared/tools/device-bundle.sh
# The bundle travels under a 64 MiB limit; the GPU programs draw no plots, so XChart's PDF/SVG/GIF exporters stay here.
rm -f .device/lib/{pdfbox,pdfbox-io,fontbox,commons-math3,VectorGraphics2D,animated-gif-lib,graphics2d}-*.jar
rm -rf .device/cache
# one file per kernel specialisation, named by a key over the kernel's sources and the translator (KernelSources)
"$JAVA_HOME/bin/java" -cp "tornado-kernels/target/classes:$(ls .device/lib/{jna,slf4j-api}-*.jar | tr '\n' ':')" \
  dev.taco.kernels.cuda.KernelSources tornado-kernels/src/main/java .device/cuda dev.taco.kernels.gpu.TacoCudaSources
