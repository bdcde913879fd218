# Sourced on the GPU machine from the project root (bash): unpacks the JRE and the translated kernels that
# bench/gpu-prepare.sh packed, then sets up the environment of ../shared/tools/device-bundle.sh (NCCL_NVLS_ENABLE=0
# among it) and the PTX cache, kernel and kernel-source directories inside .device.
# Unpacked beside and renamed into place, so that two scripts started together never run a half-written JRE (a JVM
# started on one died of SIGBUS on the H200 machine); the loser of the rename throws its copy away. A folder already
# unpacked is taken as it is: gpu-prepare.sh removes both before it packs, so copy a new bundle over a clean .device.
_unpack() { # $1: the folder that .device/$1.tar.xz holds
  [ -d ".device/$1" ] && return 0
  local t
  t=$(mktemp -d ".device/$1-unpack.XXXXXX") && tar -C "$t" -xJf ".device/$1.tar.xz" || { rm -rf "$t"; return 2; }
  mv -T "$t/$1" ".device/$1" 2>/dev/null || [ -d ".device/$1" ] || { rm -rf "$t"; return 2; }
  rm -rf "$t"
}
_unpack jre && _unpack cuda || return 2
# shellcheck disable=SC1091
source .device/env.sh
export TACO_CACHE="${TACO_CACHE:-$PWD/.device/cache}" TACO_CUDA_DIR="$PWD/.device/cuda"
# the sources the bundle's kernels were translated from (not the working tree, which may have moved on since)
export TACO_KERNEL_SOURCES="$PWD/.device/src/tornado-kernels:$PWD/.device/src/runtime:$PWD/.device/src/tornado-kernels-test"
# the JUnit console launcher does not expand "dir/*": list every jar
TEST_CP="$(ls -d "$PWD"/.device/test/*/ | grep -v /lib/$ | tr '\n' ':')$(ls "$PWD"/.device/test/lib/*.jar "$PWD"/.device/lib/*.jar | grep -v console-standalone | tr '\n' ':')"
export TEST_CP
