package dev.taco.runtime;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Writes an output file (a report, a plot) so that it appears whole or not at all: into a temp file in the same
 * folder, then renamed over the target. A write that fails (a full disk, a folder that went away) leaves no truncated
 * file behind and names the file it was writing.
 */
public final class AtomicFile {
  private AtomicFile() {}

  /** What writes the content. */
  @FunctionalInterface
  public interface Content {
    /** @throws IOException if writing fails */
    void writeTo(OutputStream out) throws IOException;
  }

  /**
   * Writes {@code out} (creating its folder) with what {@code content} writes, readable by everyone who can read the
   * folder.
   *
   * @throws IOException naming {@code out} and the reason, if the folder cannot be made or the file written; any
   *     earlier file at {@code out} is then left as it was
   */
  public static void write(Path out, Content content) throws IOException {
    Path abs = out.toAbsolutePath();
    Path tmp = null;
    try {
      Files.createDirectories(abs.getParent());
      tmp = Files.createTempFile(abs.getParent(), "." + abs.getFileName(), ".tmp");
      try (OutputStream o = new BufferedOutputStream(Files.newOutputStream(tmp))) {
        content.writeTo(o);
      }
      try {
        // temp files are created owner-only; a report is for everyone who can read the folder
        Files.setPosixFilePermissions(tmp, java.nio.file.attribute.PosixFilePermissions.fromString("rw-r--r--"));
      } catch (UnsupportedOperationException e) {
        // not a POSIX file system: keep its defaults
      }
      Files.move(tmp, abs, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
    } catch (IOException | RuntimeException e) {
      if (tmp != null) Files.deleteIfExists(tmp);
      if (e instanceof RuntimeException r) throw r;
      throw new IOException("cannot write " + abs + ": " + why((IOException) e), e);
    }
  }

  /**
   * Writes {@code chart} to {@code out} as a PNG, as {@link #write} writes: rendered in memory first, with ImageIO's
   * disk cache off, so that a disk that fills up fails the file write alone (with ImageIO's cache file, a failed write
   * left the cache stream open, and the JVM's exit printed its NullPointerException).
   *
   * @throws IOException naming {@code out} and the reason, if the folder cannot be made or the file written
   */
  public static void writePng(Path out, org.knowm.xchart.internal.chartpart.Chart<?, ?> chart) throws IOException {
    javax.imageio.ImageIO.setUseCache(false);
    byte[] png = org.knowm.xchart.BitmapEncoder.getBitmapBytes(chart, org.knowm.xchart.BitmapEncoder.BitmapFormat.PNG);
    write(out, o -> o.write(png));
  }

  /**
   * What went wrong with a file, in words, without naming the file (a temp file's name means nothing to a user): a file
   * system error's reason or kind, else the message, with its cause's (an encoder's own error wraps the disk's).
   */
  public static String why(IOException e) {
    if (e instanceof java.nio.file.FileSystemException fs) {
      return fs.getReason() != null ? fs.getReason() : switch (fs) {
        case java.nio.file.NoSuchFileException x -> "no such file or folder";
        case java.nio.file.FileAlreadyExistsException x -> "a file is in the way";
        case java.nio.file.AccessDeniedException x -> "permission denied";
        case java.nio.file.NotDirectoryException x -> "not a folder";
        case java.nio.file.DirectoryNotEmptyException x -> "folder not empty";
        default -> e.getClass().getSimpleName();
      };
    }
    Throwable c = e.getCause();
    return e.getMessage() + (c != null && c.getMessage() != null && !c.getMessage().equals(e.getMessage())
        ? " (" + c.getMessage() + ")" : "");
  }
}
