package dev.taco.runtime.analyze;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;

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

  private static final int CHUNK = 1 << 20;

  /** The most elements one tensor may have (the largest safe Java array). */
  public static final long MAX_ELEMENTS = Integer.MAX_VALUE - 8;

  /** Bytes per element. */
  public final int size;

  ElementType(int size) {
    this.size = size;
  }

  /** Reads one element from {@code b} (little-endian, relative get) as float32. */
  float get(ByteBuffer b) {
    return switch (this) {
      case F16 -> Float.float16ToFloat(b.getShort());
      case BF16 -> Float.intBitsToFloat((b.getShort() & 0xffff) << 16);
      case F32 -> b.getFloat();
      case F64 -> (float) b.getDouble();
    };
  }

  /**
   * Reads {@code count} elements starting at byte {@code pos} of {@code ch}. The caller has checked that the
   * region lies inside the file (so {@code count} is bounded by the file size).
   *
   * @throws TensorFileException if the file ends early (it changed under us)
   */
  float[] read(FileChannel ch, Path file, long pos, int count) throws IOException {
    float[] out = new float[count];
    ByteBuffer buf = ByteBuffer.allocate((int) Math.min((long) count * size, CHUNK)).order(ByteOrder.LITTLE_ENDIAN);
    int i = 0;
    long p = pos;
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
        out[i++] = get(buf);
      }
    }
    return out;
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
