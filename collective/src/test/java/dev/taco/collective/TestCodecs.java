package dev.taco.collective;

import dev.taco.codec.Codec;
import dev.taco.codec.MalformedPayloadException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Small codecs for the collective tests, until the real ones ({@code dev.taco.codec.Codecs.byName}) exist: a
 * 12-byte header (magic, rows, cols as little-endian int32) followed by one fixed-width value per element.
 */
final class TestCodecs {

  private TestCodecs() {}

  /** Exact: float32 values, 4 bytes each. */
  static Codec fp32() {
    return new SimpleCodec("test-fp32", 0x54463332, Float.BYTES) {
      @Override
      void put(ByteBuffer b, float v) {
        b.putFloat(v);
      }

      @Override
      float get(ByteBuffer b) {
        return b.getFloat();
      }
    };
  }

  /** Lossy: bfloat16 values (round to nearest even), 2 bytes each; relative error at most 2^-9 per value. */
  static Codec bf16() {
    return new SimpleCodec("test-bf16", 0x54424631, Short.BYTES) {
      @Override
      void put(ByteBuffer b, float v) {
        int bits = Float.floatToRawIntBits(v);
        b.putShort((short) ((bits + 0x7FFF + ((bits >>> 16) & 1)) >>> 16));
      }

      @Override
      float get(ByteBuffer b) {
        return Float.intBitsToFloat((b.getShort() & 0xFFFF) << 16);
      }
    };
  }

  private abstract static class SimpleCodec implements Codec {
    private static final int HEADER = 12;
    private final String name;
    private final int magic;
    private final int width;

    SimpleCodec(String name, int magic, int width) {
      this.name = name;
      this.magic = magic;
      this.width = width;
    }

    abstract void put(ByteBuffer b, float v);

    abstract float get(ByteBuffer b);

    @Override
    public String name() {
      return name;
    }

    @Override
    public int encodedSize(int rows, int cols) {
      if (rows <= 0 || cols <= 0) {
        throw new IllegalArgumentException(name + ": shape must be positive, got " + rows + " x " + cols);
      }
      return Math.toIntExact(HEADER + (long) rows * cols * width);
    }

    @Override
    public int encode(float[] x, int off, int rows, int cols, byte[] out, int outOff) {
      int size = encodedSize(rows, cols);
      if (out.length - outOff < size) {
        throw new IllegalArgumentException(name + ": output too small");
      }
      int n = rows * cols;
      for (int i = 0; i < n; i++) {
        if (!Float.isFinite(x[off + i])) {
          throw new IllegalArgumentException(name + ": non-finite input at index " + i);
        }
      }
      ByteBuffer b = ByteBuffer.wrap(out, outOff, size).order(ByteOrder.LITTLE_ENDIAN);
      b.putInt(magic).putInt(rows).putInt(cols);
      for (int i = 0; i < n; i++) {
        put(b, x[off + i]);
      }
      return size;
    }

    @Override
    public int decode(byte[] in, int inOff, int len, float[] out, int outOff, boolean accumulate) {
      if (len < HEADER) {
        throw new MalformedPayloadException(name + ": truncated header (" + len + " bytes)");
      }
      ByteBuffer b = ByteBuffer.wrap(in, inOff, len).order(ByteOrder.LITTLE_ENDIAN);
      int m = b.getInt();
      int rows = b.getInt();
      int cols = b.getInt();
      if (m != magic || rows <= 0 || cols <= 0 || (long) rows * cols * width + HEADER != len) {
        throw new MalformedPayloadException(name + ": bad header or length");
      }
      int n = rows * cols;
      for (int i = 0; i < n; i++) {
        float v = get(b);
        out[outOff + i] = accumulate ? out[outOff + i] + v : v;
      }
      return n;
    }
  }
}
