package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import org.junit.jupiter.api.Test;

/** Cuda.available() never throws and always explains itself. */
class CudaAvailabilityTest {
  @Test
  void probeGivesAReason() {
    boolean ok = Cuda.available();
    assertThat(Cuda.unavailableReason()).isNotBlank();
    if (ok) {
      assertThat(Cuda.deviceCount()).isPositive();
      assertThat(Cuda.unavailableReason()).startsWith("CUDA available");
    } else {
      assertThat(Cuda.deviceCount()).isZero();
    }
    assertThat(Cuda.available()).isEqualTo(ok); // memoised
  }

  @Test
  void withoutGpuOpeningAContextFailsClearly() {
    assumeFalse(Cuda.available(), "a GPU is present");
    assertThatThrownBy(() -> CudaContext.open(0)).isInstanceOfAny(UnsatisfiedLinkError.class, CudaException.class);
  }
}
