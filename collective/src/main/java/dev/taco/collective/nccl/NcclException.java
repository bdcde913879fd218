package dev.taco.collective.nccl;

import dev.taco.collective.CollectiveException;

/**
 * An NCCL call returned (or a non-blocking communicator reported) a status other than {@code ncclSuccess} and
 * {@code ncclInProgress}. The message names the call, the numeric {@code ncclResult_t}, its symbol,
 * {@code ncclGetErrorString(result)} and {@code ncclGetLastError(comm)}, after an optional context, e.g.
 * {@code rank 0: allReduce(count=16, fp32): ncclAllReduce failed: ncclInvalidArgument (4): invalid argument (run
 * with NCCL_DEBUG=WARN for details); last error: AllReduce : recvbuff cannot be NULL}.
 *
 * <p>Reference: nccl.h {@code ncclResult_t}; NCCL User Guide, "ncclGetErrorString", "ncclGetLastError".
 */
public final class NcclException extends CollectiveException {
  private static final long serialVersionUID = 1L;

  private final String context;
  private final String call;
  private final int result;
  private final String errorString;
  private final String lastError;

  /**
   * @param context     who and what, e.g. {@code "rank 0: allReduce(count=16, fp32)"}, or empty
   * @param call        the NCCL entry point, e.g. {@code "ncclAllReduce"}
   * @param result      its {@code ncclResult_t}
   * @param errorString {@code ncclGetErrorString(result)}
   * @param lastError   {@code ncclGetLastError(comm)}, empty if none
   */
  public NcclException(String context, String call, int result, String errorString, String lastError) {
    super(prefix(context) + detail(call, result, errorString, lastError));
    this.context = context == null ? "" : context;
    this.call = call;
    this.result = result;
    this.errorString = errorString;
    this.lastError = lastError == null ? "" : lastError;
  }

  /**
   * @param newContext who and what, e.g. {@code "rank 0: allReduce(count=16, fp32)"}
   * @return the same failure with that context in front
   */
  public NcclException withContext(String newContext) {
    return new NcclException(newContext, call, result, errorString, lastError);
  }

  /** @return the message without the context: {@code "<call> failed: <symbol> (<result>): ..."} */
  public String detail() {
    return detail(call, result, errorString, lastError);
  }

  /** @return the context, empty if none */
  public String context() {
    return context;
  }

  /** @return the NCCL entry point, e.g. {@code "ncclAllReduce"} */
  public String call() {
    return call;
  }

  /** @return the {@code ncclResult_t} value, e.g. 4 for {@code ncclInvalidArgument} */
  public int result() {
    return result;
  }

  /** @return {@code ncclGetErrorString(result)} */
  public String errorString() {
    return errorString;
  }

  /** @return {@code ncclGetLastError(comm)}, empty if none */
  public String lastError() {
    return lastError;
  }

  private static String prefix(String context) {
    return context == null || context.isEmpty() ? "" : context + ": ";
  }

  private static String detail(String call, int result, String errorString, String lastError) {
    return call + " failed: " + describe(result, errorString, lastError);
  }

  /**
   * @param result      an {@code ncclResult_t}
   * @param errorString {@code ncclGetErrorString(result)}
   * @param lastError   {@code ncclGetLastError(comm)}, empty or null if none
   * @return e.g. {@code "ncclRemoteError (6): remote process exited or there was a network error; last error: ..."}
   */
  public static String describe(int result, String errorString, String lastError) {
    String last = lastError == null || lastError.isBlank() ? "" : "; last error: " + lastError.strip();
    return Nccl.resultName(result) + " (" + result + "): " + errorString + last;
  }
}
