package dev.taco.collective;

/**
 * A collective could not complete: a peer rank failed, the group was aborted, or the operation timed out.
 *
 * <p>Not final: transports refine it (e.g. {@code dev.taco.collective.nccl.NcclException} for a failed NCCL call).
 */
public class CollectiveException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * A failure caused by another one.
   *
   * @param message names the rank, the operation and the reason
   * @param cause the underlying failure
   */
  public CollectiveException(String message, Throwable cause) {
    super(message, cause);
  }

  /**
   * A failure without an underlying exception (a timeout, an abort).
   *
   * @param message names the rank, the operation and the reason
   */
  public CollectiveException(String message) {
    super(message);
  }
}
