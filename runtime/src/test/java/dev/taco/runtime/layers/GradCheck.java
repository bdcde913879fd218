package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import java.util.function.DoubleSupplier;

/**
 * Finite-difference gradient checker. The objective L (a scalar, evaluated in double from the float32
 * forward pass) is perturbed one element at a time by ±h; the central difference
 * (L(x+h) − L(x−h)) / (2h) is compared with the analytic gradient.
 *
 * <p>Error per element: |a − n| / max(|a|, |n|, floor) with floor = FLOOR_FRACTION · max|a| over the
 * checked tensor, so that elements whose true gradient is ~0 are judged against the tensor's scale
 * rather than against float32 round-off in L (about 1e-7 · |L| / h). A sign flip gives an error of 2,
 * a missing term typically 0.1–1, so a tolerance of 1e-2 separates them from the FD noise (~1e-4).
 */
final class GradCheck {
  private GradCheck() {}

  static final double H = 1e-2;
  static final double TOL = 1e-2;
  static final double FLOOR_FRACTION = 1e-2;

  record Result(String name, int checked, double maxErr, int worst, double analytic, double numeric) {
    @Override
    public String toString() {
      return String.format("%s: %d checked, max err %.3g at [%d] (analytic %.6g, numeric %.6g)",
          name, checked, maxErr, worst, analytic, numeric);
    }
  }

  /**
   * Compares {@code analytic[OFF + i]} with the central difference of {@code loss} in
   * {@code x[OFF + i]}, for all n elements or, when n &gt; samples, a random sample of them.
   * {@code x} is restored afterwards.
   */
  static Result compare(String name, float[] x, float[] analytic, int n, DoubleSupplier loss,
      int samples, long seed) {
    int off = Bufs.OFF;
    double scale = 0;
    for (int i = 0; i < n; i++) {
      scale = Math.max(scale, Math.abs(analytic[off + i]));
    }
    double floor = Math.max(FLOOR_FRACTION * scale, 1e-6);
    int[] idx = pick(n, samples, new Random(seed));
    double maxErr = -1;
    int worst = -1;
    double wa = 0;
    double wn = 0;
    for (int i : idx) {
      float x0 = x[off + i];
      float xp = (float) (x0 + H);
      float xm = (float) (x0 - H);
      x[off + i] = xp;
      double lp = loss.getAsDouble();
      x[off + i] = xm;
      double lm = loss.getAsDouble();
      x[off + i] = x0;
      double num = (lp - lm) / ((double) xp - (double) xm); // the steps actually taken in float
      double a = analytic[off + i];
      double err = Math.abs(a - num) / Math.max(Math.max(Math.abs(a), Math.abs(num)), floor);
      // a NaN error (NaN gradient or loss) is the worst there is, and stays so: NaN never passes
      if (Double.isNaN(err) ? !Double.isNaN(maxErr) : err > maxErr) {
        maxErr = err;
        worst = i;
        wa = a;
        wn = num;
      }
    }
    return new Result(name, idx.length, maxErr, worst, wa, wn);
  }

  static void check(String name, float[] x, float[] analytic, int n, DoubleSupplier loss, int samples, long seed) {
    Result r = compare(name, x, analytic, n, loss, samples, seed);
    System.out.println("gradcheck " + r);
    assertThat(r.maxErr()).as(r.toString()).isLessThan(TOL);
  }

  static void check(String name, float[] x, float[] analytic, int n, DoubleSupplier loss) {
    check(name, x, analytic, n, loss, Integer.MAX_VALUE, 1);
  }

  private static int[] pick(int n, int samples, Random rnd) {
    if (n <= samples) {
      int[] all = new int[n];
      for (int i = 0; i < n; i++) {
        all[i] = i;
      }
      return all;
    }
    int[] perm = new int[n];
    for (int i = 0; i < n; i++) {
      perm[i] = i;
    }
    for (int i = 0; i < samples; i++) { // partial Fisher–Yates
      int j = i + rnd.nextInt(n - i);
      int t = perm[i];
      perm[i] = perm[j];
      perm[j] = t;
    }
    return java.util.Arrays.copyOf(perm, samples);
  }

  /**
   * Asserts that {@code backward} adds to the gradient buffers rather than overwriting them: the
   * result from pre-filled buffers equals the pre-fill plus the result from zeroed buffers.
   * Each grads[j] holds ns[j] values at {@link Bufs#OFF}.
   */
  static void assertAccumulates(Runnable backward, float[][] grads, int[] ns) {
    float[][] fresh = new float[grads.length][];
    for (int j = 0; j < grads.length; j++) {
      Bufs.zero(grads[j], ns[j]);
    }
    backward.run();
    for (int j = 0; j < grads.length; j++) {
      fresh[j] = grads[j].clone();
    }
    Random rnd = new Random(99);
    float[][] base = new float[grads.length][];
    for (int j = 0; j < grads.length; j++) {
      for (int i = 0; i < ns[j]; i++) {
        grads[j][Bufs.OFF + i] = (float) rnd.nextGaussian();
      }
      base[j] = grads[j].clone();
    }
    backward.run();
    for (int j = 0; j < grads.length; j++) {
      for (int i = 0; i < ns[j]; i++) {
        int k = Bufs.OFF + i;
        double expected = (double) base[j][k] + fresh[j][k];
        assertThat((double) grads[j][k]).as("grads[%d][%d]", j, i)
            .isCloseTo(expected, org.assertj.core.data.Offset.offset(1e-5 * (1 + Math.abs(expected))));
      }
      Bufs.assertPadsIntact("grads[" + j + "]", grads[j], ns[j]);
    }
  }
}
