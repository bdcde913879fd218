package dev.taco.runtime.layers;

/**
 * Argument checks run once by each layer's host wrapper ({@code forward}, {@code backward}), before it calls its
 * kernels. They are host code: the kernels never call them (the translator rejects any statement before a kernel's
 * {@code @Parallel} loop other than a local declaration, and has no strings or exceptions on the GPU). Every failure is
 * an {@link IllegalArgumentException} that names the offending argument, so a caller wiring buffers by hand sees
 * which one is wrong.
 */
final class Check {
  private Check() {}

  /** {@code value > 0}. */
  static void positive(String name, int value) {
    if (value <= 0) {
      throw new IllegalArgumentException(name + " must be positive, got " + value);
    }
  }

  /** {@code array[off, off + len)} exists; {@code len} is a long so products of sizes cannot wrap. */
  static void span(String name, float[] array, int off, long len) {
    if (array == null) {
      throw new IllegalArgumentException(name + " is null");
    }
    spanOf(name, array.length, off, len);
  }

  /** As {@link #span(String, float[], int, long)} for int arrays (token ids). */
  static void span(String name, int[] array, int off, long len) {
    if (array == null) {
      throw new IllegalArgumentException(name + " is null");
    }
    spanOf(name, array.length, off, len);
  }

  private static void spanOf(String name, int length, int off, long len) {
    if (off < 0) {
      throw new IllegalArgumentException(name + " offset must be >= 0, got " + off);
    }
    if (len > Integer.MAX_VALUE || off + len > length) {
      throw new IllegalArgumentException(name + " needs " + len + " elements from offset " + off
          + " but has length " + length);
    }
  }

  /** Every id in {@code ids[off, off + n)} lies in {@code [0, bound)}. Call after {@link #span}. */
  static void ids(String name, int[] ids, int off, int n, int bound) {
    for (int i = 0; i < n; i++) {
      int id = ids[off + i];
      if (id < 0 || id >= bound) {
        throw new IllegalArgumentException(name + "[" + i + "] = " + id + " is outside [0, " + bound + ")");
      }
    }
  }

  /** The product of sizes as a long, so that {@link #span} sees the true length even past 2^31. */
  static long n(int a, int b) {
    return (long) a * b;
  }

  static long n(int a, int b, int c) {
    return (long) a * b * c;
  }

  static long n(int a, int b, int c, int d) {
    return (long) a * b * c * d;
  }
}
