package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The gradient checker itself: it passes a right gradient and fails a wrong one, a NaN one and a NaN loss. */
class GradCheckTest {
  @Test
  void passesTheRightGradientAndFailsWrongOrNaNOnes() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    SplittableRandom rng = new SplittableRandom(seed);
    int n = 16, off = Bufs.OFF;
    float[] x = new float[off + n], grad = new float[off + n];
    for (int i = 0; i < n; i++) x[off + i] = (float) rng.nextGaussian();
    // L = sum x^3 / 3, dL/dx = x^2
    java.util.function.DoubleSupplier loss = () -> {
      double l = 0;
      for (int i = 0; i < n; i++) l += Math.pow(x[off + i], 3) / 3;
      return l;
    };
    for (int i = 0; i < n; i++) grad[off + i] = x[off + i] * x[off + i];
    GradCheck.check("x^3/3, seed " + seed, x, grad, n, loss);

    float[] wrong = grad.clone();
    wrong[off + 5] = -wrong[off + 5] - 1f;
    assertThat(GradCheck.compare("sign", x, wrong, n, loss, n, 1).maxErr()).as("seed " + seed)
        .isGreaterThan(GradCheck.TOL);

    for (int at : new int[] {0, 7, n - 1}) {
      float[] nan = grad.clone();
      nan[off + at] = Float.NaN;
      GradCheck.Result r = GradCheck.compare("nan", x, nan, n, loss, n, 1);
      assertThat(r.maxErr()).as("NaN at " + at + ", seed " + seed).isNaN();
      assertThatThrownBy(() -> GradCheck.check("nan", x, nan, n, loss)).isInstanceOf(AssertionError.class);
    }
    assertThatThrownBy(() -> GradCheck.check("nan loss", x, grad, n, () -> Double.NaN))
        .isInstanceOf(AssertionError.class);
  }
}
