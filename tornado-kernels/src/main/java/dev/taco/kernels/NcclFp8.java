package dev.taco.kernels;

/**
 * NCCL's own FP8 sum, the arithmetic of {@code ncclAllReduce} and {@code ncclReduceScatter} on {@code ncclFloat8e4m3}
 * and {@code ncclFloat8e5m2} (NCCL 2.24 and later, sm90 and later), as scalar kernels (docs/design.md §4.1): the cast a
 * user makes before the call, the reduction NCCL's kernels make inside it, and the cast back.
 *
 * <h2>The scale</h2>
 * One scale for the whole group: every rank's tensor is cast with {@code FP8(x / amax * top)}, where {@code amax} is
 * the largest finite {@code |x|} over every rank's tensor (an all-reduce with {@code ncclMax}) and
 * {@code top = FP8MAX / divisor} ({@link #top}). With {@code divisor} = R no partial sum of R values can pass FP8MAX,
 * so nothing saturates; with 1 the values use the format's whole range and sums of them saturate. A user would write
 * {@code x * (FP8MAX / (R * amax))}; dividing by {@code amax} first keeps float32 clear of overflow for any finite
 * tensor (an {@code amax} below {@code FP8MAX / Float.MAX_VALUE} would make that scale infinite), and changes a code
 * only for a value within a float32 rounding of an FP8 rounding midpoint. The cast back is {@code D(c) / top * amax}.
 *
 * <h2>The sum (NCCL {@code src/device/reduce_kernel.h}, {@code FuncSum}, sm90)</h2>
 * NCCL adds two FP8 values as {@code __nv_fp8_e4m3(__hadd(__half(x), __half(y)))} (packed in pairs by
 * {@code __hadd2}, which rounds each lane alike): both are widened to binary16 (exact: every E4M3 and E5M2 value is a
 * binary16 value), added in binary16 with round-to-nearest-even, and the sum converted back by
 * {@code cvt.rn.satfinite}: round to nearest even, magnitudes beyond FP8MAX (a binary16 infinity included) to
 * {@code ±FP8MAX}, NaN to NaN. {@link #add} computes the float32 sum instead and rounds it once: the sum of two FP8
 * values that binary16 cannot hold exactly has operands more than 7 binades apart, far from any FP8 rounding midpoint,
 * so the binary16 rounding never changes the FP8 result (a test checks every pair of codes of both formats).
 *
 * <h2>The order (NCCL {@code src/device/all_reduce.h} {@code runRing}, {@code reduce_scatter.h})</h2>
 * A ring all-reduce gives chunk {@code c} to ring position {@code c}: position {@code c + 1} sends its own codes of the
 * chunk, every following position adds its own to the partial sum it receives (rounding to FP8 at each hop) and
 * sends it on, and position {@code c} adds its own last and keeps the result, which the all-gather phase then copies to
 * every rank. A ring reduce-scatter sums block {@code b} in the same order, ending at rank {@code b}. {@link #ringSum}
 * is that chain for one element, the ring being ranks {@code 0 → 1 → … → R−1 → 0} and chunk {@code c} rank
 * {@code c}'s rows (a real run's ring order, its channels and its choice of algorithm, NCCL_ALGO, decide which rank
 * starts an element's chain there).
 *
 * <p>Kernel style (docs/design.md §5): static methods on primitives, no allocation; they are device functions of
 * {@code kernels.gpu.NcclFp8Kernels} and run as they are on the host ({@code codec.NcclFp8Codec}).
 */
public final class NcclFp8 {
  private NcclFp8() {}

  /** Bytes of a body before its codes: {@code amax} (float32 LE), then the divisor (int32 LE). */
  public static final int HEADER = 8;

  /** {@code FP8MAX / divisor}: the code the group's largest magnitude is cast to. */
  public static float top(int divisor, int format) {
    return Fp8.maxValue(format) / divisor;
  }

  /**
   * The code of {@code x}: {@code FP8(x / amax * top)}, round to nearest even, saturating ({@link Fp8#encode}); 0 when
   * {@code amax} is 0; NaN gives a NaN code and an infinity the E5M2 infinity of its sign, or the E4M3 NaN (a format
   * without infinities).
   */
  public static int encode(float x, float amax, float top, int format) {
    if (!(Math.abs(x) <= Float.MAX_VALUE)) {
      boolean inf = Float.isInfinite(x) && format == Fp8.E5M2;
      return inf ? (x < 0 ? 0xFC : 0x7C) : Fp8.encode(Math.copySign(Float.NaN, x), format) & 0xFF;
    }
    return Fp8.encode(amax == 0f ? 0f : x / amax * top, format) & 0xFF;
  }

  /** The value of code {@code c}: {@code D(c) / top * amax}; NaN and infinity codes give NaN and infinity. */
  public static float decode(int c, float amax, float top, int format) {
    float d = Fp8.decode((byte) c, format);
    return Math.abs(d) <= Float.MAX_VALUE ? d / top * amax : d;
  }

  /** One hop of NCCL's FP8 sum: the code of {@code D(a) + D(b)}, rounded once, saturating (see the class doc). */
  public static int add(int a, int b, int format) {
    return Fp8.encode(Fp8.decode((byte) a, format) + Fp8.decode((byte) b, format), format) & 0xFF;
  }

  /**
   * The ring's FP8 sum of one element owned by rank {@code me} (see the class doc): {@code world} slots of
   * {@code slotBytes}, the element's code at byte {@code at} of each, slot {@code q} rank q's; the chain starts with
   * rank {@code me + 1}'s code, adds the next ranks' in ring order and {@code me}'s last.
   */
  public static int ringSum(byte[] slots, int slotBytes, int at, int me, int world, int format) {
    int q = me + 1 == world ? 0 : me + 1;
    int acc = slots[q * slotBytes + at] & 0xFF;
    for (int k = 2; k <= world; k++) {
      q = q + 1 == world ? 0 : q + 1;
      acc = add(acc, slots[q * slotBytes + at] & 0xFF, format);
    }
    return acc;
  }
}
