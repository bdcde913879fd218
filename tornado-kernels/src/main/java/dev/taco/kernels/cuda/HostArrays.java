package dev.taco.kernels.cuda;

import com.sun.jna.Pointer;

/**
 * Helpers for Java primitive arrays used as host data: element sizes and copies between an array
 * and native memory. Supported: {@code float[]}, {@code double[]}, {@code int[]}, {@code long[]},
 * {@code short[]} (e.g. bf16 bits), {@code byte[]} (e.g. FP8 payloads).
 */
public final class HostArrays {
  private HostArrays() {}

  /**
   * @param array a supported primitive array
   * @return bytes per element (1, 2, 4 or 8)
   * @throws IllegalArgumentException if {@code array} is not a supported primitive array
   */
  public static int elementBytes(Object array) {
    return switch (array) {
      case float[] a -> 4;
      case int[] a -> 4;
      case short[] a -> 2;
      case byte[] a -> 1;
      case double[] a -> 8;
      case long[] a -> 8;
      case null -> throw new IllegalArgumentException("host array is null");
      default -> throw new IllegalArgumentException("unsupported host array type " + array.getClass().getSimpleName()
          + " (float[], double[], int[], long[], short[], byte[])");
    };
  }

  /**
   * @param array a supported primitive array
   * @return its length in elements
   * @throws IllegalArgumentException if {@code array} is not a supported primitive array
   */
  public static int length(Object array) {
    elementBytes(array);
    return java.lang.reflect.Array.getLength(array);
  }

  /**
   * @param array a supported primitive array
   * @return its size in bytes
   * @throws IllegalArgumentException if {@code array} is not a supported primitive array
   */
  public static long byteSize(Object array) {
    return (long) length(array) * elementBytes(array);
  }

  /**
   * Copies {@code count} elements of {@code array} from index {@code from} to native memory.
   *
   * @param dst       native memory
   * @param dstOffset byte offset into {@code dst}
   * @param array     source array
   * @param from      first element
   * @param count     element count
   * @throws IllegalArgumentException for an unsupported array type
   * @throws IndexOutOfBoundsException if the range is outside the array
   */
  public static void write(Pointer dst, long dstOffset, Object array, int from, int count) {
    java.util.Objects.checkFromIndexSize(from, count, length(array));
    switch (array) {
      case float[] a -> dst.write(dstOffset, a, from, count);
      case int[] a -> dst.write(dstOffset, a, from, count);
      case short[] a -> dst.write(dstOffset, a, from, count);
      case byte[] a -> dst.write(dstOffset, a, from, count);
      case double[] a -> dst.write(dstOffset, a, from, count);
      case long[] a -> dst.write(dstOffset, a, from, count);
      default -> throw new IllegalArgumentException("unsupported host array type");
    }
  }

  /**
   * Copies {@code count} elements from native memory into {@code array} at index {@code from}.
   *
   * @param src       native memory
   * @param srcOffset byte offset into {@code src}
   * @param array     destination array
   * @param from      first element
   * @param count     element count
   * @throws IllegalArgumentException for an unsupported array type
   * @throws IndexOutOfBoundsException if the range is outside the array
   */
  public static void read(Pointer src, long srcOffset, Object array, int from, int count) {
    java.util.Objects.checkFromIndexSize(from, count, length(array));
    switch (array) {
      case float[] a -> src.read(srcOffset, a, from, count);
      case int[] a -> src.read(srcOffset, a, from, count);
      case short[] a -> src.read(srcOffset, a, from, count);
      case byte[] a -> src.read(srcOffset, a, from, count);
      case double[] a -> src.read(srcOffset, a, from, count);
      case long[] a -> src.read(srcOffset, a, from, count);
      default -> throw new IllegalArgumentException("unsupported host array type");
    }
  }
}
