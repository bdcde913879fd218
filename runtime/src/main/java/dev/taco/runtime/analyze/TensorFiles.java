package dev.taco.runtime.analyze;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/** Reads a tensor file of either supported format, telling them apart by content and name. */
public final class TensorFiles {
  private TensorFiles() {}

  /**
   * Reads every tensor of {@code file}: a NumPy {@code .npy} file (recognised by its magic, {@link NpyReader}) or a
   * safetensors file (by the {@code .safetensors} suffix, or a header length followed by {@code '{'},
   * {@link SafetensorsReader}).
   *
   * @return the tensors, in file order
   * @throws TensorFileException for a missing, unreadable, unrecognised or malformed file (one-line message
   *     {@code <file>: <reason>})
   */
  public static List<NamedTensor> read(Path file) {
    try {
      if (Files.isDirectory(file)) {
        throw new TensorFileException(file, "is a directory");
      }
      if (Files.exists(file) && !Files.isRegularFile(file)) { // a pipe or a device: no size, no random access
        throw new TensorFileException(file, "not a regular file (a pipe or a device?): save the tensor to a file");
      }
      byte[] head = new byte[9];
      int n;
      try (var in = Files.newInputStream(file)) {
        n = in.readNBytes(head, 0, head.length);
      }
      String name = file.getFileName() == null ? "" : file.getFileName().toString().toLowerCase(Locale.ROOT);
      boolean npyMagic = n >= 6 && java.util.Arrays.equals(head, 0, 6, NpyReader.MAGIC, 0, 6);
      if (npyMagic || name.endsWith(".npy")) {
        return NpyReader.read(file);
      }
      if (name.endsWith(".safetensors") || (n == 9 && head[8] == '{')) {
        return SafetensorsReader.read(file);
      }
      throw new TensorFileException(file, "not a .npy or .safetensors file");
    } catch (NoSuchFileException e) {
      throw new TensorFileException(file, "file not found");
    } catch (AccessDeniedException e) {
      throw new TensorFileException(file, "permission denied");
    } catch (IOException e) {
      throw new TensorFileException(file, "cannot read: " + e);
    }
  }

  /**
   * Reads exactly {@code len} bytes at {@code pos}; {@code len} must already be checked against the file size.
   *
   * @return a little-endian buffer, position 0, limit {@code len}
   * @throws TensorFileException if the file ends first
   */
  static ByteBuffer readFully(FileChannel ch, Path file, long pos, int len) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(len).order(ByteOrder.LITTLE_ENDIAN);
    while (b.hasRemaining()) {
      if (ch.read(b, pos + b.position()) < 0) {
        throw new TensorFileException(file, "truncated at byte " + (pos + b.position()));
      }
    }
    return b.flip();
  }
}
