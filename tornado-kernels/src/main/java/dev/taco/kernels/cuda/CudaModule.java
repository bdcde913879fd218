package dev.taco.kernels.cuda;

import com.sun.jna.Memory;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * A loaded module (PTX JIT-compiled by the driver, or a cubin) and the kernels in it.
 *
 * <p>Reference: CUDA Driver API, "Module Management": {@code cuModuleLoadData},
 * {@code cuModuleGetFunction}, {@code cuModuleUnload}.
 */
public final class CudaModule implements AutoCloseable {
  private final CudaContext ctx;
  private final long handle;
  private final Map<String, CudaFunction> functions = new HashMap<>();
  private volatile boolean closed;

  private CudaModule(CudaContext ctx, long handle) {
    this.ctx = ctx;
    this.handle = handle;
  }

  /**
   * Loads PTX text ({@code cuModuleLoadData}; the driver JIT-compiles it for the device).
   *
   * @param ctx the context
   * @param ptx PTX text
   * @return the module
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_PTX}, {@code CUDA_ERROR_UNSUPPORTED_PTX_VERSION}
   *                       (PTX newer than the driver)
   */
  public static CudaModule load(CudaContext ctx, String ptx) {
    byte[] b = ptx.getBytes(StandardCharsets.UTF_8);
    ctx.makeCurrent();
    try (Memory image = new Memory(b.length + 1L)) {
      image.write(0, b, 0, b.length);
      image.setByte(b.length, (byte) 0);
      return new CudaModule(ctx, ctx.driver().moduleLoadData(image));
    }
  }

  /**
   * Looks up a kernel by name ({@code cuModuleGetFunction}); cached per name.
   *
   * @param name the kernel's symbol (declare kernels {@code extern "C"} to keep the plain name)
   * @return the function
   * @throws CudaException {@code CUDA_ERROR_NOT_FOUND} if the module has no such kernel
   * @throws IllegalStateException if the module is closed
   */
  public synchronized CudaFunction function(String name) {
    if (closed) throw new IllegalStateException("module is closed");
    CudaFunction f = functions.get(name);
    if (f == null) {
      ctx.makeCurrent();
      f = new CudaFunction(ctx, ctx.driver().moduleGetFunction(handle, name), name);
      functions.put(name, f);
    }
    return f;
  }

  /** @return the {@code CUmodule} handle */
  public long handle() { return handle; }

  /** @return the context */
  public CudaContext context() { return ctx; }

  /**
   * Unloads the module ({@code cuModuleUnload}); its functions become invalid. Idempotent.
   *
   * @throws CudaException on a driver error
   */
  @Override
  public synchronized void close() {
    if (closed) return;
    closed = true;
    functions.clear();
    ctx.makeCurrent();
    ctx.driver().moduleUnload(handle);
  }
}
