package dev.taco.codec;

import dev.taco.kernels.Bytes;

/**
 * {@code fp32}: exact float32 on the wire, 4 bytes per element plus the header (for exact reference runs).
 * Body: {@code rows*cols} float32 little-endian, row-major. Header: format 0, flags 0, G 0. A body value that is
 * NaN or Inf is rejected as malformed unless the header's non-finite flag is set (policy propagate).
 */
public final class Fp32Codec extends AbstractCodec {

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
  protected PayloadHeader header(int rows, int cols) {
    return new PayloadHeader(codecId(), 0, 0, 0, rows, cols);
  }

  @Override
  protected void checkHeader(PayloadHeader h) {
    expectFields(h, 0, 0, 0);
  }

  @Override
  protected long bodyLength(PayloadHeader h) {
    return 4L * h.rows() * h.cols();
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    for (int i = 0; i < h.count(); i++) {
      Bytes.putFloat(out, bodyOff + 4 * i, x[off + i]);
    }
    return 0;
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    for (int i = 0; !h.nonFinite() && i < h.count(); i++) {
      if (!Float.isFinite(Bytes.getFloat(in, bodyOff + 4 * i))) {
        return "non-finite value at element " + i;
      }
    }
    return null;
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    for (int i = 0; i < h.count(); i++) {
      float v = Bytes.getFloat(in, bodyOff + 4 * i);
      out[outOff + i] = accumulate ? out[outOff + i] + v : v;
    }
  }
}
