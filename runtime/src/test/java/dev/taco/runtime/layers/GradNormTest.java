package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.math.BigDecimal;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** {@link GradNorm}: the blocked sum against an exact one, the skip mask, and the order being fixed. */
class GradNormTest {
  @Test
  void matchesTheExactSumAndSkipsWhatIsMasked() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    System.out.println("GradNormTest seed " + seed);
    SplittableRandom rnd = new SplittableRandom(seed);
    for (int n : new int[] {0, 1, 7, GradNorm.PARTS - 1, GradNorm.PARTS, GradNorm.PARTS + 1, 100_003}) {
      int off = 5;
      float[] x = new float[off + n + 3];
      boolean[] skip = new boolean[2 + n];
      for (int i = 0; i < x.length; i++) {
        x[i] = (float) (rnd.nextGaussian() * Math.exp(rnd.nextGaussian() * 3));
      }
      BigDecimal all = BigDecimal.ZERO;
      BigDecimal kept = BigDecimal.ZERO;
      for (int i = 0; i < n; i++) {
        skip[2 + i] = rnd.nextInt(3) == 0;
        BigDecimal sq = new BigDecimal((double) x[off + i] * x[off + i]); // exact: a float's square fits a double
        all = all.add(sq);
        kept = skip[2 + i] ? kept : kept.add(sq);
      }
      String at = "seed " + seed + ", n " + n;
      double a = GradNorm.squaredNorm(x, off, null, 0, false, n);
      double k = GradNorm.squaredNorm(x, off, skip, 2, true, n);
      assertThat(Math.abs(a - all.doubleValue())).as(at).isLessThanOrEqualTo(1e-13 * all.doubleValue());
      assertThat(Math.abs(k - kept.doubleValue())).as(at).isLessThanOrEqualTo(1e-13 * kept.doubleValue());
      assertThat(GradNorm.squaredNorm(x, off, skip, 2, false, n)).as("%s: skip unused", at).isEqualTo(a);
    }
  }

  @Test
  void foldedPartialsKeepTheSum() {
    // the GPU's second level: n first-level partials folded into PARTS, strided and in order, the total unchanged
    SplittableRandom rnd = new SplittableRandom(11);
    for (int n : new int[] {GradNorm.PARTS, 3 * GradNorm.PARTS + 5, 1 << 20}) {
      double[] in = new double[2 + n];
      BigDecimal exact = BigDecimal.ZERO;
      for (int i = 0; i < n; i++) {
        in[2 + i] = rnd.nextDouble() * Math.exp(rnd.nextGaussian() * 4);
        exact = exact.add(new BigDecimal(in[2 + i]));
      }
      double[] out = new double[1 + GradNorm.PARTS];
      out[0] = Double.NaN; // not written
      GradNorm.foldPartials(out, 1, in, 2, n, GradNorm.PARTS);
      double s = 0;
      for (int p = 0; p < GradNorm.PARTS; p++) {
        double part = 0;
        for (int i = p; i < n; i += GradNorm.PARTS) {
          part += in[2 + i];
        }
        assertThat(out[1 + p]).as("n %d, part %d", n, p).isEqualTo(part);
        s += out[1 + p];
      }
      assertThat(out[0]).isNaN();
      assertThat(Math.abs(s - exact.doubleValue())).as("n %d", n).isLessThanOrEqualTo(1e-12 * exact.doubleValue());
    }
  }

  @Test
  void partialsAreStridedAndInOrder() {
    int n = 3 * GradNorm.PARTS + 2;
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = i % 7 - 3f;
    }
    double[] partial = new double[GradNorm.PARTS + 1];
    GradNorm.gradNormPartials(partial, 1, x, 0, null, 0, false, n, GradNorm.PARTS);
    for (int p = 0; p < GradNorm.PARTS; p++) {
      double s = 0;
      for (int i = p; i < n; i += GradNorm.PARTS) {
        s += (double) x[i] * x[i];
      }
      assertThat(partial[1 + p]).as("partial %d", p).isEqualTo(s);
    }
    assertThat(partial[0]).isZero();
  }

  @Test
  void rejectsBadArguments() {
    float[] x = new float[4];
    assertThatThrownBy(() -> GradNorm.squaredNorm(x, 1, null, 0, false, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("x");
    assertThatThrownBy(() -> GradNorm.squaredNorm(x, 0, null, 0, true, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("skip");
    assertThatThrownBy(() -> GradNorm.squaredNorm(x, 0, new boolean[3], 0, true, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("skip");
    assertThatThrownBy(() -> GradNorm.squaredNorm(x, 0, null, 0, false, -1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("n must be");
  }
}
