package dev.taco.kernels.compiler;

import dev.taco.kernels.Fp8;
import java.util.Random;

/**
 * Deterministic test inputs for the semantics corpus: edge cases first (NaNs with payloads and signs, infinities,
 * signed zeros, subnormals, int/long limits, FP8 and bf16 range limits and rounding ties, shift counts 0..255 and
 * negative), then random values.
 */
final class TestValues {
  private TestValues() {}

  private static final float[] FLOATS = {0f, -0f, 1f, -1f, 0.5f, -0.5f, 1.5f, 2.5f, -2.5f, 0.49999997f, 127.5f,
      -128.5f, 32767.5f, Float.NaN, Float.intBitsToFloat(0xffc00000), Float.intBitsToFloat(0x7f800001),
      Float.intBitsToFloat(0xffbfffff), Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MAX_VALUE,
      -Float.MAX_VALUE, Float.MIN_VALUE, -Float.MIN_VALUE, Float.MIN_NORMAL, 448f, -448f, 449f, 464f, 465f, 480f,
      57344f, -57344f, 61439f, 61440f, 65536f, 0x1p31f, -0x1p31f, 2147483520f, 0x1p63f, -0x1p63f, 1e10f, -1e10f,
      1.00390625f, 1.01171875f, 3.3895314e38f, 3.3961776e38f, 0x1p-9f, 0x1p-10f, 0x1.8p-10f, 0x1p-16f, 0x1p-17f,
      0x1.8p-17f, 0x1p-126f, 0x1p-127f};
  private static final int[] INTS = {0, 1, -1, 2, -2, 31, 32, 33, 63, 64, 65, -31, -32, -33, Integer.MIN_VALUE,
      Integer.MAX_VALUE, Integer.MIN_VALUE + 1, Integer.MAX_VALUE - 1, 0x7F, 0x80, 0xFF, -128, 127, 128, 255, 256,
      1 << 30, -(1 << 30), 46341, -46341};
  private static final long[] LONGS = {0, 1, -1, Long.MIN_VALUE, Long.MAX_VALUE, Long.MIN_VALUE + 1, 1L << 32,
      -(1L << 32), 0xFFFFFFFFL, Integer.MIN_VALUE, Integer.MAX_VALUE, 3037000500L, -3037000500L};

  /** A fresh array of {@code n} values of {@code type} for parameter number {@code p} of kernel {@code seed}. */
  static Object array(Class<?> type, int n, int p, long seed) {
    Random rnd = new Random(seed * 31 + p);
    if (type == float.class) {
      float[] a = new float[n];
      for (int i = 0; i < n; i++) {
        a[i] = i < FLOATS.length ? FLOATS[(i + p) % FLOATS.length] : randomFloat(rnd, i);
      }
      return a;
    }
    if (type == double.class) {
      double[] a = new double[n];
      for (int i = 0; i < n; i++) {
        a[i] = i < FLOATS.length ? FLOATS[i] : i % 3 == 0 ? Double.longBitsToDouble(rnd.nextLong())
            : rnd.nextGaussian() * Math.pow(10, rnd.nextInt(21) - 10);
      }
      return a;
    }
    if (type == int.class) {
      int[] a = new int[n];
      for (int i = 0; i < n; i++) {
        a[i] = i < 256 ? (p % 2 == 0 ? i : 128 - i) : i < 256 + INTS.length ? INTS[i - 256]
            : i % 2 == 0 ? rnd.nextInt() : rnd.nextInt(201) - 100;
      }
      return a;
    }
    if (type == long.class) {
      long[] a = new long[n];
      for (int i = 0; i < n; i++) {
        a[i] = i < LONGS.length ? LONGS[(i + p) % LONGS.length]
            : i % 2 == 0 ? rnd.nextLong() : rnd.nextInt(2001) - 1000;
      }
      return a;
    }
    if (type == short.class) {
      short[] a = new short[n];
      for (int i = 0; i < n; i++) {
        a[i] = (short) rnd.nextInt();
      }
      return a;
    }
    if (type == byte.class) {
      byte[] a = new byte[n];
      for (int i = 0; i < n; i++) {
        a[i] = (byte) (i < 256 ? i : rnd.nextInt());
      }
      return a;
    }
    throw new IllegalArgumentException(type.toString());
  }

  /** Random bit patterns, log-uniform magnitudes over the FP8/bf16 ranges, and exact E4M3 rounding ties. */
  private static float randomFloat(Random rnd, int i) {
    return switch (i % 4) {
      case 0 -> Float.intBitsToFloat(rnd.nextInt());
      case 1 -> {
        int c = rnd.nextInt(0x7E);
        yield (Fp8.decodeE4M3((byte) c) + Fp8.decodeE4M3((byte) (c + 1))) / 2 * (rnd.nextBoolean() ? 1 : -1);
      }
      default -> (rnd.nextBoolean() ? 1 : -1) * (float) Math.pow(2, rnd.nextDouble() * 40 - 25);
    };
  }
}
