package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.ROL;

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
 * {@code v * +-1} is exact). At h = 1 the partners are the vector's 64-bit lanes rotated by 32 bits, a cheaper
 * instruction than the permute the other stages take. The wider stages pair whole vectors; the last one is fused
 * with the scaling and the absmax. A group at a time, so that each is loaded once from its source and then worked on
 * in L1 (a group of {@code 4 L} floats wholly in registers).
 */
final class HadamardLanes {
  private HadamardLanes() {}

  private static final int L = Lanes.L;
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
   * into {@code maxBits[g]}. A group at a time: its in-vector stages into a group of scratch, then the wider ones two
   * at a time, four vectors in registers ({@link #radix4}), the last into {@code dst}; a group of {@code 4 L} (G = 64
   * with AVX-512, taco's default) wholly in registers ({@link #inRegisters}).
   *
   * @param n a power of two; below {@code L} the reference runs
   */
  static void transform(float[] src, int srcOff, float[] factor, int n, int count, float[] dst, int dstOff,
      int[] maxBits) {
    if (n == L) { // a group is one vector (nvfp4's 16 with AVX-512): its in-vector stages are the whole transform
      float s = Hadamard.scale(n);
      float[] t = Scratch.get().floats(Scratch.Slot.GROUP, n);
      for (int g = 0; g < count; g++) {
        inVector(src, srcOff + g * n, factor == null ? 1f : factor[g], n, t);
        FloatVector v = FloatVector.fromArray(Lanes.F, t, 0).mul(s);
        v.intoArray(dst, dstOff + g * n);
        maxBits[g] = v.reinterpretAsInts().and(Lanes.ABS).reduceLanes(VectorOperators.MAX);
      }
      return;
    }
    if (n < L) {
      for (int g = 0; g < count; g++) {
        int o = dstOff + g * n;
        for (int i = 0; i < n; i++) {
          dst[o + i] = src[srcOff + g * n + i] * (factor == null ? 1f : factor[g]);
        }
        Hadamard.fwht(dst, o, n);
        maxBits[g] = Lanes.absMaxBits(dst, o, n);
      }
      return;
    }
    float s = Hadamard.scale(n);
    if (n == 4 * L) {
      for (int g = 0; g < count; g++) {
        maxBits[g] = inRegisters(src, srcOff + g * n, factor == null ? 1f : factor[g], s, dst, dstOff + g * n);
      }
      return;
    }
    float[] t = Scratch.get().floats(Scratch.Slot.GROUP, n);
    for (int g = 0; g < count; g++) {
      inVector(src, srcOff + g * n, factor == null ? 1f : factor[g], n, t);
      int h = L;
      for (; 4 * h < n; h *= 4) {
        radix4(t, n, h, 1f, t, 0);
      }
      int o = dstOff + g * n;
      maxBits[g] = 4 * h == n ? radix4(t, n, h, s, dst, o) : radix2(t, h, s, dst, o);
    }
  }

  /**
   * The whole transform of one group of {@code 4 L} floats, {@code src[srcOff ..] * f}, in four vector registers: the
   * stages of {@link #inVector} then those of {@link #radix4} with h = L, the results times {@code s} into
   * {@code dst[dstOff ..]} (may be {@code src} at the same offset); returns their largest absolute-value bits. The
   * stages are written out for each register, not called: with them in a helper shared with {@link #inVector}, C2 left
   * the helper's vectors boxed and {@code taco} ran at 0.2 GB/s instead of 8 (bench/run-codec.sh, 2026-12-02).
   */
  private static int inRegisters(float[] src, int srcOff, float f, float s, float[] dst, int dstOff) {
    FloatVector v0 = FloatVector.fromArray(Lanes.F, src, srcOff).mul(f);
    FloatVector v1 = FloatVector.fromArray(Lanes.F, src, srcOff + L).mul(f);
    FloatVector v2 = FloatVector.fromArray(Lanes.F, src, srcOff + 2 * L).mul(f);
    FloatVector v3 = FloatVector.fromArray(Lanes.F, src, srcOff + 3 * L).mul(f);
    v0 = v0.fma(SIGN1, v0.reinterpretAsLongs().lanewise(ROL, 32).reinterpretAsFloats());
    v1 = v1.fma(SIGN1, v1.reinterpretAsLongs().lanewise(ROL, 32).reinterpretAsFloats());
    v2 = v2.fma(SIGN1, v2.reinterpretAsLongs().lanewise(ROL, 32).reinterpretAsFloats());
    v3 = v3.fma(SIGN1, v3.reinterpretAsLongs().lanewise(ROL, 32).reinterpretAsFloats());
    v0 = v0.fma(SIGN2, v0.rearrange(SWAP2));
    v1 = v1.fma(SIGN2, v1.rearrange(SWAP2));
    v2 = v2.fma(SIGN2, v2.rearrange(SWAP2));
    v3 = v3.fma(SIGN2, v3.rearrange(SWAP2));
    v0 = v0.fma(SIGN4, v0.rearrange(SWAP4));
    v1 = v1.fma(SIGN4, v1.rearrange(SWAP4));
    v2 = v2.fma(SIGN4, v2.rearrange(SWAP4));
    v3 = v3.fma(SIGN4, v3.rearrange(SWAP4));
    if (L > 8) {
      v0 = v0.fma(SIGN8, v0.rearrange(SWAP8));
      v1 = v1.fma(SIGN8, v1.rearrange(SWAP8));
      v2 = v2.fma(SIGN8, v2.rearrange(SWAP8));
      v3 = v3.fma(SIGN8, v3.rearrange(SWAP8));
    }
    FloatVector a0 = v0.add(v1); // stage L
    FloatVector a1 = v0.sub(v1);
    FloatVector a2 = v2.add(v3);
    FloatVector a3 = v2.sub(v3);
    v0 = a0.add(a2).mul(s); // stage 2 L
    v1 = a1.add(a3).mul(s);
    v2 = a0.sub(a2).mul(s);
    v3 = a1.sub(a3).mul(s);
    v0.intoArray(dst, dstOff);
    v1.intoArray(dst, dstOff + L);
    v2.intoArray(dst, dstOff + 2 * L);
    v3.intoArray(dst, dstOff + 3 * L);
    return v0.reinterpretAsInts().and(Lanes.ABS).max(v1.reinterpretAsInts().and(Lanes.ABS))
        .max(v2.reinterpretAsInts().and(Lanes.ABS)).max(v3.reinterpretAsInts().and(Lanes.ABS))
        .reduceLanes(VectorOperators.MAX);
  }

  /** {@code t = } the stages h = 1 .. L/2 (L is 8 or 16) of each vector of {@code src[srcOff .. srcOff + n) * f}. */
  private static void inVector(float[] src, int srcOff, float f, int n, float[] t) {
    for (int i = 0; i < n; i += L) {
      FloatVector v = FloatVector.fromArray(Lanes.F, src, srcOff + i).mul(f);
      v = v.fma(SIGN1, v.reinterpretAsLongs().lanewise(ROL, 32).reinterpretAsFloats());
      v = v.fma(SIGN2, v.rearrange(SWAP2));
      v = v.fma(SIGN4, v.rearrange(SWAP4));
      if (L > 8) {
        v = v.fma(SIGN8, v.rearrange(SWAP8));
      }
      v.intoArray(t, i);
    }
  }

  /**
   * The stages h and 2h of the group of {@code n} floats in {@code t} (h at least L), four vectors at a time in
   * registers, the results times {@code s} (1 but for the last stage: exact) into {@code out[outOff ..]} (may be
   * {@code t} at 0); returns their largest absolute-value bits.
   */
  private static int radix4(float[] t, int n, int h, float s, float[] out, int outOff) {
    IntVector m = IntVector.zero(Lanes.I);
    for (int i = 0; i < n; i += 4 * h) {
      for (int j = i; j < i + h; j += L) {
        FloatVector v0 = FloatVector.fromArray(Lanes.F, t, j);
        FloatVector v1 = FloatVector.fromArray(Lanes.F, t, j + h);
        FloatVector v2 = FloatVector.fromArray(Lanes.F, t, j + 2 * h);
        FloatVector v3 = FloatVector.fromArray(Lanes.F, t, j + 3 * h);
        FloatVector a0 = v0.add(v1); // stage h
        FloatVector a1 = v0.sub(v1);
        FloatVector a2 = v2.add(v3);
        FloatVector a3 = v2.sub(v3);
        v0 = a0.add(a2).mul(s); // stage 2h
        v2 = a0.sub(a2).mul(s);
        v1 = a1.add(a3).mul(s);
        v3 = a1.sub(a3).mul(s);
        v0.intoArray(out, outOff + j);
        v1.intoArray(out, outOff + j + h);
        v2.intoArray(out, outOff + j + 2 * h);
        v3.intoArray(out, outOff + j + 3 * h);
        m = m.max(v0.reinterpretAsInts().and(Lanes.ABS)).max(v1.reinterpretAsInts().and(Lanes.ABS))
            .max(v2.reinterpretAsInts().and(Lanes.ABS)).max(v3.reinterpretAsInts().and(Lanes.ABS));
      }
    }
    return m.reduceLanes(VectorOperators.MAX);
  }

  /**
   * The last stage, h = n/2, of the group in {@code t}, times {@code s}, into {@code out[outOff ..]}; returns the
   * largest absolute-value bits.
   */
  private static int radix2(float[] t, int h, float s, float[] out, int outOff) {
    IntVector m = IntVector.zero(Lanes.I);
    for (int j = 0; j < h; j += L) {
      FloatVector u = FloatVector.fromArray(Lanes.F, t, j);
      FloatVector v = FloatVector.fromArray(Lanes.F, t, j + h);
      FloatVector sum = u.add(v).mul(s);
      FloatVector diff = u.sub(v).mul(s);
      sum.intoArray(out, outOff + j);
      diff.intoArray(out, outOff + j + h);
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
