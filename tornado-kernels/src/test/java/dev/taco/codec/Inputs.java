package dev.taco.codec;

import java.util.SplittableRandom;

/** Test tensors: Gaussian, heavy-tailed with outliers, and groups spanning a huge dynamic range. */
final class Inputs {
  private Inputs() {}

  static float[] gaussian(long seed, int n) {
    SplittableRandom r = new SplittableRandom(seed);
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      x[i] = (float) r.nextGaussian();
    }
    return x;
  }

  /** Laplace(0, 1) with 0.1 % outliers of magnitude 100..1000 (activation-like). */
  static float[] heavyTailed(long seed, int n) {
    SplittableRandom r = new SplittableRandom(seed);
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      double u = r.nextDouble() - 0.5;
      double v = -Math.signum(u) * Math.log(1 - 2 * Math.abs(u));
      if (r.nextDouble() < 1e-3) {
        v = Math.copySign(100 + 900 * r.nextDouble(), v);
      }
      x[i] = (float) v;
    }
    return x;
  }

  /** Gaussian values, each run of {@code g} along a row scaled by 2^e, e uniform in [-span, span]. */
  static float[] wideGroups(long seed, int rows, int cols, int g, int span) {
    SplittableRandom r = new SplittableRandom(seed);
    float[] x = new float[rows * cols];
    for (int row = 0; row < rows; row++) {
      for (int c0 = 0; c0 < cols; c0 += g) {
        int e = r.nextInt(-span, span + 1);
        for (int c = c0; c < Math.min(cols, c0 + g); c++) {
          x[row * cols + c] = Math.scalb((float) r.nextGaussian(), e);
        }
      }
    }
    return x;
  }

  /** Largest relative L2 error over the groups of {@code g} along each row (float64). */
  static double worstGroupRelErr(float[] x, float[] y, int rows, int cols, int g) {
    double worst = 0;
    for (int row = 0; row < rows; row++) {
      for (int c0 = 0; c0 < cols; c0 += g) {
        double xx = 0;
        double ee = 0;
        for (int c = c0; c < Math.min(cols, c0 + g); c++) {
          double a = x[row * cols + c];
          double d = y[row * cols + c] - a;
          xx += a * a;
          ee += d * d;
        }
        if (xx > 0) {
          worst = Math.max(worst, Math.sqrt(ee / xx));
        }
      }
    }
    return worst;
  }

  /** Gaussian rows with 1 % of the columns (outlier channels, as in LLM activations) scaled by 50. */
  static float[] outlierChannels(long seed, int rows, int cols) {
    float[] x = gaussian(seed, rows * cols);
    SplittableRandom r = new SplittableRandom(seed + 1);
    for (int k = 0; k < Math.max(1, cols / 100); k++) {
      int c = r.nextInt(cols);
      for (int row = 0; row < rows; row++) {
        x[row * cols + c] *= 50;
      }
    }
    return x;
  }
}
