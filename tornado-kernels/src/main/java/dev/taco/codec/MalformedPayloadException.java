package dev.taco.codec;

/** A codec payload failed validation (truncated, bad magic/version/codec/checksum, inconsistent shape). */
public final class MalformedPayloadException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;

  public MalformedPayloadException(String message) {
    super(message);
  }
}
