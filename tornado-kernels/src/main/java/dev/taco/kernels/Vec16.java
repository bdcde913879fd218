package dev.taco.kernels;

/**
 * 16- and 8-byte vector memory accesses for kernels (docs/design.md §5: "the compiler must ... emit vector loads"; the
 * warp-per-group shape of {@code shared/reference/fused_shapes.cu} loads 8 bf16 values per lane in one 128-bit
 * load). On the JVM these are plain element loops; the kernel compiler maps each to one vector access
 * ({@code uint4}/{@code float4}/{@code long long}, CUDA C++ Programming Guide, "Built-in Vector Types" and
 * "Device Memory Accesses": 16-byte accesses must be 16-byte aligned).
 *
 * <p>Alignment contract (checked here, so a kernel that passes on the JVM is aligned on the GPU as long as the
 * array's base is: device allocations are 256-byte aligned, and the kernel compiler declares shared arrays 16-byte
 * aligned): the element index must be a multiple of the vector
 * length. Otherwise {@link IllegalArgumentException}. {@code v} must have at least the vector length elements.
 */
public final class Vec16 {
  private Vec16() {}

  /** {@code v[k] = Bf16.decode(a[i + k])} for k in 0..7; one 16-byte load. {@code i % 8 == 0}. */
  public static void loadBf16x8(short[] a, int i, float[] v) {
    aligned(i, 8);
    for (int k = 0; k < 8; k++) {
      v[k] = Bf16.decode(a[i + k]);
    }
  }

  /** {@code v[k] = a[i + k]} for k in 0..3; one 16-byte load. {@code i % 4 == 0}. */
  public static void loadFloat4(float[] a, int i, float[] v) {
    aligned(i, 4);
    for (int k = 0; k < 4; k++) {
      v[k] = a[i + k];
    }
  }

  /** {@code a[i + k] = v[k]} for k in 0..3; one 16-byte store. {@code i % 4 == 0}. */
  public static void storeFloat4(float[] a, int i, float[] v) {
    aligned(i, 4);
    for (int k = 0; k < 4; k++) {
      a[i + k] = v[k];
    }
  }

  /** {@code a[i + k] = (byte) (w >>> 8k)} for k in 0..7 (little-endian); one 8-byte store. {@code i % 8 == 0}. */
  public static void storeBytes8(byte[] a, int i, long w) {
    aligned(i, 8);
    for (int k = 0; k < 8; k++) {
      a[i + k] = (byte) (w >>> (8 * k));
    }
  }

  /** {@code (a[i] & 0xFF) | (a[i+1] & 0xFF) << 8 | ... | a[i+7] << 56} (little-endian); one 8-byte load. {@code i % 8 == 0}. */
  public static long loadBytes8(byte[] a, int i) {
    aligned(i, 8);
    long w = 0;
    for (int k = 0; k < 8; k++) {
      w |= (long) (a[i + k] & 0xFF) << (8 * k);
    }
    return w;
  }

  /**
   * {@code a[i + 2q] = (short) p_q}, {@code a[i + 2q + 1] = (short) (p_q >>> 16)} for q in 0..3 (four packed pairs, as
   * {@link Bf16#encode2} makes them); one 16-byte store. {@code i % 8 == 0}.
   */
  public static void storeShortPairs8(short[] a, int i, int p0, int p1, int p2, int p3) {
    aligned(i, 8);
    pair(a, i, p0);
    pair(a, i + 2, p1);
    pair(a, i + 4, p2);
    pair(a, i + 6, p3);
  }

  /**
   * {@code a[i + k] = Bf16.encode(v[k])} for k in 0..7: eight floats rounded to bf16 ({@link Bf16#encode2}, the
   * hardware's {@code cvt.rn.bf16x2} on the GPU) in one 16-byte store ({@link #storeShortPairs8}). {@code i % 8 == 0}.
   */
  public static void storeBf16x8(short[] a, int i, float[] v) {
    aligned(i, 8);
    storeShortPairs8(a, i, Bf16.encode2(v[0], v[1]), Bf16.encode2(v[2], v[3]), Bf16.encode2(v[4], v[5]),
        Bf16.encode2(v[6], v[7]));
  }

  /**
   * {@code v[at + q] = (a[i + 2q] & 0xFFFF) | a[i + 2q + 1] << 16} for q in 0..3: eight shorts as four packed pairs (as
   * {@link Bf16#encode2} packs them); one 16-byte load. {@code i % 8 == 0}.
   */
  public static void loadShortPairs8(short[] a, int i, int[] v, int at) {
    aligned(i, 8);
    for (int q = 0; q < 4; q++) {
      v[at + q] = loadShortPair(a, i + 2 * q);
    }
  }

  /** {@code (a[i] & 0xFFFF) | a[i + 1] << 16}: two shorts as one packed pair; one 4-byte load. {@code i % 2 == 0}. */
  public static int loadShortPair(short[] a, int i) {
    aligned(i, 2);
    return (a[i] & 0xFFFF) | a[i + 1] << 16;
  }

  /**
   * {@code a[i] = (short) p, a[i + 1] = (short) (p >>> 16)}: one packed pair (as {@link Bf16#encode2} packs it) as two
   * shorts; one 4-byte store. {@code i % 2 == 0}.
   */
  public static void storeShortPair(short[] a, int i, int p) {
    aligned(i, 2);
    a[i] = (short) p;
    a[i + 1] = (short) (p >>> 16);
  }

  /** {@code a[i + q] = v[at + q]} for q in 0..3; one 16-byte store (to global or shared memory). {@code i % 4 == 0}. */
  public static void storeInts4(int[] a, int i, int[] v, int at) {
    aligned(i, 4);
    for (int q = 0; q < 4; q++) {
      a[i + q] = v[at + q];
    }
  }

  private static void pair(short[] a, int i, int p) {
    a[i] = (short) p;
    a[i + 1] = (short) (p >>> 16);
  }

  private static void aligned(int i, int n) {
    if (i % n != 0) {
      throw new IllegalArgumentException("vector access at element " + i + " is not a multiple of " + n);
    }
  }
}
