package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link GradNormLanes} gives the float64 bits of {@link GradNorm#squaredNorm} (the same partial sums in the same
 * order), with and without the skip flags, sizes around the lane count and {@link GradNorm#PARTS}, an offset, NaN and
 * Infinity, and one instance reused (its partials start at zero every call). {@code GradNormTest} holds the kernel
 * against an exact sum.
 */
class GradNormLanesTest {
  @Test
  void hasTheKernelsBits() {
    long seed = LanesAssert.seed("gradnorm lanes");
    SplittableRandom rnd = new SplittableRandom(seed);
    GradNormLanes lanes = new GradNormLanes();
    for (int n : new int[] {0, 1, 7, 8, 9, 17, GradNorm.PARTS - 1, GradNorm.PARTS, GradNorm.PARTS + 3, 100_003}) {
      int off = 5;
      float[] x = new float[off + n + 3];
      boolean[] skip = new boolean[2 + n];
      for (int i = 0; i < x.length; i++) x[i] = (float) (rnd.nextGaussian() * Math.exp(rnd.nextGaussian() * 3));
      for (int i = 0; i < n; i++) skip[2 + i] = rnd.nextInt(3) == 0;
      String at = "seed " + seed + ", n " + n;
      for (boolean useSkip : new boolean[] {false, true}) {
        assertThat(Double.doubleToLongBits(lanes.squaredNorm(x, off, skip, 2, useSkip, n))).as(at)
            .isEqualTo(Double.doubleToLongBits(GradNorm.squaredNorm(x, off, skip, 2, useSkip, n)));
      }
      if (n > 10) {
        x[off + n / 2] = Float.POSITIVE_INFINITY;
        assertThat(lanes.squaredNorm(x, off, null, 0, false, n)).isInfinite();
        x[off + n / 3] = Float.NaN;
        assertThat(lanes.squaredNorm(x, off, null, 0, false, n)).isNaN();
        skip[2 + n / 3] = true;
        skip[2 + n / 2] = true;
        assertThat(lanes.squaredNorm(x, off, skip, 2, true, n)).as("skipped NaN and Infinity")
            .isEqualTo(GradNorm.squaredNorm(x, off, skip, 2, true, n)).isFinite();
      }
    }
  }

  @Test
  void checksItsArguments() {
    GradNormLanes lanes = new GradNormLanes();
    assertThatThrownBy(() -> lanes.squaredNorm(new float[4], 0, new boolean[3], 0, true, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("skip");
  }
}
