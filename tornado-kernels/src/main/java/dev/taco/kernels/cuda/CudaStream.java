package dev.taco.kernels.cuda;

/**
 * A CUDA stream: an ordered queue of copies, kernels and event records on one device.
 *
 * <p>Reference: CUDA Driver API, "Stream Management": {@code cuStreamCreate},
 * {@code cuStreamSynchronize}, {@code cuStreamDestroy_v2}.
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
