package dev.taco.kernels.cuda;

/**
 * A cuBLAS or cuBLASLt call returned a status other than {@code CUBLAS_STATUS_SUCCESS}.
 *
 * <p>The message names the call, the numeric {@code cublasStatus_t}, its name ({@code cublasGetStatusName}) and its
 * description ({@code cublasGetStatusString}), then what was asked, e.g. {@code cublasGemmEx failed:
 * CUBLAS_STATUS_INVALID_VALUE (7): an unsupported value or parameter was passed to the function [transa=N transb=N
 * m=64 n=32 k=16 lda=8 ...]}. cuBLASLt uses the same status enum ({@code cublasLtGetStatusName},
 * {@code cublasLtGetStatusString}).
 *
 * <p>Reference: cuBLAS Library User Guide (CUDA 13), "cublasStatus_t", "cublasGetStatusName()",
 * "cublasGetStatusString()"; {@code cublas_api.h} and {@code cublasLt.h} of cuBLAS 13.1.
 */
public class CublasException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String call;
  private final int status;
  private final String statusName;
  private final String statusString;

  /**
   * @param call         the entry point that failed, e.g. {@code "cublasGemmEx"}
   * @param status       the numeric {@code cublasStatus_t} (non-zero)
   * @param statusName   e.g. {@code "CUBLAS_STATUS_INVALID_VALUE"}
   * @param statusString e.g. {@code "an unsupported value or parameter was passed to the function"}
   * @param detail       the arguments that matter, or empty
   */
  public CublasException(String call, int status, String statusName, String statusString, String detail) {
    super(call + " failed: " + statusName + " (" + status + "): " + statusString
        + (detail == null || detail.isEmpty() ? "" : " [" + detail + "]"));
    this.call = call;
    this.status = status;
    this.statusName = statusName;
    this.statusString = statusString;
  }

  /** @return the entry point that failed, e.g. {@code "cublasLtMatmul"} */
  public String call() { return call; }

  /** @return the numeric {@code cublasStatus_t} */
  public int status() { return status; }

  /** @return {@code cublasGetStatusName} of the status, e.g. {@code "CUBLAS_STATUS_NOT_SUPPORTED"} */
  public String statusName() {
    return statusName;
  }

  /** @return {@code cublasGetStatusString} of the status */
  public String statusString() { return statusString; }
}
