package dev.taco.codec;

import dev.taco.kernels.simd.ElementLanes;
import dev.taco.kernels.simd.Simd;
import java.util.zip.CRC32;

/**
 * A codec that sends each element on its own, with no scales: {@code fp32} (exact) and {@code none} (bf16). Body:
 * {@code rows*cols} codes of {@link #width()} bytes, little-endian, row-major. Header: format 0, flags 0, G 0. A
 * non-finite code in a body is malformed unless the header's non-finite flag is set (policy propagate).
 */
abstract class ElementCodec extends AbstractCodec {

  ElementCodec(NonFinite nonFinite) {
    super(nonFinite);
  }

  /** Bytes per element on the wire. */
  abstract int width();

  /** Writes the code of {@code v} at {@code out[off]}; returns true if {@code v} saturated. */
  abstract boolean put(byte[] out, int off, float v);

  /** The value of the code at {@code in[off]}. */
  abstract float get(byte[] in, int off);

  /** The same body ({@link #put}, {@link #get}) on SIMD lanes. */
  abstract ElementLanes lanes();

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
    return (long) width() * h.rows() * h.cols();
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    if (Simd.enabled()) {
      return lanes().encode(x, off, h.count(), out, bodyOff);
    }
    long sat = 0;
    for (int i = 0; i < h.count(); i++) {
      if (put(out, bodyOff + width() * i, x[off + i])) sat++;
    }
    return sat;
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    if (Simd.enabled()) {
      int i = h.nonFinite() ? -1 : lanes().firstNonFinite(in, bodyOff, h.count());
      return i < 0 ? null : "non-finite value at element " + i;
    }
    for (int i = 0; !h.nonFinite() && i < h.count(); i++) {
      if (!Float.isFinite(get(in, bodyOff + width() * i))) return "non-finite value at element " + i;
    }
    return null;
  }

  /** Body bytes a piece of {@link #checkChecksummedBody} (in L2 between its checksum and its scan). */
  private static final int PIECE = 1 << 16;

  /**
   * With SIMD, the checksum and {@link #checkBody}'s scan in one pass, a piece at a time (each piece scanned while it
   * is still in cache from its checksum, instead of a second read of the body from memory); the scan's answer counts
   * only when the checksum matches.
   */
  @Override
  protected String checkChecksummedBody(PayloadHeader h, byte[] in, int bodyOff, int bodyLen, int stored) {
    if (!Simd.enabled()) {
      return super.checkChecksummedBody(h, in, bodyOff, bodyLen, stored);
    }
    CRC32 crc = new CRC32();
    int bad = -1;
    for (int p = 0; p < bodyLen; p += PIECE) {
      int n = Math.min(PIECE, bodyLen - p); // a multiple of width(): PIECE is, and so is the body
      crc.update(in, bodyOff + p, n);
      if (bad < 0 && !h.nonFinite()) {
        int i = lanes().firstNonFinite(in, bodyOff + p, n / width());
        bad = i < 0 ? -1 : p / width() + i;
      }
    }
    String mismatch = checksumMismatch(stored, (int) crc.getValue());
    return mismatch != null ? mismatch : bad < 0 ? null : "non-finite value at element " + bad;
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    if (Simd.enabled()) {
      lanes().decode(in, bodyOff, h.count(), out, outOff, accumulate);
      return;
    }
    for (int i = 0; i < h.count(); i++) {
      float v = get(in, bodyOff + width() * i);
      out[outOff + i] = accumulate ? out[outOff + i] + v : v;
    }
  }
}
