package dev.taco.kernels.cuda;

/**
 * A CUDA event with timing: record it on a stream before and after some work, synchronise, and read
 * the elapsed device time.
 *
 * <p>Reference: CUDA Driver API, "Event Management": {@code cuEventCreate}, {@code cuEventRecord},
 * {@code cuEventSynchronize}, {@code cuEventElapsedTime_v2}, {@code cuEventDestroy_v2}.
 */
public final class CudaEvent implements AutoCloseable {
  private final CudaContext ctx;
  private final long handle;
  private volatile boolean closed;

  CudaEvent(CudaContext ctx, long handle) {
    this.ctx = ctx;
    this.handle = handle;
  }

  /** @return the {@code CUevent} handle */
  public long handle() {
    if (closed) throw new IllegalStateException("event is closed");
    return handle;
  }

  /**
   * Enqueues this event on {@code stream} ({@code cuEventRecord}, direct mapping).
   *
   * @param stream the stream
   * @throws CudaException on a driver error
   */
  public void record(CudaStream stream) {
    ctx.driver().eventRecord(handle(), stream.handle());
  }

  /**
   * Non-blocking completion test ({@code cuEventQuery}).
   *
   * @return true when the work before the last {@link #record} has completed (or the event was never recorded)
   * @throws CudaException the error of failed work before the event
   */
  public boolean query() {
    ctx.makeCurrent();
    return ctx.driver().eventQuery(handle());
  }

  /**
   * Blocks until the stream has reached this event ({@code cuEventSynchronize}).
   *
   * @throws CudaException on a driver error, including errors of preceding work
   */
  public void synchronize() {
    ctx.makeCurrent();
    ctx.driver().eventSynchronize(handle());
  }

  /**
   * Device time from this event to {@code end}, both recorded and completed
   * ({@code cuEventElapsedTime_v2}).
   *
   * @param end the later event
   * @return elapsed milliseconds (resolution about 0.5 µs)
   * @throws CudaException {@code CUDA_ERROR_NOT_READY} if either event has not completed
   */
  public float elapsedMillisTo(CudaEvent end) {
    ctx.makeCurrent();
    return ctx.driver().eventElapsedTime(handle(), end.handle());
  }

  /**
   * Destroys the event ({@code cuEventDestroy_v2}); idempotent.
   *
   * @throws CudaException on a driver error
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    ctx.driver().eventDestroy(handle);
  }
}
