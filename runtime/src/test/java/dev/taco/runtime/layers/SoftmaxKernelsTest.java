package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * {@link Attention#softmaxForward} and {@link Attention#softmaxBackward}, the fused causal scale–mask–softmax pair
 * of the GPU attention path, against a float64 reference on fresh random shapes and inputs (the seed is printed and
 * in every message): within {@link #TOL} relative (forward: to the row's largest probability; backward: to the
 * magnitude of the terms, see {@link #backwardMagnitude}); the masked half exactly 0 and never read (it holds NaN);
 * in place (output aliasing input, as the CPU attention path runs them) gives the same bits as out of place.
 */
class SoftmaxKernelsTest {
  static final double TOL = 1e-6;
  static final int CASES = 40;

  /** One random case: sizes, scale, and NaN everywhere the kernels must not read. */
  record Case(int b, int nh, int t, float scale, float[] preatt, float[] dprobs) {
    int rows() {
      return b * nh * t;
    }

    int n() {
      return rows() * t;
    }
  }

  static Case randomCase(SplittableRandom rnd) {
    int b = 1 + rnd.nextInt(3);
    int nh = 1 + rnd.nextInt(4);
    int t = 1 + rnd.nextInt(64);
    int hs = 8 << rnd.nextInt(5); // 8 .. 128
    float scale = Attention.scale(hs);
    double spread = 0.5 + 2.5 * rnd.nextDouble(); // std of the scaled scores
    float[] preatt = causal(b * nh * t, t, rnd, spread / scale);
    float[] dprobs = causal(b * nh * t, t, rnd, 1.0);
    return new Case(b, nh, t, scale, preatt, dprobs);
  }

  /** (rows,T) at {@link Bufs#OFF}: N(0, std²) where t2 &lt;= t, NaN above the diagonal and in the pads. */
  static float[] causal(int rows, int t, SplittableRandom rnd, double std) {
    float[] a = new float[OFF + rows * t + Bufs.TAIL];
    Arrays.fill(a, Float.NaN);
    for (int row = 0; row < rows; row++) {
      for (int t2 = 0; t2 <= row % t; t2++) {
        a[OFF + row * t + t2] = (float) (rnd.nextGaussian() * std);
      }
    }
    return a;
  }

  static double[] referenceForward(Case c) {
    double[] p = new double[c.n()];
    for (int row = 0; row < c.rows(); row++) {
      int tq = row % c.t();
      double max = Double.NEGATIVE_INFINITY;
      for (int t2 = 0; t2 <= tq; t2++) {
        max = Math.max(max, (double) c.preatt()[OFF + row * c.t() + t2] * c.scale());
      }
      double sum = 0;
      for (int t2 = 0; t2 <= tq; t2++) {
        p[row * c.t() + t2] = Math.exp((double) c.preatt()[OFF + row * c.t() + t2] * c.scale() - max);
        sum += p[row * c.t() + t2];
      }
      for (int t2 = 0; t2 <= tq; t2++) {
        p[row * c.t() + t2] /= sum;
      }
    }
    return p;
  }

  /** From the float probs the kernel is given: dpreatt = scale · p · (dp − Σ p·dp). */
  static double[] referenceBackward(Case c, float[] probs) {
    double[] d = new double[c.n()];
    for (int row = 0; row < c.rows(); row++) {
      int tq = row % c.t();
      double dot = 0;
      for (int t2 = 0; t2 <= tq; t2++) {
        dot += (double) probs[OFF + row * c.t() + t2] * c.dprobs()[OFF + row * c.t() + t2];
      }
      for (int t2 = 0; t2 <= tq; t2++) {
        int i = row * c.t() + t2;
        d[i] = (double) c.scale() * probs[OFF + i] * (c.dprobs()[OFF + i] - dot);
      }
    }
    return d;
  }

  /**
   * Largest of |got − ref| / bound over the causal half, where {@code bound[i]} is the magnitude the result is
   * relative to; the masked half must be exactly 0.
   */
  static double maxRelativeError(String what, Case c, float[] got, double[] ref, double[] bound, String at) {
    double worst = 0;
    for (int row = 0; row < c.rows(); row++) {
      int tq = row % c.t();
      for (int t2 = 0; t2 <= tq; t2++) {
        int i = row * c.t() + t2;
        assertThat(Float.isFinite(got[OFF + i])).as("%s %s row %d [%d] finite", at, what, row, t2).isTrue();
        double err = Math.abs(got[OFF + i] - ref[i]);
        worst = Math.max(worst, err == 0 ? 0 : err / bound[i]);
      }
      for (int t2 = tq + 1; t2 < c.t(); t2++) {
        assertThat(got[OFF + row * c.t() + t2]).as("%s %s row %d masked [%d]", at, what, row, t2).isEqualTo(0f);
      }
    }
    return worst;
  }

  /**
   * The forward's magnitude: each row's largest probability. Element by element, a probability far below it (score
   * x below the row maximum) carries the float32 rounding of the scaled score, a relative error of about |x|·2^-24,
   * which the test prints but does not bound.
   */
  static double[] rowMax(Case c, double[] p) {
    double[] m = new double[c.n()];
    for (int row = 0; row < c.rows(); row++) {
      double max = 0;
      for (int t2 = 0; t2 <= row % c.t(); t2++) {
        max = Math.max(max, p[row * c.t() + t2]);
      }
      Arrays.fill(m, row * c.t(), (row + 1) * c.t(), max);
    }
    return m;
  }

  /**
   * The magnitude of the backward's terms, {@code scale · p · (|dp| + Σ p·|dp|)}: dpreatt is a difference
   * {@code dp − Σ p·dp} that cancels where a row's probability sits on one key, so its error is relative to what was
   * subtracted (the condition of the operation), not to the result.
   */
  static double[] backwardMagnitude(Case c, float[] probs) {
    double[] m = new double[c.n()];
    for (int row = 0; row < c.rows(); row++) {
      int tq = row % c.t();
      double dot = 0;
      for (int t2 = 0; t2 <= tq; t2++) {
        dot += Math.abs((double) probs[OFF + row * c.t() + t2] * c.dprobs()[OFF + row * c.t() + t2]);
      }
      for (int t2 = 0; t2 <= tq; t2++) {
        int i = row * c.t() + t2;
        m[i] = (double) c.scale() * probs[OFF + i] * (Math.abs(c.dprobs()[OFF + i]) + dot);
      }
    }
    return m;
  }

  @Test
  void forwardAndBackwardMatchFloat64() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    String tag = "seed " + seed + ":";
    System.out.println("SoftmaxKernelsTest " + tag.replace(":", ""));
    SplittableRandom rnd = new SplittableRandom(seed);
    double worstFwd = 0;
    double worstBwd = 0;
    double worstElementwise = 0;
    for (int k = 0; k < CASES; k++) {
      Case c = randomCase(rnd);
      String at = tag + " case " + k + " " + c.b() + "x" + c.nh() + "x" + c.t() + "x" + c.t();

      float[] probs = Bufs.output(c.n());
      Attention.softmaxForward(probs, OFF, c.preatt(), OFF, c.b(), c.nh(), c.t(), c.scale());
      Bufs.assertPadsIntact("probs", probs, c.n());
      double[] pRef = referenceForward(c);
      double fwd = maxRelativeError("probs", c, probs, pRef, rowMax(c, pRef), at);
      worstElementwise = Math.max(worstElementwise, maxRelativeError("probs", c, probs, pRef, pRef, at));
      assertThat(fwd).as("%s forward relative error", at).isLessThanOrEqualTo(TOL);

      float[] dpre = Bufs.output(c.n());
      Attention.softmaxBackward(dpre, OFF, c.dprobs(), OFF, probs, OFF, c.b(), c.nh(), c.t(), c.scale());
      Bufs.assertPadsIntact("dpreatt", dpre, c.n());
      double bwd = maxRelativeError("dpreatt", c, dpre, referenceBackward(c, probs), backwardMagnitude(c, probs), at);
      assertThat(bwd).as("%s backward relative error", at).isLessThanOrEqualTo(TOL);

      // in place, as the CPU attention path runs them
      float[] inPlace = c.preatt().clone();
      Attention.softmaxForward(inPlace, OFF, inPlace, OFF, c.b(), c.nh(), c.t(), c.scale());
      assertThat(Arrays.copyOfRange(inPlace, OFF, OFF + c.n())).as("%s forward in place", at)
          .containsExactly(Arrays.copyOfRange(probs, OFF, OFF + c.n()));
      inPlace = c.dprobs().clone();
      Attention.softmaxBackward(inPlace, OFF, inPlace, OFF, probs, OFF, c.b(), c.nh(), c.t(), c.scale());
      assertThat(Arrays.copyOfRange(inPlace, OFF, OFF + c.n())).as("%s backward in place", at)
          .containsExactly(Arrays.copyOfRange(dpre, OFF, OFF + c.n()));
      worstFwd = Math.max(worstFwd, fwd);
      worstBwd = Math.max(worstBwd, bwd);
    }
    System.out.printf("SoftmaxKernelsTest %s worst relative error: forward %.2e (element by element %.2e), "
        + "backward %.2e; tolerance %.0e%n", tag, worstFwd, worstElementwise, worstBwd, TOL);
  }
}
