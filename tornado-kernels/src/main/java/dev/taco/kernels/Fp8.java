package dev.taco.kernels;

/**
 * FP8 scalar kernels: float32 &lt;-&gt; 8-bit floating point, bit-exact, after the OCP 8-bit Floating Point
 * Specification (OFP8, rev. 1.0, 2023) with one deliberate difference: encoding <em>saturates</em>.
 *
 * <ul>
 *   <li>{@link #E4M3}: 1 sign, 4 exponent (bias 7), 3 mantissa bits; max finite 448; {@code S.1111.111} is NaN;
 *       no infinities; subnormals down to 2^-9.
 *   <li>{@link #E5M2}: 1 sign, 5 exponent (bias 15), 2 mantissa bits; max finite 57344; IEEE-like: exponent
 *       field 31 is Inf (mantissa 0) or NaN; subnormals down to 2^-16.
 * </ul>
 *
 * <p>Encoding rounds to nearest, ties to even, on the exact float value (one rounding, integer arithmetic on
 * the float's bits, so the GPU translation gives the same codes), and saturates: every finite input and every
 * infinity maps to a finite code (magnitudes at or above the max finite value give {@code ±max}); NaN maps to
 * a NaN code ({@code 0x7F} with the input's sign, a NaN in both formats). Signed zeros keep their sign.
 * Decoding is exact (every FP8 value is a float32).
 *
 * <p>Kernel style (docs/design.md §5): static methods on primitives, no allocation, no objects.
 */
public final class Fp8 {
  private Fp8() {}

  /** Format code of OCP E4M3 (the wire format's {@code fp8 format} byte 1). */
  public static final int E4M3 = 1;
  /** Format code of OCP E5M2 (the wire format's {@code fp8 format} byte 2). */
  public static final int E5M2 = 2;

  /** Largest finite E4M3 value, 448 = 1.75 * 2^8. */
  public static final float E4M3_MAX = 448f;
  /** Largest finite E5M2 value, 57344 = 1.75 * 2^15. */
  public static final float E5M2_MAX = 57344f;

  /** Encodes {@code v} to E4M3 (round to nearest even, saturating; NaN to {@code 0x7F | sign}). */
  public static byte encodeE4M3(float v) {
    return encode(v, 3, 7, 0x43E00000 /* 448f */, 0x7E);
  }

  /** Encodes {@code v} to E5M2 (round to nearest even, saturating, Inf to {@code ±57344}; NaN to {@code 0x7F | sign}). */
  public static byte encodeE5M2(float v) {
    return encode(v, 2, 15, 0x47600000 /* 57344f */, 0x7B);
  }

  /** Decodes an E4M3 code to its exact float value ({@code 0x7F}/{@code 0xFF} give NaN). */
  public static float decodeE4M3(byte c) {
    return (c & 0x7F) == 0x7F ? Float.NaN : decode(c, 3, 7);
  }

  /** Decodes an E5M2 code to its exact float value (exponent field 31: ±Inf for mantissa 0, else NaN). */
  public static float decodeE5M2(byte c) {
    if ((c & 0x7C) == 0x7C) {
      return (c & 0x03) != 0 ? Float.NaN : (c < 0 ? Float.NEGATIVE_INFINITY : Float.POSITIVE_INFINITY);
    }
    return decode(c, 2, 15);
  }

  /** Encodes to {@code format} ({@link #E4M3} or {@link #E5M2}; any other value means E5M2). */
  public static byte encode(float v, int format) {
    return format == E4M3 ? encodeE4M3(v) : encodeE5M2(v);
  }

  /**
   * Four E4M3 codes packed little-endian: {@code e(a)} in bits 0-7, {@code e(b)} in 8-15, {@code e(c)} in 16-23,
   * {@code e(d)} in 24-31, where {@code e} is {@link #encodeE4M3} except that every NaN gives {@code 0x7F} (its sign
   * dropped, as the hardware does). On the GPU: two {@code cvt.rn.satfinite.e4m3x2.f32} (PTX ISA 8.x, "cvt", sm_89+),
   * which round to nearest even and saturate exactly as {@link #encodeE4M3} for every non-NaN input.
   */
  public static int encodeE4M3x4(float a, float b, float c, float d) {
    return e4m3(a) | e4m3(b) << 8 | e4m3(c) << 16 | e4m3(d) << 24;
  }

  private static int e4m3(float v) {
    return Float.isNaN(v) ? 0x7F : encodeE4M3(v) & 0xFF;
  }

  /** Four E5M2 codes packed little-endian, as {@link #encodeE4M3x4} (on the GPU: {@code cvt...e5m2x2}, NaN guarded). */
  public static int encodeE5M2x4(float a, float b, float c, float d) {
    return (encodeE5M2(a) & 0xFF) | (encodeE5M2(b) & 0xFF) << 8 | (encodeE5M2(c) & 0xFF) << 16
        | encodeE5M2(d) << 24;
  }

  /**
   * Four codes of {@code format} packed little-endian ({@link #encodeE4M3x4}, whose NaN code is unsigned, or
   * {@link #encodeE5M2x4}).
   */
  public static int encode4(float a, float b, float c, float d, int format) {
    return format == E4M3 ? encodeE4M3x4(a, b, c, d) : encodeE5M2x4(a, b, c, d);
  }

  /** Decodes from {@code format} ({@link #E4M3} or {@link #E5M2}; any other value means E5M2). */
  public static float decode(byte c, int format) {
    return format == E4M3 ? decodeE4M3(c) : decodeE5M2(c);
  }

  /**
   * {@code v[i + q] = decodeE4M3((byte) (w >>> 8q))} for q in 0..3 (four codes packed little-endian). On the GPU: two
   * {@code cvt.rn.f16x2.e4m3x2} and four {@code cvt.f32.f16} (PTX ISA, "cvt", sm_89+), exact since every E4M3 value
   * is a binary16 value; a word holding a NaN code takes the scalar path (the hardware NaN is not Java's
   * {@code Float.NaN}).
   */
  public static void decodeE4M3x4(int w, float[] v, int i) {
    for (int q = 0; q < 4; q++) {
      v[i + q] = decodeE4M3((byte) (w >>> (8 * q)));
    }
  }

  /** As {@link #decodeE4M3x4} for E5M2 ({@code cvt.rn.f16x2.e5m2x2}; words with an Inf or NaN code take the scalar path). */
  public static void decodeE5M2x4(int w, float[] v, int i) {
    for (int q = 0; q < 4; q++) {
      v[i + q] = decodeE5M2((byte) (w >>> (8 * q)));
    }
  }

  /** Four codes of {@code format} packed little-endian into {@code v[i .. i+4)} ({@link #decodeE4M3x4} or {@link #decodeE5M2x4}). */
  public static void decode4(int w, float[] v, int i, int format) {
    if (format == E4M3) {
      decodeE4M3x4(w, v, i);
    } else {
      decodeE5M2x4(w, v, i);
    }
  }

  /** Largest finite value of {@code format}: 448 (E4M3) or 57344 (E5M2). */
  public static float maxValue(int format) {
    return format == E4M3 ? E4M3_MAX : E5M2_MAX;
  }

  /** Unbiased exponent of the largest finite value of {@code format}: 8 (E4M3) or 15 (E5M2). */
  public static int maxExponent(int format) {
    return format == E4M3 ? 8 : 15;
  }

  /** True if {@code c} is a NaN or infinity code of {@code format} (never produced by {@link #encode} from finite input). */
  public static boolean isNonFinite(byte c, int format) {
    return format == E4M3 ? (c & 0x7F) == 0x7F : (c & 0x7C) == 0x7C;
  }

  /**
   * Generic RNE saturating encoder for a format with {@code m} mantissa bits and exponent bias {@code bias};
   * {@code maxBits} are the float32 bits of the largest finite value, {@code maxCode} its code.
   */
  private static byte encode(float v, int m, int bias, int maxBits, int maxCode) {
    int bits = Float.floatToRawIntBits(v);
    int sign = (bits >>> 24) & 0x80;
    int abs = bits & 0x7FFFFFFF;
    if (abs > 0x7F800000) {
      return (byte) (sign | 0x7F); // NaN
    }
    if (abs >= maxBits) {
      return (byte) (sign | maxCode); // saturate (includes Inf)
    }
    int expField = abs >>> 23;
    int e = expField - 127;
    int code;
    if (e >= 1 - bias) {
      // Normal in the target: round the 23-bit mantissa to m bits, ties to even; a carry rolls into the exponent.
      int shift = 23 - m;
      int r = abs + ((1 << (shift - 1)) - 1) + ((abs >>> shift) & 1);
      code = (r >>> shift) - ((127 - bias) << m);
    } else {
      // Subnormal (or zero) in the target: q = value / 2^(1-bias-m), rounded to nearest even integer.
      int mant = (abs & 0x7FFFFF) | (expField != 0 ? 0x800000 : 0);
      int eEff = expField != 0 ? e : -126;
      int shift = 24 - bias - m - eEff; // value = mant * 2^(eEff-23); q = mant >> shift
      if (shift > 25) {
        code = 0; // below half the smallest subnormal
      } else {
        code = (mant + ((1 << (shift - 1)) - 1) + ((mant >>> shift) & 1)) >>> shift;
      }
    }
    return (byte) (sign | code);
  }

  /** Decodes a finite code of a format with {@code m} mantissa bits and bias {@code bias}. */
  private static float decode(byte c, int m, int bias) {
    int ef = (c & 0x7F) >>> m;
    int mf = c & ((1 << m) - 1);
    float mag;
    if (ef == 0) {
      mag = mf * Float.intBitsToFloat((127 + 1 - bias - m) << 23); // mf * 2^(1-bias-m), exact
    } else {
      mag = Float.intBitsToFloat(((ef - bias + 127) << 23) | (mf << (23 - m)));
    }
    return c < 0 ? -mag : mag;
  }
}
