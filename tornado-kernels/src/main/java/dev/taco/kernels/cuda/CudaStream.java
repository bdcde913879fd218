package dev.taco.kernels.cuda;

/**
 * A CUDA stream: an ordered queue of copies, kernels and event records on one device.
 *
 * <p>Reference: CUDA Driver API, "Stream Management": {@code cuStreamCreate},
 * {@code cuStreamSynchronize}, {@code cuStreamWaitEvent}, {@code cuStreamBeginCapture_v2},
 * {@code cuStreamEndCapture}, {@code cuStreamIsCapturing}, {@code cuStreamDestroy_v2}.
 */
public final class CudaStream implements AutoCloseable {
  private final CudaContext ctx;
  private final long handle;
  private volatile boolean closed;

  CudaStream(CudaContext ctx, long handle) {
    this.ctx = ctx;
    this.handle = handle;
  }

  /** @return the {@code CUstream} handle (for other libraries, e.g. NCCL's {@code cudaStream_t}) */
  public long handle() {
    if (closed) throw new IllegalStateException("stream is closed");
    return handle;
  }

  /** @return the context */
  public CudaContext context() { return ctx; }

  /**
   * Makes later work on this stream wait for {@code event} ({@code cuStreamWaitEvent}); never blocks the host.
   *
   * @param event an event recorded on any stream of this device
   * @throws CudaException on failure
   */
  public void waitEvent(CudaEvent event) {
    ctx.makeCurrent();
    ctx.driver().streamWaitEvent(handle(), event.handle());
  }

  /**
   * Non-blocking idle test ({@code cuStreamQuery}).
   *
   * @return true when all work enqueued so far has completed
   * @throws CudaException the error of failed work on the stream
   */
  public boolean query() {
    ctx.makeCurrent();
    return ctx.driver().streamQuery(handle());
  }

  /**
   * Starts capturing this stream into a CUDA graph ({@code cuStreamBeginCapture_v2}): work enqueued on it from now
   * on, and on other streams once they wait on an event recorded here during the capture, is recorded instead of
   * run, until {@link #endCapture()}.
   *
   * @param mode what other calls are barred meanwhile
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_VALUE} if the stream is already capturing
   */
  public void beginCapture(CudaGraph.CaptureMode mode) {
    ctx.makeCurrent();
    ctx.driver().streamBeginCapture(handle(), mode.value);
  }

  /**
   * Ends the capture begun on this stream ({@code cuStreamEndCapture}); every stream forked into it must have been
   * joined back (this stream waits on an event recorded on it after its last captured work).
   *
   * @return the captured graph (not yet instantiated)
   * @throws CudaException e.g. {@code CUDA_ERROR_STREAM_CAPTURE_UNJOINED},
   *                       {@code CUDA_ERROR_STREAM_CAPTURE_INVALIDATED}; the stream has left capture mode either way
   */
  public CudaGraph endCapture() {
    ctx.makeCurrent();
    return new CudaGraph(ctx, ctx.driver().streamEndCapture(handle()));
  }

  /**
   * @return whether the stream is capturing ({@code cuStreamIsCapturing}: active or invalidated)
   * @throws CudaException on a driver error
   */
  public boolean isCapturing() {
    ctx.makeCurrent();
    return ctx.driver().streamIsCapturing(handle()) != 0;
  }

  /**
   * Blocks until all work on the stream has finished ({@code cuStreamSynchronize}, direct mapping).
   *
   * @throws CudaException the error of work on the stream, if any (e.g. {@code CUDA_ERROR_ILLEGAL_ADDRESS})
   */
  public void synchronize() {
    ctx.makeCurrent();
    ctx.driver().streamSynchronize(handle());
  }

  /**
   * Destroys the stream ({@code cuStreamDestroy_v2}); idempotent. Work already queued still completes.
   *
   * @throws CudaException on a driver error
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    ctx.driver().streamDestroy(handle);
  }
}
