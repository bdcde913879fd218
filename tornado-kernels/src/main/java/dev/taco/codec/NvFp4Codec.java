package dev.taco.codec;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;

/**
 * {@code nvfp4} (codec id 10): NVIDIA's NVFP4, E2M1 elements with one E4M3 scale per block of 16 and a float32 second
 * level, here one per row so that a row can be coded alone, as the collectives code chunks of rows (Transformer
 * Engine's per-token NVFP4 does the same); optionally after a Walsh-Hadamard rotation of each block (QuaRot, arXiv
 * 2404.00456; group-wise as in TAH-Quant; docs/design.md §3 baselines).
 *
 * <p>Rule (NVIDIA Transformer Engine's NVFP4 recipe, {@code core_nvfp4.cuh}: block decode scale = block amax / 6 in
 * E4M3, in units of a second-level decode scale {@code amax / (6 * 448)}), per row of absmax {@code A} (the largest
 * of its blocks' {@code m}) and block of 16 of largest finite magnitude {@code m} (after the rotation): the E4M3 block
 * scale {@code s = E4M3(m / A * 448)} (round to nearest even, {@link Fp8#encodeE4M3}; the row's largest block gets
 * 448, the top of E4M3's range), the block's decode scale {@code d = E4M3(s) * (A / 2688)}, each value
 * {@code E2M1(v / d)} (nearest, ties to even, clamped to +-6; 0 where {@code d = 0}), decode {@code E2M1 * d}. Two
 * deliberate differences from TE: the row's float32 is its absmax {@code A} (TE stores {@code 1 / S_enc} with
 * {@code S_enc = 2688 / A}), and the values are divided by {@code d} (one rounding) instead of multiplied by a
 * rounded reciprocal. Where E4M3 rounded {@code s} down, values up to {@code 6 (1 + 2^-4) d} are clipped to
 * {@code 6 d} (counted as saturated); a block below about {@code 2^-19 A} gets {@code s = 0} and decodes to zeros.
 * Per value the error is at most {@code |v| / 4 + d / 4}.
 *
 * <p>Wire format: {@link PayloadHeader} (format 0, flags bit0 Hadamard, G 16), then one float32 LE row absmax per
 * row, one E4M3 byte per block (rows x ceil(cols/16)), then the codes two a byte (element 2j in the low nibble), each
 * row padded to a whole byte ({@code 16 * ceil(cols/16)} codes a row when transformed): 0.5 + 1/16 + 4/cols bytes per
 * element, 0.284 of bf16's at cols = 768. A decoder rejects a negative or NaN E4M3 block scale and a row absmax that
 * is negative, non-finite or above 2^123. NaN/Inf: as {@link GroupKernels} (marker nibble 0x8 under
 * {@code nonfinite=propagate}; a transformed block holding one is sent untransformed). Finite magnitudes above 2^119
 * are refused. Kernels: {@link GroupKernels} ({@link GroupKernels#NVFP4}; on lanes {@code kernels.simd.Fp4Lanes});
 * GPU: {@code kernels.gpu.GroupTwoShotKernels}.
 */
public final class NvFp4Codec extends GroupQuantCodec {

  /**
   * No rotation by default (the spelling {@code nvfp4} alone), by measurement (CodecTableTest, docs/codecs.md): the
   * same error on Gaussian data either way, and lower without it on outlier channels, whose block scale follows the
   * outlier to E4M3's precision while the rotation spreads E2M1's coarse step onto it.
   */
  public static final boolean DEFAULT_HADAMARD = false;

  /**
   * @param hadamard rotate each block of 16 with the orthonormal Walsh-Hadamard transform first
   * @param nonFinite NaN/Inf policy
   */
  public NvFp4Codec(boolean hadamard, NonFinite nonFinite) {
    super("nvfp4", PayloadHeader.NVFP4, GroupKernels.blockSize(GroupKernels.NVFP4), GroupKernels.NVFP4, hadamard,
        nonFinite);
  }
}
