package dev.taco.codec;

import dev.taco.kernels.Bytes;
import dev.taco.kernels.simd.Fp32Lanes;

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
  long putLanes(float[] x, int off, int n, byte[] out, int outOff) {
    Fp32Lanes.encode(x, off, n, out, outOff);
    return 0;
  }

  @Override
  int firstNonFiniteLanes(byte[] in, int inOff, int n) {
    return Fp32Lanes.firstNonFinite(in, inOff, n);
  }

  @Override
  void getLanes(byte[] in, int inOff, int n, float[] out, int outOff, boolean accumulate) {
    Fp32Lanes.decode(in, inOff, n, out, outOff, accumulate);
  }
}
