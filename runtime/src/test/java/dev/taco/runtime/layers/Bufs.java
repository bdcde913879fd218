package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.Random;

/**
 * Test buffers placed at a non-zero offset inside a larger array, so every test also exercises the
 * offset arithmetic. Input pads are NaN (a read outside the span poisons the result); output and
 * gradient pads hold a sentinel that {@link #assertPadsIntact} checks (a write outside the span is seen).
 */
final class Bufs {
  private Bufs() {}

  static final int OFF = 3;
  static final int TAIL = 2;
  static final float SENTINEL = 12345.0f;

  /** An input of n values ~ N(0, scale^2) at {@link #OFF}, NaN pads. */
  static float[] input(int n, Random rnd, double scale) {
    float[] a = new float[OFF + n + TAIL];
    Arrays.fill(a, Float.NaN);
    for (int i = 0; i < n; i++) {
      a[OFF + i] = (float) (rnd.nextGaussian() * scale);
    }
    return a;
  }

  /**
   * Asserts that the float32 result {@code got} is finite and within {@code tol · scale} of the float64 reference
   * {@code ref}, where {@code scale} is the sum of the magnitudes of the terms that {@code ref} adds up: the error of a
   * float32 sum grows with that, not with |ref| (which cancellation can make arbitrarily small).
   */
  static void assertNear(String what, double got, double ref, double scale, double tol) {
    assertThat(got).as("%s is finite", what).isFinite();
    assertThat(Math.abs(got - ref)).as("%s: got %s, float64 %s, terms' magnitude %s", what, got, ref, scale)
        .isLessThanOrEqualTo(tol * scale);
  }

  /** An output or gradient buffer of n zeros at {@link #OFF}, sentinel pads. */
  static float[] output(int n) {
    float[] a = new float[OFF + n + TAIL];
    Arrays.fill(a, SENTINEL);
    Arrays.fill(a, OFF, OFF + n, 0f);
    return a;
  }

  static int[] tokens(int n, Random rnd, int v) {
    int[] a = new int[OFF + n + TAIL];
    Arrays.fill(a, -1);
    for (int i = 0; i < n; i++) {
      a[OFF + i] = rnd.nextInt(v);
    }
    return a;
  }

  static void zero(float[] a, int n) {
    Arrays.fill(a, OFF, OFF + n, 0f);
  }

  static void assertPadsIntact(String name, float[] a, int n) {
    for (int i = 0; i < OFF; i++) {
      assertThat(a[i]).as("%s front pad [%d]", name, i).isEqualTo(SENTINEL);
    }
    for (int i = OFF + n; i < a.length; i++) {
      assertThat(a[i]).as("%s tail pad [%d]", name, i).isEqualTo(SENTINEL);
    }
  }

  /** Random weights R for the test objective L = sum(out * R), as doubles and as the float dout. */
  static double[] weights(int n, Random rnd) {
    double[] r = new double[n];
    for (int i = 0; i < n; i++) {
      r[i] = rnd.nextGaussian();
    }
    return r;
  }

  static float[] asDout(double[] r) {
    float[] a = output(r.length);
    for (int i = 0; i < r.length; i++) {
      a[OFF + i] = (float) r[i];
    }
    return a;
  }

  /** sum(out[OFF + i] * r[i]) in double. */
  static double dot(float[] out, double[] r) {
    double s = 0;
    for (int i = 0; i < r.length; i++) {
      s += out[OFF + i] * r[i];
    }
    return s;
  }

  static double[] toDouble(float[] a, int n) {
    double[] d = new double[n];
    for (int i = 0; i < n; i++) {
      d[i] = a[OFF + i];
    }
    return d;
  }
}
