# Sourced on the GPU machine from the project root (bash): unpacks the JRE bench/gpu-prepare.sh packed, then sets up
# the environment of ../shared/tools/device-bundle.sh (NCCL_NVLS_ENABLE=0 among it) and the PTX cache and kernel
# directories inside .device.
[ -x .device/jre/bin/java ] || tar -C .device -xJf .device/jre.tar.xz || return 2
# shellcheck disable=SC1091
source .device/env.sh
export TACO_CACHE="${TACO_CACHE:-$PWD/.device/cache}" TACO_CUDA_DIR="$PWD/.device/cuda"
# the JUnit console launcher does not expand "dir/*": list every jar
TEST_CP="$(ls -d "$PWD"/.device/test/*/ | grep -v /lib/$ | tr '\n' ':')$(ls "$PWD"/.device/test/lib/*.jar "$PWD"/.device/lib/*.jar | grep -v console-standalone | tr '\n' ':')"
export TEST_CP
