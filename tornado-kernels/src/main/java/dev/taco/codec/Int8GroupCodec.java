package dev.taco.codec;

import dev.taco.kernels.GroupKernels;

/**
 * {@code int8-group} (codec id 3): per-group symmetric INT8 (docs/design.md §3 baselines; as in Flash Communication,
 * arXiv 2412.04964). Groups of {@code G} contiguous values along each row (G a power of two, 32..256, default 128;
 * the last group of a row may be short, no padding is sent), one float32 absmax {@code a} per group (scale
 * {@code a/127}), codes {@code rint(127 x / a)} in [-127, 127], round-to-nearest-even. Per value the absolute error
 * is at most {@code a/254} (plus float32 rounding). Wire cost {@code 1 + 4/G} bytes per element (about 1.03 at
 * G = 128) plus the 28-byte header. Kernels: {@link GroupKernels}. Header: format 0, flags 0, G.
 */
public final class Int8GroupCodec extends GroupQuantCodec {

  /** Default group size. */
  public static final int DEFAULT_GROUP = 128;

  /** With {@link #DEFAULT_GROUP}, refusing NaN/Inf. */
  public Int8GroupCodec() {
    this(DEFAULT_GROUP);
  }

  /**
   * @param groupSize G, a power of two in 32..256
   * @throws IllegalArgumentException otherwise
   */
  public Int8GroupCodec(int groupSize) {
    this(groupSize, NonFinite.REFUSE);
  }

  /**
   * @param groupSize G, a power of two in 32..256
   * @param nonFinite NaN/Inf policy
   * @throws IllegalArgumentException for a bad G
   */
  public Int8GroupCodec(int groupSize, NonFinite nonFinite) {
    super("int8-group", PayloadHeader.INT8_GROUP, groupSize, GroupKernels.INT8, false, nonFinite);
  }

  /**
   * This codec with group size {@code groupSize} (same NaN/Inf policy): the candidate plans of a calibration.
   *
   * @throws IllegalArgumentException for a bad G
   */
  public Int8GroupCodec withGroupSize(int groupSize) {
    return new Int8GroupCodec(groupSize, nonFinite());
  }
}
