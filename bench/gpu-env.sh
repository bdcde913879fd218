# Sourced on the GPU machine from the project root (bash): unpacks the JRE bench/gpu-prepare.sh packed, then sets up
# the environment of ../shared/tools/device-bundle.sh (NCCL_NVLS_ENABLE=0 among it) and the PTX cache, kernel and
# kernel-source directories inside .device.
# Unpacked beside and renamed into place, so that two scripts started together never run a half-written JRE (a JVM
# started on one died of SIGBUS on the H200 machine); the loser of the rename throws its copy away.
if [ ! -x .device/jre/bin/java ]; then
  _t=$(mktemp -d .device/jre-unpack.XXXXXX) && tar -C "$_t" -xJf .device/jre.tar.xz || return 2
  mv -T "$_t/jre" .device/jre 2>/dev/null || [ -x .device/jre/bin/java ] || return 2
  rm -rf "$_t"
fi
# shellcheck disable=SC1091
source .device/env.sh
export TACO_CACHE="${TACO_CACHE:-$PWD/.device/cache}" TACO_CUDA_DIR="$PWD/.device/cuda"
# the sources the bundle's kernels were translated from (not the working tree, which may have moved on since)
export TACO_KERNEL_SOURCES="$PWD/.device/src/tornado-kernels:$PWD/.device/src/runtime"
# the JUnit console launcher does not expand "dir/*": list every jar
TEST_CP="$(ls -d "$PWD"/.device/test/*/ | grep -v /lib/$ | tr '\n' ':')$(ls "$PWD"/.device/test/lib/*.jar "$PWD"/.device/lib/*.jar | grep -v console-standalone | tr '\n' ':')"
export TEST_CP
