package dev.taco.kernels.simd;

/**
 * The body of a codec that sends each value as one code of a fixed width, little-endian ({@code fp32}: {@link #FP32},
 * {@code none} (bf16): {@link #BF16}), on lanes. Each method is one pass over whole vectors, the last
 * {@code n % }{@link Lanes#L} values done one by one.
 */
public interface ElementLanes {

  /** float32 values, bits unchanged ({@link Fp32Lanes}). */
  ElementLanes FP32 = new Fp32Lanes();
  /** bfloat16 codes, {@link dev.taco.kernels.Bf16#encodeSaturating} ({@link Bf16Lanes}). */
  ElementLanes BF16 = new Bf16Lanes();

  /**
   * Writes the codes of {@code x[off .. off + n)} at {@code out[outOff ..]}.
   *
   * @return how many finite values saturated, plus {@link Lanes#NON_FINITE} if NaN/Inf were among them (written as
   *     the format writes them)
   */
  long encode(float[] x, int off, int n, byte[] out, int outOff);

  /** The index of the first NaN/Inf code among the {@code n} at {@code in[inOff]}, or -1. */
  int firstNonFinite(byte[] in, int inOff, int n);

  /** {@code out[outOff + i] (+)= } the value of code i, for the {@code n} codes at {@code in[inOff]}. */
  void decode(byte[] in, int inOff, int n, float[] out, int outOff, boolean accumulate);
}
