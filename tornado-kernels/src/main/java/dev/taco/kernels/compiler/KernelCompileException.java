package dev.taco.kernels.compiler;

/**
 * A kernel cannot be translated to CUDA C: the message is {@code file:line: reason} (several such lines when
 * javac itself reported errors), so build logs and IDEs can jump to the offending source line.
 */
public final class KernelCompileException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  /** @param message one or more {@code file:line: reason} lines */
  public KernelCompileException(String message) {
    super(message);
  }
}
