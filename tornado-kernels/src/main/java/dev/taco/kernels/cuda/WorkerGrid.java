package dev.taco.kernels.cuda;

import java.util.Objects;

/**
 * The launch shape of one kernel task: blocks per grid, threads per block and dynamic shared memory per block, in
 * CUDA's terms ({@code cuLaunchKernel}'s {@code gridDim}, {@code blockDim}, {@code sharedMemBytes}). TornadoVM's
 * {@code WorkerGrid1D} speaks of global work (here {@code blocks x threads}) and local work ({@code threads}).
 *
 * @param blocks      blocks per grid
 * @param threads     threads per block (at most {@link CudaContext#maxThreadsPerBlock()} in total)
 * @param sharedBytes dynamic shared memory per block, bytes, &ge; 0 (above 48 KiB the plan opts the kernel in)
 */
public record WorkerGrid(Dim3 blocks, Dim3 threads, int sharedBytes) {
  /**
   * @throws NullPointerException     for a null dimension
   * @throws IllegalArgumentException if {@code sharedBytes} &lt; 0
   */
  public WorkerGrid {
    Objects.requireNonNull(blocks, "blocks");
    Objects.requireNonNull(threads, "threads");
    if (sharedBytes < 0) {
      throw new IllegalArgumentException("sharedBytes < 0: " + sharedBytes);
    }
  }

  /**
   * @param blocks  blocks per grid, &ge; 1
   * @param threads threads per block, &ge; 1
   * @return a one-dimensional grid without dynamic shared memory
   */
  public static WorkerGrid of(int blocks, int threads) {
    return new WorkerGrid(Dim3.of(blocks), Dim3.of(threads), 0);
  }

  /**
   * @param blocks      blocks per grid, &ge; 1
   * @param threads     threads per block, &ge; 1
   * @param sharedBytes dynamic shared memory per block, bytes
   * @return a one-dimensional grid
   */
  public static WorkerGrid of(int blocks, int threads, int sharedBytes) {
    return new WorkerGrid(Dim3.of(blocks), Dim3.of(threads), sharedBytes);
  }

  /**
   * @param n       items, one thread each
   * @param threads threads per block
   * @return {@code ceil(n / threads)} blocks of {@code threads}
   * @throws IllegalArgumentException as {@link Dim3#cover}
   */
  public static WorkerGrid cover(long n, int threads) {
    return new WorkerGrid(Dim3.cover(n, threads), Dim3.of(threads), 0);
  }

  @Override
  public String toString() {
    return blocks.x() + "x" + blocks.y() + "x" + blocks.z() + " blocks of " + threads.x() + "x" + threads.y() + "x"
        + threads.z() + (sharedBytes == 0 ? "" : ", " + sharedBytes + " B shared");
  }
}
