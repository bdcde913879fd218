package dev.taco.codec;

import dev.taco.kernels.Fp4;
import dev.taco.kernels.GroupKernels;

/**
 * {@code mxfp4} (codec id 9): OCP MXFP4, E2M1 elements with one E8M0 scale per block of 32 (OCP Microscaling
 * Formats (MX) Specification v1.0, 2023), optionally after a Walsh-Hadamard rotation of each block (QuaRot, arXiv
 * 2404.00456; group-wise as in TAH-Quant) that spreads an outlier over its block (docs/design.md §3 baselines).
 *
 * <p>Rule, per block of 32 contiguous values along a row (the last one of a row short, zero-padded to 32 when
 * transformed): the spec's §6.3 conversion, {@code X = 2^(floor(log2(amax)) - emax_elem)} with {@code emax_elem = 2}
 * for E2M1 and {@code amax} the largest finite magnitude of the block (after the rotation), at least {@code 2^-127}
 * (E8M0's smallest; also an all-zero block's; {@link Fp4#mxScaleCode}); each value {@code v / X} rounded to the
 * nearest E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to even, and clamped to +-6 on saturation, which the rule
 * makes happen: it puts {@code amax / X} in [4, 8), and the magnitudes in (6X, 8X) are clipped (counted as saturated,
 * up to a quarter of the value). Decode is {@code E2M1 * X}, exact. Per value the error is at most
 * {@code |v| / 4 + X / 4} (E2M1's half ulp: a quarter of the binade from 1 up, 0.25 below; a clipped value loses at
 * most {@code |v| / 4}).
 *
 * <p>Wire format: {@link PayloadHeader} (format 0, flags bit0 Hadamard, G 32), then one E8M0 byte per block (rows x
 * ceil(cols/32), row-major), then the codes two a byte (element 2j in the low nibble), each row padded to a whole
 * byte ({@code 32 * ceil(cols/32)} codes a row when transformed): 0.5 + 1/32 bytes per element, 0.266 of bf16's. A
 * decoder rejects an E8M0 scale of 0xFF (NaN in MX) and any above 2^120 (none comes from input the encoder takes).
 * NaN/Inf: as {@link GroupKernels} (marker nibble 0x8, -0, under {@code nonfinite=propagate}; a transformed block
 * holding one is sent untransformed). Finite magnitudes above 2^119 are refused. Kernels: {@link GroupKernels}
 * ({@link GroupKernels#MXFP4}; on lanes {@code kernels.simd.Fp4Lanes}); GPU: {@code kernels.gpu.GroupTwoShotKernels}.
 */
public final class MxFp4Codec extends GroupQuantCodec {

  /**
   * Rotation on by default (the spelling {@code mxfp4} alone), by measurement (CodecTableTest, docs/codecs.md): the
   * same error on Gaussian data either way, and lower with it on outlier channels, where the scale rule clips the
   * block's outlier by up to a quarter and the rotation lowers the block's peak.
   */
  public static final boolean DEFAULT_HADAMARD = true;

  /**
   * @param hadamard rotate each block of 32 with the orthonormal Walsh-Hadamard transform first
   * @param nonFinite NaN/Inf policy
   */
  public MxFp4Codec(boolean hadamard, NonFinite nonFinite) {
    super("mxfp4", PayloadHeader.MXFP4, GroupKernels.blockSize(GroupKernels.MXFP4), GroupKernels.MXFP4, hadamard,
        nonFinite);
  }
}
