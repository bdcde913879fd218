package dev.taco.codec;

/** A codec payload failed validation (truncated, bad magic/version/codec/checksum, inconsistent shape). */
public final class MalformedPayloadException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public MalformedPayloadException(String message) {
    super(message);
  }

  /**
   * A payload rejected with more context than the check that found it.
   *
   * @param message what is wrong, and where (source rank, chunk)
   * @param cause the check's own exception
   */
  public MalformedPayloadException(String message, Throwable cause) {
    super(message, cause);
  }
}
