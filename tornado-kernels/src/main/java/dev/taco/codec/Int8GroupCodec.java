package dev.taco.codec;

import dev.taco.kernels.Int8Kernels;
import dev.taco.kernels.TacoKernels;

/**
 * {@code int8-group}: per-group symmetric INT8 (DESIGN §3 baselines; Flash Communication). Groups of {@code G}
 * contiguous values along each row (G a power of two, 32..256, default 128; the last group of a row may be
 * short), one float32 absmax per group (scale = absmax/127), int8 codes in [-127, 127] by round-to-nearest-even.
 * Wire cost {@code 1 + 4/G} bytes per element (about 1.03 at G = 128) plus the header. Kernels:
 * {@link Int8Kernels}. Header: format 0, flags 0, G.
 */
public final class Int8GroupCodec extends AbstractCodec {

  /** Default group size. */
  public static final int DEFAULT_GROUP = 128;

  private final int groupSize;

  /** With {@link #DEFAULT_GROUP}. */
  public Int8GroupCodec() {
    this(DEFAULT_GROUP);
  }

  /**
   * @param groupSize G, a power of two in 32..256
   * @throws IllegalArgumentException otherwise
   */
  public Int8GroupCodec(int groupSize) {
    if (!PayloadHeader.validGroupSize(groupSize)) {
      throw new IllegalArgumentException("int8-group: group size must be a power of two in 32..256, got "
          + groupSize);
    }
    this.groupSize = groupSize;
  }

  /** The group size G this codec encodes with. */
  public int groupSize() {
    return groupSize;
  }

  @Override
  public String name() {
    return "int8-group";
  }

  @Override
  protected int codecId() {
    return PayloadHeader.INT8_GROUP;
  }

  @Override
  protected PayloadHeader header(int rows, int cols) {
    return new PayloadHeader(codecId(), 0, 0, groupSize, rows, cols);
  }

  @Override
  protected void checkHeader(PayloadHeader h) {
    if (!PayloadHeader.validGroupSize(h.groupSize())) {
      throw PayloadHeader.bad(name(), "group size " + h.groupSize() + " is not a power of two in 32..256");
    }
    expectFields(h, 0, 0, h.groupSize());
  }

  private static long scales(PayloadHeader h) {
    return (long) h.rows() * TacoKernels.groupsPerRow(h.cols(), h.groupSize());
  }

  @Override
  protected long bodyLength(PayloadHeader h) {
    return 4 * scales(h) + (long) h.rows() * h.cols();
  }

  @Override
  protected long encodeBody(PayloadHeader h, float[] x, int off, byte[] out, int bodyOff) {
    Int8Kernels.encode(x, off, h.rows(), h.cols(), h.groupSize(), out, bodyOff, bodyOff + (int) (4 * scales(h)));
    return 0; // |x/absmax| <= 1, so no code can exceed 127
  }

  @Override
  protected String checkBody(PayloadHeader h, byte[] in, int bodyOff) {
    int ns = (int) scales(h);
    long bad = Int8Kernels.firstInvalid(in, bodyOff, bodyOff + 4 * ns, ns, h.count());
    if (bad < 0) {
      return null;
    }
    return bad < ns ? "group " + bad + " has a negative or non-finite scale" : "code -128 at element " + (bad - ns);
  }

  @Override
  protected void decodeBody(PayloadHeader h, byte[] in, int bodyOff, float[] out, int outOff, boolean accumulate) {
    Int8Kernels.decode(in, bodyOff, bodyOff + (int) (4 * scales(h)), h.rows(), h.cols(), h.groupSize(), out, outOff,
        accumulate);
  }

  @Override
  public String toString() {
    return "int8-group:g=" + groupSize;
  }
}
