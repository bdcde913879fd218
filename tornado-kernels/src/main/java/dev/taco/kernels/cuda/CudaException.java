package dev.taco.kernels.cuda;

/**
 * A CUDA driver API call returned a status other than {@code CUDA_SUCCESS}.
 *
 * <p>The message names the call, the numeric {@code CUresult}, its symbolic name (from
 * {@code cuGetErrorName}) and its description (from {@code cuGetErrorString}), for example
 * {@code cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument}. When the driver
 * cannot describe the code (library not loaded), {@link CudaErrors} supplies the name from the
 * enum in {@code cuda.h} of CUDA 13.0.
 *
 * <p>Reference: CUDA Driver API, "Error Handling" ({@code cuGetErrorName}, {@code cuGetErrorString})
 * and the {@code CUresult} enum ("Data types used by CUDA driver").
 */
public class CudaException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String call;
  private final int code;
  private final String errorName;
  private final String errorString;

  /**
   * Creates the exception for a failed call.
   *
   * @param call        the driver entry point that failed, e.g. {@code "cuMemAlloc_v2"}
   * @param code        the numeric {@code CUresult} it returned (non-zero)
   * @param errorName   the symbolic name, e.g. {@code "CUDA_ERROR_OUT_OF_MEMORY"}
   * @param errorString the driver's description, e.g. {@code "out of memory"}
   */
  public CudaException(String call, int code, String errorName, String errorString) {
    super(call + " failed: " + errorName + " (" + code + "): " + errorString);
    this.call = call;
    this.code = code;
    this.errorName = errorName;
    this.errorString = errorString;
  }

  /** @return the driver entry point that failed, e.g. {@code "cuLaunchKernel"} */
  public String call() { return call; }

  /** @return the numeric {@code CUresult} status */
  public int code() { return code; }

  /** @return the symbolic name of the status, e.g. {@code "CUDA_ERROR_INVALID_VALUE"} */
  public String errorName() {
    return errorName;
  }

  /** @return the driver's description of the status, e.g. {@code "invalid argument"} */
  public String errorString() {
    return errorString;
  }
}
