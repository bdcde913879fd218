package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.B2I;
import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.GE;
import static jdk.incubator.vector.VectorOperators.GT;
import static jdk.incubator.vector.VectorOperators.LE;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.TacoKernels;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;

/**
 * The per-group scalars of a TACO row, {@link Lanes#L} groups at a time: the pre-scale exponent
 * ({@link TacoKernels#preScaleExponent}), the fine exponent and encode multiplier ({@link TacoKernels#fineExponent},
 * {@link TacoKernels#encodeScale}) and the decode multiplier ({@link TacoKernels#decodeScale}), the same integers and
 * floats, computed with the same integer operations on the floats' bits. Groups the lanes do not cover (a group max
 * that is a float32 subnormal, an ASH strength other than 1, a multiplier whose exponent leaves the normal range) are
 * computed by the reference methods. Arrays of per-group values hold whole vectors ({@link Lanes#whole} of the group
 * count); padding lanes are never read back.
 */
final class TacoScales {
  private TacoScales() {}

  private static final int L = Lanes.L;
  private static final float[] ONES = ones();

  private static float[] ones() {
    float[] a = new float[L];
    java.util.Arrays.fill(a, 1f);
    return a;
  }

  /**
   * Per group g of a finite row with absmax bits {@code aBits[g]}: the pre-scale exponent {@code k[g]} and
   * {@code p[g] = 2^k} (1 for an all-zero group), or {@code reference[g]} where {@code 2^k} is no float32.
   */
  static void preScale(int[] aBits, int ng, float alpha, int[] k, float[] p, boolean[] reference) {
    int g = 0;
    if (alpha == 1f) { // k = round(-1 * l) = -l, inside its clamp; l = e - 127 for a normal max
      for (; g < ng; g += L) {
        IntVector e = IntVector.fromArray(Lanes.I, aBits, g).lanewise(LSHR, 23);
        VectorMask<Integer> none = e.compare(EQ, 0); // zero (or subnormal: fixed below)
        IntVector kv = IntVector.broadcast(Lanes.I, 127).sub(e).blend(0, none);
        kv.intoArray(k, g);
        kv.add(127).lanewise(LSHL, 23).blend(1 << 22, e.compare(EQ, 254)) // 2^-127 is a subnormal
            .blend(Float.floatToRawIntBits(1f), none).reinterpretAsFloats().intoArray(p, g);
      }
      g = 0;
    }
    for (; g < ng; g++) {
      reference[g] = false;
      if (alpha != 1f || aBits[g] != 0 && aBits[g] < 0x800000) {
        float a = Float.intBitsToFloat(aBits[g]);
        k[g] = a > 0f ? TacoKernels.preScaleExponent(a, alpha) : 0;
        reference[g] = k[g] < -149 || k[g] > 127;
        p[g] = reference[g] ? 0f : Math.scalb(1f, k[g]);
      }
    }
  }

  /**
   * Per group g with pre-scaled (and transformed) absmax {@code m = mBits[g] * mul[g]} (pass {@code mul} = the
   * pre-scales when the absmax is of the untransformed values, null when {@code mBits} is the transformed one),
   * pre-scale exponent {@code k[g]}, in a row with coarse scale {@code c > 0}: the fine exponent {@code f[g]} (0
   * without dual scale) and the encode multiplier {@code es[g]}. Groups with {@code mBits[g] == 0} or
   * {@code skip[g]} get f = 0 and es = 0.
   */
  static void encodeScales(int[] mBits, float[] mul, int[] k, boolean[] skip, int ng, float c, int format,
      boolean dualScale, int[] f, float[] es) {
    float inv = TacoKernels.inverseMantissa(c);
    int ec = Math.getExponent(c);
    float max = Fp8.maxValue(format);
    int maxMant = Float.floatToRawIntBits(max) & 0x7FFFFF;
    int top = Fp8.maxExponent(format) + 127 + ec; // n + k + e(c) = top - (y >>> 23) - over + k
    int ib = Float.floatToRawIntBits(inv);
    VectorMask<Integer> single = Lanes.I.maskAll(!dualScale);
    for (int g = 0; g < ng; g += L) {
      FloatVector m = IntVector.fromArray(Lanes.I, mBits, g).reinterpretAsFloats()
          .mul(FloatVector.fromArray(Lanes.F, mul == null ? ONES : mul, mul == null ? 0 : g)); // * 1 is exact
      IntVector kv = IntVector.fromArray(Lanes.I, k, g);
      IntVector y = m.mul(inv).reinterpretAsInts();
      IntVector fv = IntVector.broadcast(Lanes.I, top).sub(y.lanewise(LSHR, 23)).add(kv)
          .sub(IntVector.zero(Lanes.I).blend(1, y.and(0x7FFFFF).compare(GT, maxMant))).max(0).min(255).blend(0, single);
      fv.intoArray(f, g);
      IntVector e = fv.sub(kv).sub(ec);
      IntVector biased = e.add(ib >>> 23);
      VectorMask<Integer> normal = biased.compare(GE, 1).and(biased.compare(LE, 254));
      IntVector s = e.lanewise(LSHL, 23).add(ib);
      for (int i = 0; i < 4; i++) { // lowered by an ulp while m * s > FP8MAX, as encodeScale does
        s = s.sub(1, m.mul(s.reinterpretAsFloats()).compare(GT, max).cast(Lanes.I));
      }
      s.reinterpretAsFloats().intoArray(es, g);
      if (!normal.allTrue()) {
        for (int j = g; j < Math.min(ng, g + L); j++) {
          if (!normal.laneIsSet(j - g)) {
            es[j] = TacoKernels.encodeScale(Float.intBitsToFloat(mBits[j]) * (mul == null ? 1f : mul[j]), c, inv,
                f[j], k[j], format);
          }
        }
      }
    }
    for (int g = 0; g < ng; g++) {
      if (mBits[g] == 0 || skip[g]) {
        f[g] = 0;
        es[g] = 0f;
      }
    }
  }

  /**
   * The decode multipliers {@code ds[g] = c 2^-f} ({@link TacoKernels#decodeScale}) of a row with coarse scale
   * {@code c > 0} and fine exponents at {@code in[fineAt ..]} (-1: single scale, f = 0); true if all are normal floats
   * (else the values of {@code ds} are not all set: the caller takes the reference).
   */
  static boolean decodeScales(byte[] in, int fineAt, int ng, float c, float[] ds) {
    int cb = Float.floatToRawIntBits(c);
    if (fineAt < 0) {
      java.util.Arrays.fill(ds, 0, ng, c);
      return true;
    }
    boolean normal = true;
    int g = 0;
    for (; g <= ng - L; g += L) { // c 2^-f is exact while its exponent field stays >= 1
      IntVector f = ((IntVector) ByteVector.fromArray(Lanes.B, in, fineAt + g).convertShape(B2I, Lanes.I, 0))
          .and(0xFF);
      normal &= IntVector.broadcast(Lanes.I, cb >>> 23).sub(f).compare(GE, 1).allTrue();
      IntVector.broadcast(Lanes.I, cb).sub(f.lanewise(LSHL, 23)).reinterpretAsFloats().intoArray(ds, g);
    }
    for (; g < ng; g++) {
      ds[g] = TacoKernels.decodeScale(c, in[fineAt + g] & 0xFF);
      normal &= ds[g] >= Float.MIN_NORMAL;
    }
    return normal;
  }
}
