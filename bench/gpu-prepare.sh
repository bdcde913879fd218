#!/usr/bin/env bash
# CPU-machine step before every GPU run (the GPU machine has CUDA, NCCL and NVRTC but no JDK): builds and installs the
# jars, makes the .device bundle (../shared/tools/device-bundle.sh: a jlink'd Java 25 and the jars), pre-translates
# every GPU kernel specialisation to CUDA C in .device/cuda/ (the bundle's runtime has no jdk.compiler; NVRTC compiles
# them there at first use), adds the test classes with the JUnit console launcher and AssertJ (.device/test/, for
# bench/gpu-tests.sh), and packs the JRE and the translated kernels (.device/jre.tar.xz, cuda.tar.xz), since the
# travelling tree must stay under 64 MiB.
#   bash bench/gpu-prepare.sh        then carry .device; on the GPU machine: source bench/gpu-env.sh
set -euo pipefail
cd "$(dirname "$0")/.."
JAVA_HOME=$(./taco build) # the JDK >= 25 that ./taco finds (JAVA_HOME if it is one)
export JAVA_HOME
export PATH="$JAVA_HOME/bin:$PATH"
export MAVEN_OPTS="${MAVEN_OPTS:---sun-misc-unsafe-memory-access=allow}"
# install, not package: device-bundle.sh's dependency:copy-dependencies resolves the sibling modules from ~/.m2
mvn -q -B -ntp -DskipTests install
rm -rf .device/jre.tar.xz
../shared/tools/device-bundle.sh
# this tree's own module jars, whatever other */target/*.jar device-bundle.sh's find met first
for m in tornado-kernels collective runtime bench; do cp -f "$m"/target/"$m"-*-SNAPSHOT.jar .device/lib/; done
# the GPU programs draw no plots: XChart's PDF/SVG/GIF exporters stay here
rm -f .device/lib/{pdfbox,pdfbox-io,fontbox,commons-math3,VectorGraphics2D,animated-gif-lib,graphics2d}-*.jar
rm -rf .device/cache .device/cuda .device/test .device/src
# one file per kernel specialisation, named by a key over the kernel's sources and the translator (KernelSources)
# (with the test corpus's kernels that GPU tests run: SimtCorpus's tensor-core tile)
"$JAVA_HOME/bin/java" -cp "tornado-kernels/target/classes:tornado-kernels/target/test-classes:collective/target/classes:runtime/target/classes:$(ls .device/lib/{jna,slf4j-api}-*.jar | tr '\n' ':')" \
  dev.taco.kernels.cuda.KernelSources tornado-kernels/src/main/java:runtime/src/main/java:tornado-kernels/src/test/java \
  .device/cuda dev.taco.kernels.gpu.TacoCudaSources dev.taco.kernels.gpu.TwoShotGpuKernels \
  dev.taco.kernels.gpu.GroupTwoShotKernels dev.taco.kernels.gpu.NcclFp8Kernels dev.taco.runtime.layers.LayerKernels \
  dev.taco.kernels.compiler.corpus.SimtCorpus
# the kernel sources the pre-translated files' keys were computed from, so that on the GPU machine the keys come out the
# same whatever the working tree travelling beside the bundle holds (bench/gpu-env.sh points TACO_KERNEL_SOURCES here)
mkdir -p .device/src
cp -r tornado-kernels/src/main/java .device/src/tornado-kernels
cp -r runtime/src/main/java .device/src/runtime
cp -r tornado-kernels/src/test/java .device/src/tornado-kernels-test
mkdir -p .device/test/lib
for m in tornado-kernels collective runtime bench; do
  [ -d "$m/target/test-classes" ] && cp -r "$m/target/test-classes" ".device/test/$m"
done
for a in org.junit.platform:junit-platform-console-standalone:1.14.4 org.assertj:assertj-core:3.27.7 \
         net.bytebuddy:byte-buddy:1.18.3; do
  mvn -q -B -ntp dependency:copy -Dartifact="$a" -DoutputDirectory="$PWD/.device/test/lib" >/dev/null
done
# the PyTorch baselines of the GPU benchmarks (../shared does not travel)
mkdir -p .device/torch && cp ../shared/tools/torch_gpt_step.py ../shared/tools/torch_tp_step.py .device/torch/
tar -C .device -cJf .device/jre.tar.xz jre
# the translated kernels are 9 MB of text (under 1 MB packed): the tracked tree and the bundle travel together
tar -C .device -cJf .device/cuda.tar.xz cuda
rm -rf .device/jre .device/cuda
tracked=$(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1)
echo "bundle: $(( ($(du -sb .device | cut -f1) + tracked) >> 20 )) MiB with the tracked tree (what travels must stay" \
  "under 64 MiB)"
