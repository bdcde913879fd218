package dev.taco.collective.device;

/** The device had no memory left for a collective's buffers; the message names the collective, its shape and the free memory. */
public final class DeviceOutOfMemoryException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /**
   * @param message names the collective, its plan and shape, the rank and the device's free memory
   * @param cause the driver's {@code CUDA_ERROR_OUT_OF_MEMORY}
   */
  public DeviceOutOfMemoryException(String message, Throwable cause) {
    super(message, cause);
  }
}
