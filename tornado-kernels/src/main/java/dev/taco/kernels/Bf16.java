package dev.taco.kernels;

/**
 * bfloat16 scalar kernels (1 sign, 8 exponent, 7 mantissa bits: the top half of a float32), as sent by
 * Megatron-LM under mixed precision. Codes are carried in a {@code short} (bit pattern, not a number).
 *
 * <p>{@link #encode} rounds to nearest, ties to even, like {@code torch.Tensor.to(torch.bfloat16)}: finite values
 * above bf16's max (about 3.3895e38) round to infinity; NaN stays NaN (quiet bit set, sign and top payload bits
 * kept). {@link #encodeSaturating} clamps such values to {@code ±max} instead. Decoding is exact.
 */
public final class Bf16 {
  private Bf16() {}

  /** Code of the largest finite bf16 value, {@code 0x7F7F} (about 3.3895e38). */
  public static final short MAX_CODE = 0x7F7F;

  /** Encodes {@code v} to bf16 bits with round-to-nearest-even; NaN stays NaN, overflow gives ±Inf. */
  public static short encode(float v) {
    int bits = Float.floatToRawIntBits(v);
    if ((bits & 0x7FFFFFFF) > 0x7F800000) {
      return (short) ((bits >>> 16) | 0x0040); // quiet NaN, sign kept
    }
    return (short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16);
  }

  /**
   * Two bf16 codes packed little-endian: {@code encode(lo)} in bits 0-15, {@code encode(hi)} in 16-31. On the GPU:
   * one {@code cvt.rn.bf16x2.f32} (PTX ISA, "cvt", sm_80+), whose rounding equals {@link #encode}'s for every
   * non-NaN input; a NaN input takes {@link #encode}'s path (the hardware writes a canonical NaN).
   */
  public static int encode2(float lo, float hi) {
    return (encode(lo) & 0xFFFF) | encode(hi) << 16;
  }

  /** As {@link #encode}, but a finite {@code v} that would round to ±Inf gives ±max instead (Inf stays Inf). */
  public static short encodeSaturating(float v) {
    short c = encode(v);
    if ((c & 0x7FFF) == 0x7F80 && Float.isFinite(v)) {
      return (short) ((c & 0x8000) | MAX_CODE);
    }
    return c;
  }

  /**
   * {@link #encodeSaturating} of two values packed as {@link #encode2} packs them: on the GPU one
   * {@code cvt.rn.bf16x2.f32} and a fix-up of each half that became an infinity from a finite input.
   */
  public static int encodeSaturating2(float lo, float hi) {
    int p = encode2(lo, hi);
    if ((p & 0x7FFF) == 0x7F80 && Float.isFinite(lo)) {
      p = p & 0xFFFF8000 | MAX_CODE;
    }
    if ((p & 0x7FFF0000) == 0x7F800000 && Float.isFinite(hi)) {
      p = p & 0x8000FFFF | MAX_CODE << 16;
    }
    return p;
  }

  /** Decodes bf16 bits to the exact float value. */
  public static float decode(short c) {
    return Float.intBitsToFloat(c << 16);
  }

  /** True if {@code c} is an Inf or NaN bf16 pattern. */
  public static boolean isNonFinite(short c) {
    return (c & 0x7F80) == 0x7F80;
  }
}
