package dev.taco.codec;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.simd.ElementLanes;

/**
 * {@code fp32}: exact float32 on the wire, 4 bytes per element plus the header (for exact reference runs); layout and
 * checks in {@link ElementCodec}.
 */
public final class Fp32Codec extends ElementCodec {

  /** Policy {@link NonFinite#REFUSE}. */
  public Fp32Codec() {
    this(NonFinite.REFUSE);
  }

  /** @param nonFinite NaN/Inf policy (propagate: NaN and +-Inf are sent as they are) */
  public Fp32Codec(NonFinite nonFinite) {
    super(nonFinite);
  }

  @Override
  public String name() {
    return "fp32";
  }

  @Override
  protected int codecId() {
    return PayloadHeader.FP32;
  }

  @Override
  int width() {
    return 4;
  }

  @Override
  boolean put(byte[] out, int off, float v) {
    Bytes.putFloat(out, off, v);
    return false;
  }

  @Override
  float get(byte[] in, int off) {
    return Bytes.getFloat(in, off);
  }

  @Override
  ElementLanes lanes() {
    return ElementLanes.FP32;
  }
}
