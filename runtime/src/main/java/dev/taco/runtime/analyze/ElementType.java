package dev.taco.runtime.analyze;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The little-endian floating-point element types the readers accept, and the one bounded, chunked read of a
 * file region into float32 that both readers share.
 */
public enum ElementType {
  /** IEEE binary16; widened to float32 exactly. */
  F16(2),
  /** bfloat16 (the upper half of a float32); widened exactly. */
  BF16(2),
  /** IEEE binary32. */
  F32(4),
  /** IEEE binary64; rounded to the nearest float32. */
  F64(8);

  private static final Logger log = LoggerFactory.getLogger(ElementType.class);
  private static final int CHUNK = 1 << 20;

  /** The most elements one tensor may have (the largest safe Java array). */
  public static final long MAX_ELEMENTS = Integer.MAX_VALUE - 8;

  /** Bytes per element. */
  public final int size;

  ElementType(int size) {
    this.size = size;
  }

  /**
   * Reads {@code count} elements starting at byte {@code pos} of {@code ch}. The caller has checked that the
   * region lies inside the file (so {@code count} is bounded by the file size). Float64 values that float32 cannot
   * hold are counted and logged as one warning naming the file and tensor ({@link #narrowingLoss}).
   *
   * @param name the tensor's name in the file, for the warning ("" for a single-tensor file)
   * @throws TensorFileException if the file ends early (it changed under us)
   */
  float[] read(FileChannel ch, Path file, String name, long pos, int count) throws IOException {
    float[] out = new float[count];
    ByteBuffer buf = ByteBuffer.allocate((int) Math.min((long) count * size, CHUNK)).order(ByteOrder.LITTLE_ENDIAN);
    int i = 0;
    long p = pos;
    long infinite = 0;
    long flushed = 0;
    while (i < count) {
      buf.clear().limit((int) Math.min((long) (count - i) * size, buf.capacity()));
      while (buf.hasRemaining()) {
        int n = ch.read(buf, p);
        if (n < 0) {
          throw new TensorFileException(file, "truncated: data ends at byte " + p);
        }
        p += n;
      }
      buf.flip();
      while (buf.hasRemaining()) {
        out[i++] = switch (this) {
          case F16 -> Float.float16ToFloat(buf.getShort());
          case BF16 -> Float.intBitsToFloat((buf.getShort() & 0xffff) << 16);
          case F32 -> buf.getFloat();
          case F64 -> {
            double d = buf.getDouble();
            float f = (float) d;
            infinite += Float.isInfinite(f) ? 1 : 0;
            flushed += f == 0f && d != 0 ? 1 : 0;
            yield f;
          }
        };
      }
    }
    String loss = narrowingLoss(infinite, flushed);
    if (loss != null) {
      log.warn("{}{}: {}", file, name.isEmpty() ? "" : ":" + name, loss);
    }
    return out;
  }

  /**
   * What rounding float64 data to float32 lost, as a warning's text, or null when nothing was lost.
   *
   * @param infinite values infinite in float32 (beyond its range of about 3.4e38, or infinite in the file)
   * @param flushed nonzero values that became 0 (below half float32's smallest subnormal, about 7e-46)
   */
  static String narrowingLoss(long infinite, long flushed) {
    if (infinite == 0 && flushed == 0) {
      return null;
    }
    String inf = infinite == 0 ? null
        : infinite + " float64 values are infinite in float32 (out of range, or infinite in the file)";
    String zero = flushed == 0 ? null
        : flushed + " nonzero float64 values are 0 in float32 (below half its smallest subnormal, 1.4e-45)";
    return inf == null ? zero : zero == null ? inf : inf + "; " + zero;
  }

  /**
   * {@code product(shape) * size} in bytes, checking every dimension is &ge; 0 and the element count fits one
   * Java array.
   *
   * @throws TensorFileException naming {@code what} otherwise
   */
  long byteLength(long[] shape, Path file, String what) {
    long n = 1;
    boolean empty = false;
    boolean tooLarge = false;
    for (long d : shape) {
      if (d < 0) {
        throw new TensorFileException(file, what + ": negative dimension " + d);
      }
      if (d > Integer.MAX_VALUE) {
        throw new TensorFileException(file, what + ": dimension " + d + " exceeds 2^31-1");
      }
      if (d == 0) {
        empty = true;
      } else if (d > MAX_ELEMENTS || n > MAX_ELEMENTS / d) {
        tooLarge = true;
      } else {
        n *= d;
      }
    }
    if (empty) {
      return 0;
    }
    if (tooLarge) {
      throw new TensorFileException(file, what + ": more than 2^31-9 elements, too large for one float32 array");
    }
    return n * size;
  }
}
