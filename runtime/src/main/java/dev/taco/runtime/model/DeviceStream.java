package dev.taco.runtime.model;

import dev.taco.collective.device.DeviceOutOfMemoryException;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaException;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.kernels.cuda.HostArrays;
import dev.taco.kernels.cuda.KernelTasks;
import dev.taco.kernels.cuda.Launcher;
import dev.taco.kernels.cuda.PinnedBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * One GPU rank's stream and what the pieces of its backend share on it: the float32 arenas it allocates (freed
 * together), its kernel launches by method reference ({@link Launcher}) on the grids the layer kernels use, host→device
 * copies through a reused pinned staging buffer, and whether the stream is being captured into a CUDA graph (when
 * neither allocations nor host copies may happen). Not thread-safe: one thread per rank.
 */
final class DeviceStream implements AutoCloseable {
  /** Threads per block of the layer kernels (grid-stride loops: any grid covers the iterations). */
  static final int BLOCK = 256;
  /** Warps per block of the SIMT kernels that give a warp to each row. */
  static final int WARPS = BLOCK / 32;
  private static final long MAX_BLOCKS = 1L << 20;

  private final CudaContext ctx;
  private final CudaStream stream;
  private final boolean ownsStream;
  private final Launcher kernels;
  private final List<DeviceBuffer> owned = new ArrayList<>();
  private PinnedBuffer staging;
  private boolean capturing;

  /**
   * @param shared the stream to work on (a TP group's collectives' stream, not closed here), or null for a stream of
   *     its own
   */
  DeviceStream(CudaContext ctx, CudaStream shared) {
    this.ctx = ctx;
    ctx.makeCurrent(); // this thread's: a rank's thread builds and drives its backend
    this.ownsStream = shared == null;
    this.stream = ownsStream ? ctx.createStream() : shared;
    this.kernels = new Launcher(ctx);
  }

  CudaContext context() {
    return ctx;
  }

  CudaStream stream() {
    return stream;
  }

  /** Whether the stream is being captured into a CUDA graph ({@link StepGraph}). */
  boolean capturing() {
    return capturing;
  }

  void setCapturing(boolean on) {
    capturing = on;
  }

  /** A kernel with one {@code @Parallel} loop of {@code iterations} (grid-stride: the grid is capped). */
  KernelTasks<Void> parallel(long iterations) {
    int blocks = (int) Math.max(1, Math.min((iterations + BLOCK - 1) / BLOCK, MAX_BLOCKS));
    return kernels.on(Dim3.of(blocks), Dim3.of(BLOCK), stream);
  }

  /** A SIMT kernel that gives warp w of the grid row w: one warp per row, {@link #WARPS} rows per block. */
  KernelTasks<Void> warps(long rows) {
    long blocks = (rows + WARPS - 1) / WARPS;
    if (blocks > Integer.MAX_VALUE) throw new IllegalArgumentException(rows + " rows is too many for one grid");
    return kernels.on(Dim3.of((int) Math.max(1, blocks)), Dim3.of(BLOCK), stream);
  }

  /** A kernel on a grid of its own. */
  KernelTasks<Void> on(Dim3 grid, Dim3 block) {
    return kernels.on(grid, block, stream);
  }

  /**
   * The {@code n} float32 elements of {@code v} as a buffer of their own (a kernel's array argument).
   *
   * @throws IllegalArgumentException naming {@code name} if they do not fit the arena
   */
  static DeviceBuffer slice(String name, View<DeviceBuffer> v, long n) {
    if (v.offset() < 0 || n < 0 || 4 * (v.offset() + n) > v.arena().bytes()) {
      throw new IllegalArgumentException(name + ": " + n + " elements from offset " + v.offset() + " do not fit an "
          + "arena of " + v.arena().bytes() / 4 + " float32 elements");
    }
    return v.arena().slice(4 * v.offset(), 4 * n);
  }

  /**
   * A zeroed float32 device arena of {@code n} elements, freed by {@link #close}.
   *
   * @throws DeviceOutOfMemoryException if the device has not that much free memory (the message gives the size)
   * @throws IllegalStateException while the stream is captured
   */
  DeviceBuffer alloc(long n) {
    if (n <= 0) throw new IllegalArgumentException("an arena needs at least one element, got " + n);
    if (capturing) throw new IllegalStateException("device memory allocated while a step is captured as a graph");
    DeviceBuffer b;
    try {
      b = ctx.alloc(4 * n);
    } catch (CudaException e) {
      if (e.code() == 2) { // CUDA_ERROR_OUT_OF_MEMORY
        throw new DeviceOutOfMemoryException(String.format("out of GPU memory allocating %.3f GiB on %s (%.1f GiB "
            + "in all): lower --micro-batch-size, --seq-length, --hidden-size or --num-layers", 4.0 * n / (1 << 30),
            ctx.name(), ctx.totalMemoryBytes() / (double) (1 << 30)), e);
      }
      throw e;
    }
    owned.add(b);
    b.memsetAsync((byte) 0, stream);
    return b;
  }

  /** Frees an arena being replaced by a larger one, once the stream no longer uses it. */
  void release(DeviceBuffer b) {
    if (b == null) return;
    if (capturing) throw new IllegalStateException("work space released while a step is captured as a graph");
    stream.synchronize();
    owned.remove(b);
    b.close();
  }

  /**
   * A whole host array → pinned staging → the start of {@code d}, ordered on the stream (a synchronous copy from
   * pageable memory is not ordered with a non-blocking stream); the staging is reused once the stream has drained.
   *
   * @throws IllegalStateException while the stream is captured
   */
  void copyIn(Object array, DeviceBuffer d) {
    long bytes = HostArrays.byteSize(array);
    if (bytes == 0) return;
    if (capturing) throw new IllegalStateException("a host copy while a step is captured as a graph");
    stream.synchronize();
    if (staging == null || staging.bytes() < bytes) {
      if (staging != null) staging.close();
      staging = ctx.allocPinned(Math.max(bytes, 1 << 16));
    }
    staging.write(0, array);
    d.copyFromAsync(staging, 0, 0, bytes, stream);
  }

  /**
   * Frees every arena and its own stream, after waiting for the stream; everything is released even when the wait
   * fails (a kernel fault), whose exception is then rethrown.
   */
  @Override
  public void close() {
    RuntimeException failure = null;
    try {
      stream.synchronize();
    } catch (RuntimeException e) {
      failure = e;
    }
    for (DeviceBuffer b : owned) b.close();
    owned.clear();
    if (staging != null) staging.close();
    if (ownsStream) stream.close();
    if (failure != null) throw failure;
  }
}
