package dev.taco.codec;

import dev.taco.kernels.GroupKernels;

/**
 * {@code fp8-group} (codec id 6): per-group absmax-scaled OCP FP8 E4M3 (OCP 8-bit Floating Point Specification
 * rev. 1.0), no transform, a single fp32 scale level (docs/design.md §3 baselines). Groups of {@code G} contiguous values
 * along each row (G a power of two, 32..256, default 128), one float32 absmax {@code a} per group; codes
 * {@code E4M3(448 x / a)}, round-to-nearest-even. Per value the relative error is at most 2^-4 while
 * {@code 448 |x| / a >= 2^-6} (E4M3's normal range), else the absolute error is at most {@code 2^-10 a / 448}.
 * Wire cost {@code 1 + 4/G} bytes per element plus the header. Kernels: {@link GroupKernels}. Header: format 1
 * (E4M3), flags 0, G.
 */
public final class Fp8GroupCodec extends GroupQuantCodec {

  /** Default group size. */
  public static final int DEFAULT_GROUP = 128;

  /**
   * @param groupSize G, a power of two in 32..256
   * @param nonFinite NaN/Inf policy
   * @throws IllegalArgumentException for a bad G
   */
  public Fp8GroupCodec(int groupSize, NonFinite nonFinite) {
    super("fp8-group", PayloadHeader.FP8_GROUP, groupSize, GroupKernels.E4M3, false, nonFinite);
  }
}
