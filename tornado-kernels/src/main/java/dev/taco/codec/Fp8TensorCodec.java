package dev.taco.codec;

import dev.taco.kernels.GroupKernels;

/**
 * {@code fp8-tensor} (codec id 5): OCP FP8 E4M3 with one float32 scale per tensor (the plain FP8 cast of
 * Transformer-Engine-style per-tensor scaling; docs/design.md §3 baselines): the tensor's absmax {@code a} is stored, codes
 * are {@code E4M3(448 x / a)}, round-to-nearest-even. Values below {@code 2^-16 a} (half the smallest E4M3
 * subnormal, relative to 448) decode to 0: this codec shows the zero collapse that per-group scales avoid. Per
 * value: relative error at most 2^-4 in E4M3's normal range ({@code 448 |x| / a >= 2^-6}), else absolute error at
 * most {@code 2^-10 a / 448}. Wire cost {@code 1 + 4/n} bytes per element plus the header. Kernels: {@link
 * GroupKernels} (one group spanning the tensor). Header: format 1 (E4M3), flags 0, G 0.
 */
public final class Fp8TensorCodec extends GroupQuantCodec {

  /** Refusing NaN/Inf. */
  public Fp8TensorCodec() {
    this(NonFinite.REFUSE);
  }

  /** @param nonFinite NaN/Inf policy */
  public Fp8TensorCodec(NonFinite nonFinite) {
    super("fp8-tensor", PayloadHeader.FP8_TENSOR, 0, GroupKernels.E4M3, false, nonFinite);
  }
}
