package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.MAX;

import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * The lane shapes the SIMD codec kernels share and the whole-array passes they all need: the first NaN/Inf of a float
 * array, the absmax of its (finite) values, an elementwise sum, a store-or-add. {@link #L} float lanes (the preferred
 * vector size, capped at 512 bits: 16 lanes with AVX-512, 8 with AVX2); FP8 and int8 codes travel as the same number
 * of byte lanes and are widened to int lanes for their arithmetic.
 *
 * <p><b>How the kernels of this package are written.</b> Every method is one pass: loops over arrays whose bodies
 * call the Vector API only, whole vectors first, then one masked vector for the tail. No vector is passed to or
 * returned from a method of ours: when C2 does not inline such a call (a large caller reaches its node budget, or the
 * callee was compiled on its own first) the vector is boxed on the heap and its operations fall back to scalar Java,
 * a hundred times slower. Passes talk through small scratch arrays (a group or a row, in L1) instead.
 */
public final class Lanes {
  private Lanes() {}

  /** Float lanes. */
  static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED.vectorBitSize() > 512 ? FloatVector.SPECIES_512
      : FloatVector.SPECIES_PREFERRED;
  /** Int lanes, as many as {@link #F}. */
  static final VectorSpecies<Integer> I = F.withLanes(int.class);
  /** Lane count. */
  static final int L = F.length();
  /** Byte lanes, as many as {@link #F} (FP8 codes, int8 codes); null below 8 lanes (no such shape). */
  static final VectorSpecies<Byte> B = L >= 8 ? VectorSpecies.of(byte.class, VectorShape.forBitSize(8 * L)) : null;
  /** The bytes of one float vector ({@code 4 L}), for float32 bodies in byte arrays. */
  static final VectorSpecies<Byte> FB = F.withLanes(byte.class);
  /** Byte lanes of the widest shape, for scans over code bytes. */
  static final VectorSpecies<Byte> SCAN = ByteVector.SPECIES_PREFERRED;

  /**
   * Added to the saturation count an encoder on lanes returns when its input held NaN or +-Inf: the SIMD encoders
   * find them while they read the input, so that the codec need not scan it first ({@code AbstractCodec}).
   */
  public static final long NON_FINITE = 1L << 62;

  /** Float32 bits of +Inf; an absolute value's bits at or above it are Inf or NaN. */
  static final int INF = 0x7F800000;
  /** The bits of a float's magnitude. */
  static final int ABS = 0x7FFFFFFF;
  /** A float32 of a payload: little-endian, at any byte offset (the wire format, docs/design.md §3). */
  static final ValueLayout.OfFloat F32_LE = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

  /** True when these lane shapes exist on this machine (at least 8 float lanes). */
  static boolean supported() {
    return L >= 8;
  }

  /** {@code n} rounded up to whole vectors (the size of scratch that passes may fill to a vector boundary). */
  static int whole(int n) {
    return (n + L - 1) / L * L;
  }

  /**
   * The index of the first NaN or +-Inf among {@code x[off .. off + n)}, counted from {@code off}, or -1.
   *
   * @throws IndexOutOfBoundsException if the range is outside {@code x}
   */
  public static int firstNonFinite(float[] x, int off, int n) {
    int i = 0;
    for (; i <= n - 4 * L; i += 4 * L) { // four vectors a test
      IntVector m = FloatVector.fromArray(F, x, off + i).reinterpretAsInts().and(ABS)
          .max(FloatVector.fromArray(F, x, off + i + L).reinterpretAsInts().and(ABS))
          .max(FloatVector.fromArray(F, x, off + i + 2 * L).reinterpretAsInts().and(ABS))
          .max(FloatVector.fromArray(F, x, off + i + 3 * L).reinterpretAsInts().and(ABS));
      if (m.compare(GE, INF).anyTrue()) {
        break;
      }
    }
    for (; i < n; i += L) {
      VectorMask<Integer> bad = FloatVector.fromArray(F, x, off + i, F.indexInRange(i, n)).reinterpretAsInts().and(ABS)
          .compare(GE, INF);
      if (bad.anyTrue()) {
        return i + bad.firstTrue();
      }
    }
    return -1;
  }

  /** The largest absolute-value bits among {@code x[off .. off + n)}, NaN and Inf included; 0 for n = 0. */
  static int absMaxBits(float[] x, int off, int n) {
    IntVector m = IntVector.zero(I);
    int i = 0;
    for (; i <= n - L; i += L) {
      m = m.max(FloatVector.fromArray(F, x, off + i).reinterpretAsInts().and(ABS));
    }
    if (i < n) {
      m = m.max(FloatVector.fromArray(F, x, off + i, F.indexInRange(i, n)).reinterpretAsInts().and(ABS));
    }
    return m.reduceLanes(MAX);
  }

  /**
   * Per group of the {@code groups} groups of {@code groupSize} floats (a multiple of {@link #L}) from {@code w[off]},
   * the largest absolute-value bits (NaN and Inf included) into {@code bits[g]}; returns the largest of all.
   */
  static int groupMaxBits(float[] w, int off, int groups, int groupSize, int[] bits) {
    int all = 0;
    for (int g = 0; g < groups; g++) {
      IntVector m = IntVector.zero(I);
      for (int i = off + g * groupSize; i < off + (g + 1) * groupSize; i += L) {
        m = m.max(FloatVector.fromArray(F, w, i).reinterpretAsInts().and(ABS));
      }
      bits[g] = m.reduceLanes(MAX);
      all = Math.max(all, bits[g]);
    }
    return all;
  }

  /**
   * {@code dst[g*G + i] = src[srcOff + g*G + i] * factor[g]} for the {@code groups} groups of {@code groupSize} (a
   * multiple of {@link #L}); {@code dst} may be {@code src} at offset 0.
   */
  static void scale(float[] src, int srcOff, int groups, int groupSize, float[] factor, float[] dst) {
    for (int g = 0; g < groups; g++) {
      float f = factor[g];
      for (int i = g * groupSize; i < (g + 1) * groupSize; i += L) {
        FloatVector.fromArray(F, src, srcOff + i).mul(f).intoArray(dst, i);
      }
    }
  }

  /**
   * {@code max |x[off + i]|} over the finite values of {@code x[off .. off + n)}, +0 if there is none: the absmax
   * every group statistic of the reference kernels computes ({@code e <= Float.MAX_VALUE ? max(a, e) : a}).
   */
  static float absMaxFinite(float[] x, int off, int n) {
    IntVector m = IntVector.zero(I);
    for (int i = 0; i < n; i += L) {
      IntVector e = FloatVector.fromArray(F, x, off + i, F.indexInRange(i, n)).reinterpretAsInts().and(ABS);
      m = m.max(e.blend(0, e.compare(GE, INF)));
    }
    return Float.intBitsToFloat(m.reduceLanes(MAX));
  }

  /**
   * {@code out[outOff + i] = a[aOff + i] + b[bOff + i]} for {@code i < n} (float32 adds, lane by lane). {@code out}
   * may be {@code a} or {@code b} at the same offset.
   */
  public static void add(float[] a, int aOff, float[] b, int bOff, float[] out, int outOff, int n) {
    int i = 0;
    for (; i <= n - L; i += L) {
      FloatVector.fromArray(F, a, aOff + i).add(FloatVector.fromArray(F, b, bOff + i)).intoArray(out, outOff + i);
    }
    if (i < n) {
      VectorMask<Float> m = F.indexInRange(i, n);
      FloatVector.fromArray(F, a, aOff + i, m).add(FloatVector.fromArray(F, b, bOff + i, m)).intoArray(out, outOff + i,
          m);
    }
  }

  /**
   * {@code out[outOff + i] = w[wOff + i]}, or {@code out[outOff + i] + w[wOff + i]} when accumulating, for
   * {@code i < n}.
   */
  static void put(float[] w, int wOff, int n, float[] out, int outOff, boolean accumulate) {
    if (accumulate) {
      add(out, outOff, w, wOff, out, outOff, n);
    } else {
      System.arraycopy(w, wOff, out, outOff, n);
    }
  }
}
