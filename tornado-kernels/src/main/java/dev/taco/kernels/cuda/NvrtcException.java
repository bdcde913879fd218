package dev.taco.kernels.cuda;

/**
 * An NVRTC call failed; for a compilation error the message carries the full compile log.
 *
 * <p>Reference: NVRTC User Guide, "Error Handling" ({@code nvrtcResult}, {@code nvrtcGetErrorString})
 * and "Compilation" ({@code nvrtcGetProgramLog}).
 */
public class NvrtcException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  private final String call;
  private final int code;
  private final String errorString;
  private final String log;

  /**
   * @param call        the NVRTC entry point, e.g. {@code "nvrtcCompileProgram"}
   * @param code        the numeric {@code nvrtcResult}
   * @param errorString {@code nvrtcGetErrorString(code)}, e.g. {@code "NVRTC_ERROR_COMPILATION"}
   * @param context     what was being compiled, e.g. {@code "vector_add.cu for compute_90"}
   * @param log         the program log (empty if none)
   */
  public NvrtcException(String call, int code, String errorString, String context, String log) {
    super(call + " failed" + (context.isEmpty() ? "" : " (" + context + ")") + ": " + errorString + " (" + code + ")"
        + (log == null || log.isBlank() ? "" : "\n" + log.strip()));
    this.call = call;
    this.code = code;
    this.errorString = errorString;
    this.log = log == null ? "" : log;
  }

  /** @return the failed entry point */
  public String call() { return call; }

  /** @return the numeric {@code nvrtcResult} */
  public int code() { return code; }

  /** @return {@code nvrtcGetErrorString} of the code */
  public String errorString() { return errorString; }

  /** @return the full compile log (empty if none) */
  public String log() { return log; }
}
