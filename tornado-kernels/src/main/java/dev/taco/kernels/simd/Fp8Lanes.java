package dev.taco.kernels.simd;

import static jdk.incubator.vector.VectorOperators.B2I;
import static jdk.incubator.vector.VectorOperators.EQ;
import static jdk.incubator.vector.VectorOperators.I2B;
import static jdk.incubator.vector.VectorOperators.I2F;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;
import static jdk.incubator.vector.VectorOperators.LT;

import dev.taco.kernels.Fp8;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;

/**
 * OCP FP8 (E4M3, E5M2) on int lanes: {@link Fp8}'s encode and decode, bit for bit, over arrays (OCP 8-bit Floating
 * Point Specification rev. 1.0, with {@link Fp8}'s saturation).
 *
 * <p>Encode, per lane, in float arithmetic: {@code a = min(|v|, max)} is rounded to the format's grid, ties to even,
 * by one float32 add of {@code 2^(e+23-m)}, where {@code e} is a's exponent or the target's smallest normal exponent
 * {@code 1-bias}, whichever is larger (the ulp of that power is the grid's step at a, subnormal range included); the
 * sum's bits, less that power's, count the grid steps, from which integer adds make the code (see {@link #code}); the
 * sign is or-ed in. The same code as {@link Fp8}'s integer rounding, round to nearest even in both. Decode places a
 * normal code's exponent and mantissa fields in a float32's and adds {@code 127-bias} to the exponent; a subnormal
 * code is its mantissa times {@code 2^(1-bias-m)}, both exact.
 * No float32 subnormal is made or read on the way (each costs a microcode assist on Intel cores). One code path for
 * both formats, their constants as scalars; whole vectors only (callers pad).
 */
final class Fp8Lanes {
  private Fp8Lanes() {}

  private static final int L = Lanes.L;

  /** The code of an infinity in the taco kernels: E4M3 has none (its NaN, 0x7F), E5M2's is 0x7C (sign apart). */
  static int infinityCode(int format) {
    return format == Fp8.E4M3 ? 0x7F : 0x7C;
  }

  /**
   * The codes of {@code v * scale[g]} for every value {@code v} of the {@code groups} groups of {@code groupSize}
   * floats (a multiple of {@link Lanes#L}) from {@code w[wOff]}, at {@code out[outOff ..]}:
   * {@link Fp8#encode}{@code (v * s, format)} for finite values and NaN ({@code 0x7F | sign}), {@code infCode | sign}
   * for +-Inf (the format's saturated code, 0x7E or 0x7B, gives {@link Fp8#encode}'s own behaviour). Saturation is the
   * rounding of {@code min(|v|, max)}: the max is on the grid, so it rounds to itself. When some product reaches past
   * the max (saturated, NaN or Inf: rare) the groups are then gone over in scalar code to count the saturated ones and
   * code the NaN and Inf.
   *
   * @return how many products are finite and beyond the format's max (they saturated)
   */
  static int encode(float[] w, int wOff, int groups, int groupSize, float[] scale, int format, int infCode, byte[] out,
      int outOff) {
    boolean e4m3 = format == Fp8.E4M3;
    int m = e4m3 ? 3 : 2;
    int bias = e4m3 ? 7 : 15;
    float max = Fp8.maxValue(format);
    int maxBits = Float.floatToRawIntBits(max);
    int minNormal = (128 - bias) << 23; // the exponent field of the target's smallest normal
    IntVector top = IntVector.zero(Lanes.I);
    for (int g = 0; g < groups; g++) {
      float s = scale[g];
      int start = wOff + g * groupSize;
      for (int i = start; i < start + groupSize; i += L) {
        IntVector bits = FloatVector.fromArray(Lanes.F, w, i).mul(s).reinterpretAsInts();
        IntVector abs = bits.and(Lanes.ABS);
        top = top.max(abs);
        code(bits, abs, maxBits, minNormal, m, bias).intoArray(out, outOff + i - wOff);
      }
    }
    int sat = 0;
    if (top.reduceLanes(VectorOperators.MAX) > maxBits) { // saturated, NaN or Inf values: as the reference
      for (int g = 0; g < groups; g++) {
        float s = scale[g];
        for (int i = wOff + g * groupSize; i < wOff + (g + 1) * groupSize; i++) {
          float v = w[i] * s;
          sat += Math.abs(v) > max && Float.isFinite(v) ? 1 : 0;
          if (!Float.isFinite(v)) {
            out[outOff + i - wOff] = (byte) ((Float.floatToRawIntBits(v) < 0 ? 0x80 : 0)
                | (Float.isNaN(v) ? 0x7F : infCode));
          }
        }
      }
    }
    return sat;
  }

  /**
   * The E4M3 codes of finite floats {@code bits} (raw bits, {@code abs} their absolute values) as {@link #encode}
   * computes them: {@link #encode}'s loop body, for callers that compute the values in the same loop (the grouped
   * codecs' {@code v / a * qm}).
   */
  static ByteVector e4m3(IntVector bits, IntVector abs) {
    return code(bits, abs, E4M3_MAX_BITS, (128 - 7) << 23, 3, 7);
  }

  private static final int E4M3_MAX_BITS = Float.floatToRawIntBits(Fp8.maxValue(Fp8.E4M3));

  /**
   * One vector of codes: {@code a = min(abs, max)} rounded to the grid by the add of {@code big = 2^(e+23-m)} (e its
   * exponent, at least the target's smallest normal exponent); the bits of {@code a + big} less those of {@code big}
   * are the rounded {@code a / 2^(e-m)}, its grid steps from 0 ({@code 2^m} to {@code 2^(m+1)} in a normal binade, the
   * top one rounding up to the next), so the code is that plus {@code (e + bias - 1) << m}, the sign or-ed in. All
   * integer work but the one add: a float multiply taking the rounded value down to the code's exponent made a float32
   * subnormal for every code below the format's smallest normal, and Intel cores take a microcode assist of about a
   * hundred cycles for each (fp8-tensor, where 0.5 % of the codes are subnormal, encoded at 0.40 of a copy instead of
   * 0.66; 2026-12-03).
   */
  private static ByteVector code(IntVector bits, IntVector abs, int maxBits, int minNormal, int m, int bias) {
    IntVector a = abs.min(maxBits);
    IntVector e = a.and(Lanes.INF).max(minNormal); // the exponent field of 2^e
    IntVector big = e.add((23 - m) << 23);
    return (ByteVector) a.reinterpretAsFloats().add(big.reinterpretAsFloats()).reinterpretAsInts().sub(big)
        .add(e.lanewise(LSHR, 23).sub(128 - bias).lanewise(LSHL, m))
        .or(bits.lanewise(LSHR, 24).and(0x80)).convertShape(I2B, Lanes.B, 0);
  }

  /**
   * {@code w[wOff + i] = }{@link Fp8#decode}{@code (in[off + i], format)} for {@code i < n} (a multiple of
   * {@link Lanes#L}), every code finite: a NaN/Inf code decodes to a finite value here; {@link #patchNonFinite} then
   * puts the reference's NaN/Inf in its place.
   */
  static void decode(byte[] in, int off, int n, int format, float[] w, int wOff) {
    boolean e4m3 = format == Fp8.E4M3;
    int m = e4m3 ? 3 : 2;
    int bias = e4m3 ? 7 : 15;
    float step = e4m3 ? 0x1p-9f : 0x1p-16f; // the subnormal step 2^(1-bias-m)
    for (int i = 0; i < n; i += L) {
      IntVector c = (IntVector) ByteVector.fromArray(Lanes.B, in, off + i).convertShape(B2I, Lanes.I, 0);
      IntVector mag = c.and(0x7F);
      IntVector v = mag.lanewise(LSHL, 23 - m).add((127 - bias) << 23); // right for the normal codes
      VectorMask<Integer> small = mag.compare(LT, 1 << m); // zero and the subnormals: rare, mostly none in a vector
      if (small.anyTrue()) {
        v = v.blend(((FloatVector) mag.convert(I2F, 0)).mul(step).reinterpretAsInts(), small);
      }
      v.or(c.and(0x80).lanewise(LSHL, 24)).reinterpretAsFloats().intoArray(w, wOff + i);
    }
  }

  /** After {@link #decode}: {@code w[wOff + i] = }{@link Fp8#decode} of each NaN/Inf code among the {@code n}. */
  static void patchNonFinite(byte[] in, int off, int n, int format, float[] w, int wOff) {
    for (int i = 0; i < n; i++) {
      if (Fp8.isNonFinite(in[off + i], format)) {
        w[wOff + i] = Fp8.decode(in[off + i], format);
      }
    }
  }

  /**
   * The index of the first NaN/Inf code of {@code format} ({@link Fp8#isNonFinite}) among {@code in[off .. off + n)},
   * counted from {@code off}, or -1.
   */
  static long firstNonFinite(byte[] in, int off, long n, int format) {
    byte mask = (byte) (format == Fp8.E4M3 ? 0x7F : 0x7C);
    int len = (int) n;
    int w = Lanes.SCAN.length();
    int i = 0;
    for (; i + w <= len; i += w) {
      if (ByteVector.fromArray(Lanes.SCAN, in, off + i).and(mask).compare(EQ, mask).anyTrue()) {
        break;
      }
    }
    for (; i < len; i++) {
      if (Fp8.isNonFinite(in[off + i], format)) {
        return i;
      }
    }
    return -1;
  }
}
