package dev.taco.codec;

import dev.taco.kernels.GroupKernels;

/**
 * {@code hadamard-int8} (codec id 8): orthonormal Walsh-Hadamard transform of each group, then per-group INT8, in
 * the style of QuaRot (arXiv 2404.00456) and QuIP# (arXiv 2402.04396), which rotate to spread outliers before
 * integer quantisation (docs/design.md §3 baselines). Groups of {@code G} contiguous values along each row (G a power of
 * two, 32..256, default 128), the last one of a row zero-padded to G (the padding is sent, since the transform
 * mixes it). Per group the transformed absmax {@code a} is stored; codes {@code rint(127 w / a)}; decode inverts
 * the quantisation, then the transform (its own inverse). Error per value after the inverse transform: RMS at most
 * {@code a / (254 sqrt(3))}-ish, spread evenly over the group. Wire cost {@code 1 + 4/G} bytes per element (plus
 * padding when cols is not a multiple of G) plus the header. Kernels: {@link GroupKernels},
 * {@link dev.taco.kernels.Hadamard}. Header: format 0, flags 1 (Hadamard), G.
 */
public final class HadamardInt8Codec extends GroupQuantCodec {

  /** Default group size. */
  public static final int DEFAULT_GROUP = 128;

  /**
   * @param groupSize G, a power of two in 32..256
   * @param nonFinite NaN/Inf policy
   * @throws IllegalArgumentException for a bad G
   */
  public HadamardInt8Codec(int groupSize, NonFinite nonFinite) {
    super("hadamard-int8", PayloadHeader.HADAMARD_INT8, groupSize, GroupKernels.INT8, true, nonFinite);
  }
}
