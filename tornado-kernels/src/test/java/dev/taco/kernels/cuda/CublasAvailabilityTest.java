package dev.taco.kernels.cuda;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** {@link Cublas#available()} and {@link CublasLt#available()} never throw and always explain themselves. */
class CublasAvailabilityTest {
  @Test
  void cublasProbeGivesAReason() {
    boolean ok = Cublas.available();
    String reason = Cublas.unavailableReason();
    System.out.println("cuBLAS: " + reason);
    if (ok) {
      assertThat(reason).startsWith("cuBLAS ").contains(" available (");
    } else {
      // every name tried is listed, the override first when one is set
      assertThat(reason).startsWith("libcublas not loadable (").contains("libcublas.so.13: ")
          .contains("libcublas.so.12: ").contains("cublas: ");
    }
    assertThat(Cublas.available()).isEqualTo(ok);
    assertThat(Cublas.unavailableReason()).isEqualTo(reason);
  }

  @Test
  void cublasLtProbeGivesAReason() {
    boolean ok = CublasLt.available();
    String reason = CublasLt.unavailableReason();
    System.out.println("cuBLASLt: " + reason);
    if (ok) {
      assertThat(reason).startsWith("cuBLASLt ").contains(" available (");
    } else {
      assertThat(reason).startsWith("libcublasLt not loadable (").contains("libcublasLt.so.13: ");
    }
    assertThat(CublasLt.available()).isEqualTo(ok);
  }
}
