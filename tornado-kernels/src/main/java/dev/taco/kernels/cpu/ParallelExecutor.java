package dev.taco.kernels.cpu;

import java.util.stream.IntStream;

/**
 * Runs {@code @Parallel} kernels on the JVM (DESIGN §5).
 *
 * <p>A {@code @Parallel} loop means "iterations are independent", so the sequential loop Java runs is one legal
 * schedule: calling the kernel method directly gives exactly Java's results, on one core. To use several cores
 * with the kernel written as it is, {@link ParallelKernels} compiles a copy of the kernel class whose {@code @Parallel}
 * loops call {@link #split}, which runs disjoint contiguous chunks of the range on a
 * {@link java.util.concurrent.ForkJoinPool} common-pool stream. {@link #forRange} serves callers that split a range
 * themselves.
 *
 * <p>Results are bit-identical to the sequential run whenever the kernel honours the {@code @Parallel} contract
 * (no iteration reads what another writes), since each iteration is computed by the same Java code.
 */
public final class ParallelExecutor {
  private ParallelExecutor() {}

  /** The body of a kernel restricted to iterations {@code [lo, hi)} of its parallel loop. */
  @FunctionalInterface
  public interface RangeKernel {
    /** Runs iterations {@code lo} (inclusive) to {@code hi} (exclusive). */
    void run(int lo, int hi);
  }

  /**
   * Runs iterations {@code [0, n)} of {@code kernel} in at most {@code chunks} contiguous pieces, in parallel.
   *
   * @param chunks number of pieces, at least 1 (e.g. {@code Runtime.getRuntime().availableProcessors()})
   * @throws IllegalArgumentException if {@code n < 0} or {@code chunks < 1}
   * @throws RuntimeException the exception of a failing piece (the others may have run)
   */
  public static void forRange(int n, int chunks, RangeKernel kernel) {
    if (n < 0 || chunks < 1) {
      throw new IllegalArgumentException("n=" + n + " chunks=" + chunks);
    }
    int pieces = Math.min(chunks, Math.max(1, n));
    if (pieces == 1) {
      kernel.run(0, n);
      return;
    }
    IntStream.range(0, pieces).parallel().forEach(p -> kernel.run(
        (int) ((long) n * p / pieces), (int) ((long) n * (p + 1) / pieces)));
  }

  /**
   * Runs iterations {@code [lo, hi)} of {@code kernel} in one contiguous piece per available processor, in parallel
   * (the call {@link ParallelKernels} puts in place of a {@code @Parallel} loop). Nothing runs if {@code hi <= lo}.
   *
   * @throws RuntimeException the exception of a failing piece (the others may have run)
   */
  public static void split(int lo, int hi, RangeKernel kernel) {
    long n = (long) hi - lo; // as long: hi - lo overflows an int for ranges longer than 2^31 - 1
    if (n <= 0) {
      return;
    }
    int pieces = (int) Math.min(Runtime.getRuntime().availableProcessors(), n);
    if (pieces == 1) {
      kernel.run(lo, hi);
      return;
    }
    IntStream.range(0, pieces).parallel().forEach(p -> kernel.run(
        (int) (lo + n * p / pieces), (int) (lo + n * (p + 1) / pieces)));
  }

  /** {@link #forRange(int, int, RangeKernel)} with one piece per available processor. */
  public static void forRange(int n, RangeKernel kernel) {
    forRange(n, Runtime.getRuntime().availableProcessors(), kernel);
  }
}
