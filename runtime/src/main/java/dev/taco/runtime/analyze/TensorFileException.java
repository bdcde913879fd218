package dev.taco.runtime.analyze;

import java.nio.file.Path;

/**
 * A tensor file ({@code .npy} or {@code .safetensors}) that cannot be read: missing, unreadable, malformed or of an
 * unsupported dtype. The message is one line, {@code <file>: <reason>}, fit to print after {@code taco: error: }.
 * An {@link IllegalArgumentException}, so the command line answers it with exit status 2.
 */
public final class TensorFileException extends IllegalArgumentException {
  private final transient Path file;
  private final String reason;

  /**
   * @param file the file concerned
   * @param reason what is wrong, one line, without the file name
   */
  public TensorFileException(Path file, String reason) {
    super(file + ": " + reason);
    this.file = file;
    this.reason = reason;
  }

  /** The file concerned. */
  public Path file() {
    return file;
  }

  /** What is wrong, without the file name. */
  public String reason() {
    return reason;
  }
}
