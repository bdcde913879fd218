package dev.taco.kernels;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class HadamardTest {

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 4, 8, 32, 64, 128, 256})
  void matchesExplicitMatrixAndIsSelfInverse(int n) {
    SplittableRandom rnd = new SplittableRandom(n);
    int off = 3;
    float[] a = new float[n + 2 * off];
    for (int i = 0; i < a.length; i++) {
      a[i] = (float) rnd.nextGaussian();
    }
    float[] orig = a.clone();
    Hadamard.fwht(a, off, n);
    double norm = 0;
    for (int i = 0; i < n; i++) {
      norm += orig[off + i] * (double) orig[off + i];
    }
    double tol = 1e-6 * Math.sqrt(norm) * Math.log(2 * n);
    for (int i = 0; i < n; i++) {
      double want = 0;
      for (int j = 0; j < n; j++) {
        want += ((Integer.bitCount(i & j) & 1) == 0 ? 1 : -1) * (double) orig[off + j];
      }
      want /= Math.sqrt(n);
      assertThat((double) a[off + i]).isCloseTo(want, within(tol));
    }
    for (int i = 0; i < off; i++) {
      assertThat(a[i]).isEqualTo(orig[i]);
      assertThat(a[off + n + i]).isEqualTo(orig[off + n + i]);
    }
    Hadamard.fwht(a, off, n);
    for (int i = 0; i < n; i++) {
      assertThat((double) a[off + i]).isCloseTo(orig[off + i], within(2 * tol));
    }
  }
}
