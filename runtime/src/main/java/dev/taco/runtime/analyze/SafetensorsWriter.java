package dev.taco.runtime.analyze;

import com.google.gson.Gson;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Writes float32 tensors as a safetensors file (huggingface/safetensors, "Format"): an 8-byte little-endian header
 * length N, N bytes of JSON ({@code {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {...}}}, padded with spaces to a multiple of 8 so the data is aligned), then the tensors' bytes,
 * little-endian, in the order given, tiling the data section. {@link SafetensorsReader} reads it back, as do the
 * safetensors library and PyTorch. The file is flushed to the disk ({@code fsync}) before this returns.
 */
public final class SafetensorsWriter {
  private SafetensorsWriter() {}

  /**
   * One tensor to write: {@code data[offset, offset + product(shape))}, row-major.
   *
   * @param name its name in the header (unique, not {@code __metadata__})
   * @param shape its dimensions (empty for a scalar)
   */
  public record Tensor(String name, int[] shape, float[] data, int offset) {
    long elements() {
      long n = 1;
      for (int d : shape) n *= d;
      return n;
    }
  }

  /**
   * Writes {@code tensors} (and string {@code metadata}, which may be empty) to {@code file}, replacing it. The same
   * tensors and metadata give the same bytes in every JVM: the metadata's keys sorted, each tensor's fields in a fixed
   * order.
   *
   * @throws IllegalArgumentException for a duplicate or reserved name, a negative dimension, or a tensor whose shape
   *     needs more elements than its array holds from its offset
   * @throws IOException if the file cannot be written
   */
  public static void write(Path file, List<Tensor> tensors, Map<String, String> metadata) throws IOException {
    Map<String, Object> header = new LinkedHashMap<>();
    if (!metadata.isEmpty()) header.put("__metadata__", new java.util.TreeMap<>(metadata)); // Map.of's order varies
    long at = 0;
    for (Tensor t : tensors) {
      if (t.name().equals("__metadata__") || header.containsKey(t.name())) {
        throw new IllegalArgumentException("tensor name '" + t.name() + "' is reserved or given twice");
      }
      for (int d : t.shape()) if (d < 0) throw new IllegalArgumentException(t.name() + ": negative dimension " + d);
      if (t.offset() < 0 || t.offset() + t.elements() > t.data().length) {
        throw new IllegalArgumentException(t.name() + ": shape needs " + t.elements() + " elements from offset "
            + t.offset() + " but the array holds " + t.data().length);
      }
      long bytes = 4 * t.elements();
      Map<String, Object> fields = new LinkedHashMap<>();
      fields.put("dtype", "F32");
      fields.put("shape", t.shape());
      fields.put("data_offsets", new long[] {at, at + bytes});
      header.put(t.name(), fields);
      at += bytes;
    }
    byte[] json = new Gson().toJson(header).getBytes(StandardCharsets.UTF_8);
    int padded = (json.length + 7) / 8 * 8;
    ByteBuffer head = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
    head.putLong(padded).put(json);
    while (head.hasRemaining()) head.put((byte) ' ');
    head.flip();
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
        StandardOpenOption.TRUNCATE_EXISTING)) {
      while (head.hasRemaining()) ch.write(head);
      ByteBuffer buf = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
      for (Tensor t : tensors) {
        long n = t.elements();
        for (long i = 0; i < n; i++) {
          if (buf.remaining() < 4) drain(ch, buf);
          buf.putFloat(t.data()[(int) (t.offset() + i)]);
        }
      }
      drain(ch, buf);
      ch.force(true);
    }
  }

  private static void drain(FileChannel ch, ByteBuffer buf) throws IOException {
    buf.flip();
    while (buf.hasRemaining()) ch.write(buf);
    buf.clear();
  }
}
