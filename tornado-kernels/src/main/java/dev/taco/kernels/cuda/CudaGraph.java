package dev.taco.kernels.cuda;

/**
 * A CUDA graph captured from streams ({@link CudaStream#beginCapture}, {@link CudaStream#endCapture}) and, once
 * {@link #instantiate() instantiated}, replayed by {@link #launch}: one {@code cuGraphLaunch} enqueues every captured
 * kernel, copy, cross-stream wait and library call (NCCL) with the arguments they had at capture. docs/design.md §5: about
 * 5–6 µs of host time per {@code cuLaunchKernel} through JNA, so many small kernels are cheaper replayed.
 *
 * <p>Reference: CUDA Driver API, "Stream Management" ({@code cuStreamBeginCapture_v2}, {@code cuStreamEndCapture})
 * and "Graph Management" ({@code cuGraphInstantiateWithFlags}, {@code cuGraphLaunch}, {@code cuGraphGetNodes},
 * {@code cuGraphExecDestroy}, {@code cuGraphDestroy}); CUDA C++ Programming Guide, "CUDA Graphs", "Stream Capture".
 */
public final class CudaGraph implements AutoCloseable {
  /** How a capture restricts capture-unsafe calls (e.g. {@code cuMemAlloc}) from other threads meanwhile. */
  public enum CaptureMode {
    /** {@code CU_STREAM_CAPTURE_MODE_GLOBAL}: no thread of the process may make one. */
    GLOBAL(CudaDriver.CAPTURE_MODE_GLOBAL),
    /** {@code CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}: only the capturing thread may not (one thread per GPU). */
    THREAD_LOCAL(CudaDriver.CAPTURE_MODE_THREAD_LOCAL);

    final int value;

    CaptureMode(int value) {
      this.value = value;
    }
  }

  private final CudaContext ctx;
  private final long graph;
  private long exec;
  private boolean closed;

  CudaGraph(CudaContext ctx, long graph) {
    this.ctx = ctx;
    this.graph = graph;
  }

  /**
   * @return the number of nodes of the captured graph (kernels, copies, memsets; the events that tie streams
   *     together become edges, not nodes)
   * @throws CudaException on a driver error
   */
  public long nodeCount() {
    checkOpen();
    ctx.makeCurrent();
    return ctx.driver().graphNodeCount(graph);
  }

  /**
   * Instantiates the graph for launching ({@code cuGraphInstantiateWithFlags}); idempotent.
   *
   * @return this graph
   * @throws CudaException on a driver error
   */
  public CudaGraph instantiate() {
    checkOpen();
    if (exec == 0) {
      ctx.makeCurrent();
      exec = ctx.driver().graphInstantiate(graph);
    }
    return this;
  }

  /**
   * Enqueues the whole graph on {@code stream} ({@code cuGraphLaunch}, direct mapping): it starts after the work
   * enqueued there before, and work enqueued there after starts when all of it is done.
   *
   * @param stream the stream
   * @throws IllegalStateException if not instantiated, or closed
   * @throws CudaException         on a driver error
   */
  public void launch(CudaStream stream) {
    checkOpen();
    if (exec == 0) {
      throw new IllegalStateException("CUDA graph is not instantiated");
    }
    ctx.driver().graphLaunch(exec, stream.handle());
  }

  private void checkOpen() {
    if (closed) {
      throw new IllegalStateException("CUDA graph is closed");
    }
  }

  /**
   * Destroys the executable graph and the graph ({@code cuGraphExecDestroy}, {@code cuGraphDestroy}); idempotent.
   * Launches already enqueued still complete.
   *
   * @throws CudaException on a driver error
   */
  @Override
  public void close() {
    if (closed) {
      return;
    }
    closed = true;
    ctx.makeCurrent();
    if (exec != 0) {
      ctx.driver().graphExecDestroy(exec);
    }
    ctx.driver().graphDestroy(graph);
  }
}
