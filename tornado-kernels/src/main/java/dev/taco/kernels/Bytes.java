package dev.taco.kernels;

/** Little-endian loads and stores on byte arrays (kernel style: shifts only, no objects). */
public final class Bytes {
  private Bytes() {}

  /** Stores the low 16 bits of {@code v} at {@code b[off..off+2)}, little-endian. */
  public static void putU16(byte[] b, int off, int v) {
    b[off] = (byte) v;
    b[off + 1] = (byte) (v >>> 8);
  }

  /** Loads an unsigned 16-bit little-endian value. */
  public static int getU16(byte[] b, int off) {
    return (b[off] & 0xFF) | (b[off + 1] & 0xFF) << 8;
  }

  /** Stores {@code v} at {@code b[off..off+4)}, little-endian. */
  public static void putInt(byte[] b, int off, int v) {
    b[off] = (byte) v;
    b[off + 1] = (byte) (v >>> 8);
    b[off + 2] = (byte) (v >>> 16);
    b[off + 3] = (byte) (v >>> 24);
  }

  /** Loads a 32-bit little-endian value. */
  public static int getInt(byte[] b, int off) {
    return (b[off] & 0xFF) | (b[off + 1] & 0xFF) << 8 | (b[off + 2] & 0xFF) << 16 | (b[off + 3] & 0xFF) << 24;
  }

  /** Stores the float32 bits of {@code v}, little-endian. */
  public static void putFloat(byte[] b, int off, float v) {
    putInt(b, off, Float.floatToRawIntBits(v));
  }

  /** Loads a float32, little-endian. */
  public static float getFloat(byte[] b, int off) {
    return Float.intBitsToFloat(getInt(b, off));
  }
}
