package dev.taco.runtime.layers;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.Parallel;

/**
 * The squared L2 norm of a gradient, for global-norm clipping (Pascanu et al., "On the difficulty of training
 * recurrent neural networks", 2013, §3.2; llm.c's {@code gpt2_update} clips the same way), summed in float64 with a
 * deterministic blocked reduction: {@link #PARTS} strided partial sums, then their sum in order.
 *
 * <p>Shapes: {@code x} is (n) float32; {@code skip} is (n) or unused. The order of the additions depends only on
 * {@code n} and {@link #PARTS}, never on threads or a launch shape, so a CPU and a GPU run sum the same terms in the
 * same order (partial p holds x[p], x[p + PARTS], x[p + 2·PARTS], ...: neighbouring GPU threads read neighbouring
 * elements).
 */
public final class GradNorm {
  private GradNorm() {}

  /** Number of partial sums: enough GPU threads to stream the array, few enough to add up on the host. */
  public static final int PARTS = 4096;

  /**
   * Sum of {@code (double) x[i]²} over {@code [0, n)} from {@code xOff}, leaving out the elements whose flag in
   * {@code skip} (from {@code skipOff}) is true when {@code useSkip}.
   *
   * @param skip may be null when {@code useSkip} is false
   * @throws IllegalArgumentException if {@code n} is negative or above 2^31 − 1 − PARTS, or a span does not fit its array
   */
  public static double squaredNorm(float[] x, int xOff, boolean[] skip, int skipOff, boolean useSkip, int n) {
    check(x, xOff, skip, skipOff, useSkip, n);
    double[] partial = new double[PARTS];
    gradNormPartials(partial, 0, x, xOff, skip, skipOff, useSkip, n, PARTS);
    return total(partial);
  }

  /** The checks of {@link #squaredNorm} (and of {@link GradNormLanes#squaredNorm}). */
  static void check(float[] x, int xOff, boolean[] skip, int skipOff, boolean useSkip, int n) {
    if (n < 0 || n > Integer.MAX_VALUE - PARTS) { // the strided index i + PARTS must not wrap
      throw new IllegalArgumentException("n must be in [0, " + (Integer.MAX_VALUE - PARTS) + "], got " + n);
    }
    Check.span("x", x, xOff, n);
    if (useSkip && (skip == null || skipOff < 0 || (long) skipOff + n > skip.length)) {
      throw new IllegalArgumentException("skip needs " + n + " flags from offset " + skipOff
          + (skip == null ? " but is null" : " but has length " + skip.length));
    }
  }

  /** The sum of the {@link #PARTS} partial sums, in order (the host's second level). */
  static double total(double[] partial) {
    double s = 0;
    for (int p = 0; p < PARTS; p++) {
      s += partial[p];
    }
    return s;
  }

  /**
   * Kernel: partial[p] = sum of {@code (double) x[i]²} over i = p, p + parts, p + 2·parts, ... &lt; n (in that order),
   * without the skipped elements; one iteration per partial sum. No checks.
   */
  @Kernel
  public static void gradNormPartials(double[] partial, int partialOff, float[] x, int xOff, boolean[] skip,
      int skipOff, boolean useSkip, int n, int parts) {
    for (@Parallel int p = 0; p < parts; p++) {
      double s = 0;
      for (int i = p; i < n; i += parts) {
        if (!useSkip || !skip[skipOff + i]) {
          s += (double) x[xOff + i] * x[xOff + i];
        }
      }
      partial[partialOff + p] = s;
    }
  }

  /**
   * Kernel: folds {@code n} partial sums into {@code parts}, {@code out[p] = Σ in[i]} over {@code i ≡ p (mod parts)}
   * in increasing i (the GPU backend's second level: many first-level partials keep enough loads in flight to read
   * the gradients at memory speed, and only {@code parts} come back to the host). No checks.
   */
  @Kernel
  public static void foldPartials(double[] out, int outOff, double[] in, int inOff, int n, int parts) {
    for (@Parallel int p = 0; p < parts; p++) {
      double s = 0;
      for (int i = p; i < n; i += parts) {
        s += in[inOff + i];
      }
      out[outOff + p] = s;
    }
  }
}
