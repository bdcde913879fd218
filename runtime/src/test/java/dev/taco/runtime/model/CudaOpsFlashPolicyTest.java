package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/**
 * When the GPU backend takes flash attention (a CPU test: the decision is host logic): bf16 mode, a head size the
 * kernels are compiled for, and bf16 tensor cores (sm_80+); otherwise the GEMM form, whose (B,NH,T,T) state the
 * activation arena must then hold.
 */
class CudaOpsFlashPolicyTest {
  @Test
  void flashOnlyInBf16ForCompiledHeadSizesOnSm80AndLater() {
    for (int hs : new int[] {16, 32, 48, 64}) {
      assertThat(CudaOps.flashAttention(CudaOps.Precision.BF16, hs, 9)).as("HS %d on sm_90", hs).isTrue();
      assertThat(CudaOps.flashAttention(CudaOps.Precision.BF16, hs, 8)).as("HS %d on sm_80", hs).isTrue();
      assertThat(CudaOps.flashAttention(CudaOps.Precision.BF16, hs, 7)).as("HS %d on sm_75: no bf16 mma", hs).isFalse();
      assertThat(CudaOps.flashAttention(CudaOps.Precision.FP32, hs, 9)).as("fp32 mode, HS %d", hs).isFalse();
    }
    for (int hs : new int[] {8, 24, 80, 96, 128}) {
      assertThat(CudaOps.flashAttention(CudaOps.Precision.BF16, hs, 9)).as("HS %d is not compiled", hs).isFalse();
    }
  }
}
