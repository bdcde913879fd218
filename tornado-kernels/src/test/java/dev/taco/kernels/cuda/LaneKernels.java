package dev.taco.kernels.cuda;

import dev.taco.kernels.Kernel;
import dev.taco.kernels.KernelContext;

/**
 * Small SIMT kernels for the task-graph tests. The mock driver of {@link MockDriverTest} runs {@code scale} and
 * {@code add} by name on the CPU, so graphs of them can be checked for results as well as for driver calls.
 */
public final class LaneKernels {
  private LaneKernels() {}

  /** {@code y[i] = x[i] * s} for {@code i < n}, one thread each. */
  @Kernel
  public static void scale(KernelContext ctx, float[] x, float[] y, float s, int n) {
    int i = ctx.globalIdx;
    if (i < n) {
      y[i] = x[i] * s;
    }
  }

  /** {@code c[i] = a[i] + b[i]} for {@code i < n}, one thread each. */
  @Kernel
  public static void add(KernelContext ctx, float[] a, float[] b, float[] c, int n) {
    int i = ctx.globalIdx;
    if (i < n) {
      c[i] = a[i] + b[i];
    }
  }

  /** Overloaded: refused as a task (kernels need a unique name). */
  public static void twice(KernelContext ctx, float[] x) {}

  /** See {@link #twice(KernelContext, float[])}. */
  public static void twice(KernelContext ctx, int[] x) {}
}
