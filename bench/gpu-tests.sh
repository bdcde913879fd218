#!/usr/bin/env bash
# The GPU tests (JUnit, @Tag("gpu"); they skip on CI) run for real on the GPU machine, without Maven, through the JUnit
# console launcher that bench/gpu-prepare.sh bundles:   bash bench/gpu-tests.sh [OUT_DIR] [--select-class NAME ...]
# Without selections: every GPU test class. Writes the JUnit XML report to OUT_DIR (default $OUT, else target/gpu-tests).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
# shellcheck disable=SC1091
source bench/gpu-env.sh || { echo "FAIL bundle: run bash bench/gpu-prepare.sh on the CPU machine" >&2; exit 2; }
out="${1:-${OUT:-target/gpu-tests}}"; shift || true
sel=("$@")
if [ ${#sel[@]} -eq 0 ]; then
  sel=(--select-class dev.taco.kernels.cuda.CudaGpuTest --select-class dev.taco.kernels.cuda.TaskGraphGpuTest
       --select-class dev.taco.kernels.cuda.CublasGpuTest --select-class dev.taco.kernels.cuda.TensorCoreGpuTest --select-class dev.taco.kernels.gpu.GroupTwoShotFp4GpuTest
       --select-class dev.taco.collective.nccl.NcclGpuTest --select-class dev.taco.collective.nccl.NcclProcessGpuTest
       --select-class dev.taco.collective.device.DeviceCollectivesGpuTest
       --select-class dev.taco.collective.device.EmulatedTransportGpuTest
       --select-class dev.taco.collective.device.NcclFp8GpuTest
       --select-class dev.taco.runtime.model.GptCudaGpuTest --select-class dev.taco.runtime.layers.FlashAttentionGpuTest
       --select-class dev.taco.runtime.cli.TacoCliGpuTest --select-class dev.taco.runtime.train.RunAgreementGpuTest)
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
exec java -Xss4m -Xmx48g -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -jar .device/test/lib/junit-platform-console-standalone-*.jar \
  execute --class-path "$TEST_CP" --include-tag gpu --details=tree --disable-banner --reports-dir "$out" "${sel[@]}"
