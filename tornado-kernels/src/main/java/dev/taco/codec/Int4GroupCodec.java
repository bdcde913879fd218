package dev.taco.codec;

import dev.taco.kernels.GroupKernels;

/**
 * {@code int4-group} (codec id 7): per-group symmetric INT4, two values a byte (docs/design.md §3 baselines). Groups of
 * {@code G} contiguous values along each row (G a power of two, 32..256, default 32), one float32 absmax {@code a}
 * per group, codes {@code rint(7 x / a)} in [-7, 7] (-8 is reserved for NaN under {@code nonfinite=propagate}),
 * round-to-nearest-even. Per value the absolute error is at most {@code a/14}: about 10 % relative L2 error on
 * Gaussian data. Wire cost {@code 0.5 + 4/G} bytes per element (0.625 at G = 32; an odd row gets one padding
 * nibble) plus the header. Kernels: {@link GroupKernels}. Header: format 0, flags 0, G.
 */
public final class Int4GroupCodec extends GroupQuantCodec {

  /** Default group size. */
  public static final int DEFAULT_GROUP = 32;

  /**
   * @param groupSize G, a power of two in 32..256
   * @param nonFinite NaN/Inf policy
   * @throws IllegalArgumentException for a bad G
   */
  public Int4GroupCodec(int groupSize, NonFinite nonFinite) {
    super("int4-group", PayloadHeader.INT4_GROUP, groupSize, GroupKernels.INT4, false, nonFinite);
  }
}
