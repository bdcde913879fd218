package dev.taco.kernels;

/**
 * The 4-bit element format and the power-of-two scale format of the OCP Microscaling formats (OCP Microscaling
 * Formats (MX) Specification v1.0, 2023: FP4 E2M1, §5.3.3; E8M0, §5.4.1; the scale rule of MXFP4, §6.3), bit-exact
 * scalar kernels in the style of {@link Fp8}.
 *
 * <ul>
 *   <li>E2M1: a nibble, bit 3 the sign, then 2 exponent bits (bias 1) and 1 mantissa bit: magnitudes 0, 0.5, 1, 1.5,
 *       2, 3, 4, 6 (codes 0..7; 0.5 is the one subnormal); no infinity, no NaN. Half an ulp is a quarter of the
 *       value's binade: 2^-2 relative from 1 up, 0.25 absolute below.
 *   <li>E8M0: a byte {@code c} meaning {@code 2^(c - 127)}, from {@code 2^-127} (code 0) to {@code 2^127} (254);
 *       {@code 0xFF} is NaN; no zero, no sign.
 * </ul>
 *
 * <p>Kernel style (docs/design.md §5): static methods on primitives; the GPU translation is this code (comparisons and
 * integer bits, so the same results there).
 */
public final class Fp4 {
  private Fp4() {}

  /** Largest E2M1 magnitude, 6 = 1.5 * 2^2. */
  public static final float E2M1_MAX = 6f;

  /** The E8M0 NaN code. */
  public static final int E8M0_NAN = 0xFF;

  /** E2M1's largest exponent, {@code emax_elem} of the MX spec's scale rule (6 = 1.5 * 2^2). */
  public static final int E2M1_EMAX = 2;

  /**
   * Encodes {@code v} to an E2M1 nibble: round to nearest, ties to even, saturating to {@code +-6} for magnitudes above
   * 6 (the MX spec's clamp to the element format's largest normal); signed zeros keep their sign. The code of
   * {@code |v|} is the number of rounding thresholds it passes, the midpoints between neighbouring values, each
   * compared on the float bits (which order non-negative floats as their values) without a branch. NaN is no E2M1
   * value: it gives {@code +-6} here (callers mark NaN themselves).
   */
  public static int encodeE2M1(float v) {
    int b = Float.floatToRawIntBits(v);
    int a = b & 0x7FFFFFFF;
    int c = above(a, 0x3E800000) // 0.25: a tie goes down to 0 (code 0)
        + above(a, 0x3F3FFFFF) // just below 0.75: a tie goes up to 1 (code 2)
        + above(a, 0x3FA00000) // 1.25: down to 1
        + above(a, 0x3FDFFFFF) // just below 1.75: up to 2 (code 4)
        + above(a, 0x40200000) // 2.5: down to 2
        + above(a, 0x405FFFFF) // just below 3.5: up to 4 (code 6)
        + above(a, 0x40A00000); // 5: down to 4
    return (b >>> 28) & 8 | c;
  }

  /** 1 if the bits {@code a} of a non-negative float are above {@code t}'s, else 0. */
  private static int above(int a, int t) {
    return (t - a) >>> 31;
  }

  /**
   * The exact float value of the E2M1 nibble {@code c & 0xF} (code 8 is -0), built from bits without branches: for
   * codes 2..7 exponent {@code (m >> 1) - 1} and mantissa bit {@code m & 1}, for 0 and 1 the multiples 0 and 0.5.
   */
  public static float decodeE2M1(int c) {
    int m = c & 7;
    int small = (m - 2) >> 31; // all ones for the subnormal codes 0 and 1
    int bits = (((m >> 1) + 126) << 23 | (m & 1) << 22) & ~small | m * (126 << 23) & small;
    return Float.intBitsToFloat(bits | (c & 8) << 28);
  }

  /**
   * The E8M0 code of MXFP4's shared scale for a block whose largest magnitude is {@code amax}: the MX spec's
   * {@code X = 2^(floor(log2(amax)) - emax_elem)} with {@code emax_elem = 2} (§6.3), at least {@code 2^-127} (E8M0's
   * smallest, which also stands for an all-zero block; torchao's reference does the same). {@code floor(log2(amax))}
   * is the float's exponent field less 127, so a subnormal or zero {@code amax} gives the smallest scale; a non-finite
   * one gives code 253 (no valid payload holds it).
   */
  public static int mxScaleCode(float amax) {
    return Math.max(0, ((Float.floatToRawIntBits(amax) >>> 23) & 0xFF) - E2M1_EMAX);
  }

  /** The value of E8M0 code {@code c} (0..255): {@code 2^(c - 127)}, NaN for {@link #E8M0_NAN}. */
  public static float decodeE8M0(int c) {
    return c == E8M0_NAN ? Float.NaN : Float.intBitsToFloat(c == 0 ? 0x00400000 : c << 23);
  }
}
