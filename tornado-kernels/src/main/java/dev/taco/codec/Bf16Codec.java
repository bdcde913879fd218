package dev.taco.codec;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Bytes;

/**
 * {@code none}: bfloat16 on the wire, 2 bytes per element plus the header: what Megatron-LM sends under mixed
 * precision. Body: {@code rows*cols} bf16 codes, little-endian, row-major, rounded to nearest even; a finite value
 * beyond bf16's max (about 3.3895e38) saturates to +-max instead of becoming Inf (counted as saturated).
 * Header: format 0, flags 0, G 0. Inf/NaN codes in a body are rejected as malformed unless the header's non-finite
 * flag is set (policy propagate: NaN and +-Inf are sent as bf16 NaN and +-Inf).
 */
public final class Bf16Codec extends AbstractCodec {

  /** Policy {@link NonFinite#REFUSE}. */
  public Bf16Codec() {
    this(NonFinite.REFUSE);
  }

  /** @param nonFinite NaN/Inf policy (propagate: NaN and +-Inf are sent as they are) */
  public Bf16Codec(NonFinite nonFinite) {
    super(nonFinite);
  }

  @Override
  public String name() {
    return "none";
  }

  @Override
  protected int codecId() {
    return PayloadHeader.BF16;
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
    return 2L * h.rows() * h.cols();
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    long sat = 0;
    for (int i = 0; i < h.count(); i++) {
      short c = Bf16.encodeSaturating(x[off + i]);
      if (c != Bf16.encode(x[off + i])) {
        sat++;
      }
      Bytes.putU16(out, bodyOff + 2 * i, c);
    }
    return sat;
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    for (int i = 0; !h.nonFinite() && i < h.count(); i++) {
      if (Bf16.isNonFinite((short) Bytes.getU16(in, bodyOff + 2 * i))) {
        return "non-finite bf16 code at element " + i;
      }
    }
    return null;
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    for (int i = 0; i < h.count(); i++) {
      float v = Bf16.decode((short) Bytes.getU16(in, bodyOff + 2 * i));
      out[outOff + i] = accumulate ? out[outOff + i] + v : v;
    }
  }
}
