package dev.taco.kernels.cuda;

/**
 * When a {@link TaskGraph} transfer runs (TornadoVM's {@code DataTransferMode}).
 */
public enum DataTransferMode {
  /** Only at the plan's first execution (read-only inputs, e.g. weights). */
  FIRST_EXECUTION,
  /** At every execution. */
  EVERY_EXECUTION
}
