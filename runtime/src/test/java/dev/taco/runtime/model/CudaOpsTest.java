package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** What {@link CudaOps} refuses before it touches a device (runs on CI; the GPU behaviour is GptCudaGpuTest's). */
class CudaOpsTest {
  @Test
  void aTensorParallelGroupIsRefusedWithTheReasonBeforeAnyDeviceWork() {
    assertThatThrownBy(() -> new CudaOps(null, 2)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("TP = 1 only").hasMessageContaining("--tp 2");
  }
}
