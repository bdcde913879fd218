package dev.taco.runtime.analyze;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/** Builders of hand-made .npy and .safetensors files for tests, and the folder of the library-written fixtures. */
public final class TestFiles {
  private TestFiles() {}

  /** The folder holding make_fixtures.py, expected.json and the files it wrote (test resources). */
  public static Path fixtures() {
    try {
      return Path.of(TestFiles.class.getResource("/analyze/expected.json").toURI()).getParent();
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  /** Little-endian bytes of float32 values. */
  public static byte[] f32(float... v) {
    ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
    for (float x : v) {
      b.putFloat(x);
    }
    return b.array();
  }

  /**
   * A .npy file of the given format major version with the header dict text as given (padded with spaces and a
   * newline to a multiple of 64 bytes, as numpy does) and raw data.
   */
  public static Path npy(Path file, int major, String dict, byte[] data) throws IOException {
    int pre = major == 1 ? 10 : 12;
    StringBuilder h = new StringBuilder(dict);
    while ((pre + h.length() + 1) % 64 != 0) {
      h.append(' ');
    }
    h.append('\n');
    byte[] hb = h.toString().getBytes(StandardCharsets.ISO_8859_1);
    ByteBuffer b = ByteBuffer.allocate(pre + hb.length + data.length).order(ByteOrder.LITTLE_ENDIAN);
    b.put(new byte[] {(byte) 0x93, 'N', 'U', 'M', 'P', 'Y', (byte) major, 0});
    if (major == 1) {
      b.putShort((short) hb.length);
    } else {
      b.putInt(hb.length);
    }
    b.put(hb).put(data);
    return Files.write(file, b.array());
  }

  /** A version 1.0 .npy file of little-endian float32 values. */
  public static Path npyF32(Path file, String shape, float... v) throws IOException {
    return npy(file, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }", f32(v));
  }

  /** A safetensors file: the u64 header length, the header JSON as given (UTF-8), the data section. */
  public static Path safetensors(Path file, String headerJson, byte[] data) throws IOException {
    byte[] h = headerJson.getBytes(StandardCharsets.UTF_8);
    ByteArrayOutputStream o = new ByteArrayOutputStream();
    o.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(h.length).array());
    o.write(h);
    o.write(data);
    return Files.write(file, o.toByteArray());
  }
}
