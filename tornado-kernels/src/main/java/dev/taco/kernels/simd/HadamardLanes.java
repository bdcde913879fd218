package dev.taco.kernels.simd;

import dev.taco.kernels.Hadamard;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShuffle;

/**
 * {@link Hadamard#fwht} on lanes, bit for bit, for rows of groups: the same butterflies ({@code a[j] = u + v,
 * a[j+h] = u - v}) in the same stage order (h = 1, 2, 4, ...), then the same scaling by {@link Hadamard#scale}. A
 * stage with {@code h} below the lane count pairs lane {@code i} with lane {@code i ^ h} of the same vector: with
 * {@code p} that partner, {@code p + v * sign}, sign +1 where bit h of the lane index is clear and -1 where it is set,
 * is {@code v + p} and {@code p - v} (one rounding each, as the reference's add and subtract; an FMA, since
 * {@code v * +-1} is exact). The wider stages pair whole vectors; the last one is fused with the scaling and the
 * absmax. A group at a time, so that each is loaded once from its source and then worked on in L1.
 */
final class HadamardLanes {
  private HadamardLanes() {}

  private static final int L = Lanes.L;
  private static final VectorShuffle<Float> SWAP1 = swap(1);
  private static final VectorShuffle<Float> SWAP2 = swap(2);
  private static final VectorShuffle<Float> SWAP4 = swap(4);
  private static final VectorShuffle<Float> SWAP8 = swap(8);
  private static final FloatVector SIGN1 = sign(1);
  private static final FloatVector SIGN2 = sign(2);
  private static final FloatVector SIGN4 = sign(4);
  private static final FloatVector SIGN8 = sign(8);

  /** Lane i takes lane i ^ h (identity where that is no lane: the stage is then never run). */
  private static VectorShuffle<Float> swap(int h) {
    return VectorShuffle.fromOp(Lanes.F, i -> h < L ? i ^ h : i);
  }

  /** +1 in the lanes whose index has bit h clear, -1 where it is set. */
  private static FloatVector sign(int h) {
    float[] s = new float[L];
    for (int i = 0; i < L; i++) {
      s[i] = (i & h) == 0 ? 1f : -1f;
    }
    return FloatVector.fromArray(Lanes.F, s, 0);
  }

  /**
   * The WHT ({@link Hadamard#fwht}, bit for bit) of {@code src * factor[g]} into {@code dst} for the {@code count}
   * groups of {@code n} floats from {@code src[srcOff]} and {@code dst[dstOff]} ({@code dst} may be {@code src} at the
   * same offset; {@code factor} null means 1, which is exact); each transformed group's largest absolute-value bits
   * into {@code maxBits[g]}. A group at a time: its in-vector stages, then the wider ones ({@link #wider}).
   *
   * @param n a power of two; below {@code 2 L} the reference runs
   */
  static void transform(float[] src, int srcOff, float[] factor, int n, int count, float[] dst, int dstOff,
      int[] maxBits) {
    for (int g = 0; g < count; g++) {
      float f = factor == null ? 1f : factor[g];
      int o = dstOff + g * n;
      if (n < 2 * L) {
        for (int i = 0; i < n; i++) {
          dst[o + i] = src[srcOff + g * n + i] * f;
        }
        Hadamard.fwht(dst, o, n);
        maxBits[g] = Lanes.absMaxBits(dst, o, n);
        continue;
      }
      inVector(src, srcOff + g * n, f, n, dst, o);
      maxBits[g] = wider(dst, o, n);
    }
  }

  /** {@code dst = } the stages h = 1 .. L/2 (L is 8 or 16) of {@code src * f}, one group of {@code n} floats. */
  private static void inVector(float[] src, int srcOff, float f, int n, float[] dst, int dstOff) {
    for (int i = 0; i < n; i += L) {
      FloatVector v = FloatVector.fromArray(Lanes.F, src, srcOff + i).mul(f);
      v = v.fma(SIGN1, v.rearrange(SWAP1));
      v = v.fma(SIGN2, v.rearrange(SWAP2));
      v = v.fma(SIGN4, v.rearrange(SWAP4));
      if (L > 8) {
        v = v.fma(SIGN8, v.rearrange(SWAP8));
      }
      v.intoArray(dst, dstOff + i);
    }
  }

  /**
   * The stages h = L .. n/2 of one group of {@code n} floats at {@code a[off]} ({@link #inVector} done), the last
   * with the scaling, in place; returns the group's largest absolute-value bits. Four vectors (G = 64 with AVX-512:
   * taco's default) in registers.
   */
  private static int wider(float[] a, int off, int n) {
    float s = Hadamard.scale(n);
    if (n == 4 * L) {
      FloatVector v0 = FloatVector.fromArray(Lanes.F, a, off);
      FloatVector v1 = FloatVector.fromArray(Lanes.F, a, off + L);
      FloatVector v2 = FloatVector.fromArray(Lanes.F, a, off + 2 * L);
      FloatVector v3 = FloatVector.fromArray(Lanes.F, a, off + 3 * L);
      FloatVector a0 = v0.add(v1); // h = L
      FloatVector a1 = v0.sub(v1);
      FloatVector a2 = v2.add(v3);
      FloatVector a3 = v2.sub(v3);
      v0 = a0.add(a2).mul(s); // h = 2L, the last, and the scaling
      v2 = a0.sub(a2).mul(s);
      v1 = a1.add(a3).mul(s);
      v3 = a1.sub(a3).mul(s);
      v0.intoArray(a, off);
      v1.intoArray(a, off + L);
      v2.intoArray(a, off + 2 * L);
      v3.intoArray(a, off + 3 * L);
      return v0.reinterpretAsInts().and(Lanes.ABS).max(v1.reinterpretAsInts().and(Lanes.ABS))
          .max(v2.reinterpretAsInts().and(Lanes.ABS)).max(v3.reinterpretAsInts().and(Lanes.ABS))
          .reduceLanes(VectorOperators.MAX);
    }
    for (int h = L; 2 * h < n; h <<= 1) {
      for (int i = off; i < off + n; i += 2 * h) {
        for (int j = i; j < i + h; j += L) {
          FloatVector u = FloatVector.fromArray(Lanes.F, a, j);
          FloatVector v = FloatVector.fromArray(Lanes.F, a, j + h);
          u.add(v).intoArray(a, j);
          u.sub(v).intoArray(a, j + h);
        }
      }
    }
    int h = n / 2;
    IntVector m = IntVector.zero(Lanes.I);
    for (int j = off; j < off + h; j += L) { // the last stage and the scaling
      FloatVector u = FloatVector.fromArray(Lanes.F, a, j);
      FloatVector v = FloatVector.fromArray(Lanes.F, a, j + h);
      FloatVector sum = u.add(v).mul(s);
      FloatVector diff = u.sub(v).mul(s);
      sum.intoArray(a, j);
      diff.intoArray(a, j + h);
      m = m.max(sum.reinterpretAsInts().and(Lanes.ABS)).max(diff.reinterpretAsInts().and(Lanes.ABS));
    }
    return m.reduceLanes(VectorOperators.MAX);
  }

  /**
   * Transforms the {@code count} groups of {@code n} floats from {@code a[off]} in place, each exactly as
   * {@link Hadamard#fwht}; each transformed group's largest absolute-value bits into {@code maxBits[g]}.
   *
   * @param n a power of two
   */
  static void fwht(float[] a, int off, int n, int count, int[] maxBits) {
    transform(a, off, null, n, count, a, off, maxBits);
  }
}
