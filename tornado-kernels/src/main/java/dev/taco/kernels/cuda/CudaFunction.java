package dev.taco.kernels.cuda;

import java.lang.ref.Reference;

/**
 * A kernel in a loaded {@link CudaModule}, launchable on a stream.
 *
 * <p>Reference: CUDA Driver API, "Execution Control": {@code cuLaunchKernel},
 * {@code cuFuncSetAttribute}, {@code cuFuncGetAttribute}.
 */
public final class CudaFunction {
  private final CudaContext ctx;
  private final long handle;
  private final String name;

  /** Package-private: {@link CudaModule#function(String)} and tests (fake handle, never launched). */
  CudaFunction(CudaContext ctx, long handle, String name) {
    this.ctx = ctx;
    this.handle = handle;
    this.name = name;
  }

  /** @return the kernel's name */
  public String name() { return name; }

  /** @return the {@code CUfunction} handle */
  public long handle() { return handle; }

  /** @return the context (null only for test fakes) */
  public CudaContext context() { return ctx; }

  /**
   * Launches the kernel ({@code cuLaunchKernel}, direct mapping), packing {@code args} with
   * {@link KernelArgs}. Asynchronous: errors in the kernel itself surface at the next synchronisation.
   *
   * @param grid        blocks per grid
   * @param block       threads per block (x·y·z ≤ {@link CudaContext#maxThreadsPerBlock()}, else the driver
   *                    answers {@code CUDA_ERROR_INVALID_VALUE})
   * @param sharedBytes dynamic shared memory per block, bytes (above 48 KiB needs
   *                    {@link #setMaxDynamicSharedBytes(int)})
   * @param stream      the stream, or null for the legacy default stream
   * @param args        kernel arguments in parameter order (see {@link KernelArgs})
   * @throws IllegalArgumentException for an unsupported argument or negative shared size
   * @throws CudaException            if the launch is rejected
   */
  public void launch(Dim3 grid, Dim3 block, int sharedBytes, CudaStream stream, Object... args) {
    launch(grid, block, sharedBytes, stream, new KernelArgs(args));
  }

  /**
   * Launches the kernel with pre-packed arguments (no allocation on this path).
   *
   * @param grid        blocks per grid
   * @param block       threads per block
   * @param sharedBytes dynamic shared memory per block, bytes
   * @param stream      the stream, or null for the legacy default stream
   * @param args        packed arguments
   * @throws IllegalArgumentException if {@code sharedBytes} &lt; 0
   * @throws CudaException            if the launch is rejected
   */
  public void launch(Dim3 grid, Dim3 block, int sharedBytes, CudaStream stream, KernelArgs args) {
    if (sharedBytes < 0) throw new IllegalArgumentException("sharedBytes must be >= 0, got " + sharedBytes);
    ctx.makeCurrent();
    ctx.driver().launchKernel(handle, grid.x(), grid.y(), grid.z(), block.x(), block.y(), block.z(), sharedBytes,
        stream == null ? 0L : stream.handle(), args.address());
    Reference.reachabilityFence(args);
  }

  /**
   * Allows up to {@code bytes} of dynamic shared memory per block
   * ({@code cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)}).
   *
   * @param bytes at most {@link CudaContext#maxSharedBytesPerBlockOptin()} minus the kernel's static shared memory
   * @throws CudaException {@code CUDA_ERROR_INVALID_VALUE} if too large
   */
  public void setMaxDynamicSharedBytes(int bytes) {
    ctx.makeCurrent();
    ctx.driver().funcSetAttribute(handle, CudaDriver.FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  }

  /**
   * @return the most threads per block this kernel can be launched with
   *         ({@code CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK}, limited by its register use)
   * @throws CudaException on a driver error
   */
  public int maxThreadsPerBlock() {
    ctx.makeCurrent();
    return ctx.driver().funcGetAttribute(handle, 0);
  }

  /**
   * @return registers per thread ({@code CU_FUNC_ATTRIBUTE_NUM_REGS})
   * @throws CudaException on a driver error
   */
  public int registersPerThread() {
    ctx.makeCurrent();
    return ctx.driver().funcGetAttribute(handle, 4);
  }

  @Override
  public String toString() { return "CudaFunction[" + name + "]"; }
}
