package dev.taco.collective;

/** A collective could not complete: a peer rank failed, the group was aborted, or the operation timed out. */
public final class CollectiveException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public CollectiveException(String message, Throwable cause) {
    super(message, cause);
  }

  public CollectiveException(String message) {
    super(message);
  }
}
