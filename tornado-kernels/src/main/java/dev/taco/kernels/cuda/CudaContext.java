package dev.taco.kernels.cuda;

import dev.taco.kernels.compiler.KernelRequest;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A device's primary context and its properties: the entry point to allocate memory, create streams
 * and events, and load or compile modules on one GPU.
 *
 * <p>{@link #open(int)} retains the primary context ({@code cuDevicePrimaryCtxRetain}) and makes it
 * current on the calling thread; {@link #close()} releases that retain. Objects made from a context
 * call {@link #makeCurrent()} before driver calls, so they may be used from any thread (the current
 * context is per thread in CUDA). Closing the context does not close objects made from it: close them
 * first (try-with-resources in reverse order does that). The exception: the modules loaded by
 * {@link #kernel(KernelRequest)} and {@link #function}, which the context caches and unloads at close.
 *
 * <p>Reference: CUDA Driver API, "Primary Context Management", "Context Management",
 * "Device Management" ({@code cuDeviceGetAttribute}).
 */
public final class CudaContext implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CudaContext.class);
  private static final ThreadLocal<long[]> CURRENT = ThreadLocal.withInitial(() -> new long[1]);

  private final CudaDriver driver;
  private final int ordinal;
  private final int device;
  private final long handle;
  private final String name;
  private final int ccMajor;
  private final int ccMinor;
  private final int smCount;
  private final int maxThreadsPerBlock;
  private final int maxSharedBytesPerBlockOptin;
  private final long totalMemoryBytes;
  private final Map<String, CudaModule> kernels = new HashMap<>();
  private volatile boolean closed;

  private CudaContext(CudaDriver driver, int ordinal) {
    this.driver = driver;
    this.ordinal = ordinal;
    driver.init();
    this.device = driver.deviceGet(ordinal);
    this.name = driver.deviceGetName(device);
    this.ccMajor = driver.deviceGetAttribute(CudaDriver.ATTR_COMPUTE_CAPABILITY_MAJOR, device);
    this.ccMinor = driver.deviceGetAttribute(CudaDriver.ATTR_COMPUTE_CAPABILITY_MINOR, device);
    this.smCount = driver.deviceGetAttribute(CudaDriver.ATTR_MULTIPROCESSOR_COUNT, device);
    this.maxThreadsPerBlock = driver.deviceGetAttribute(CudaDriver.ATTR_MAX_THREADS_PER_BLOCK, device);
    this.maxSharedBytesPerBlockOptin = driver.deviceGetAttribute(CudaDriver.ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        device);
    this.totalMemoryBytes = driver.deviceTotalMem(device);
    this.handle = driver.devicePrimaryCtxRetain(device);
    makeCurrent();
    LOG.info("CUDA device {}: {} ({}), {} SMs, {} MiB", ordinal, name, arch(), smCount, totalMemoryBytes >> 20);
  }

  /**
   * Opens device {@code ordinal}'s primary context and makes it current on this thread.
   *
   * @param ordinal device ordinal, 0 ≤ ordinal &lt; {@link Cuda#deviceCount()}
   * @return the context
   * @throws CudaException        e.g. {@code CUDA_ERROR_INVALID_DEVICE}, {@code CUDA_ERROR_NO_DEVICE}
   * @throws UnsatisfiedLinkError if libcuda cannot be loaded
   */
  public static CudaContext open(int ordinal) {
    return new CudaContext(CudaDriver.get(), ordinal);
  }

  /**
   * Binds this context to the calling thread if it is not already ({@code cuCtxSetCurrent}); cheap
   * when it is (a thread-local compare).
   *
   * @throws CudaException        on failure
   * @throws IllegalStateException if the context is closed
   */
  public void makeCurrent() {
    if (closed) throw new IllegalStateException("CUDA context for device " + ordinal + " is closed");
    long[] cur = CURRENT.get();
    if (cur[0] != handle) {
      driver.ctxSetCurrent(handle);
      cur[0] = handle;
    }
  }

  /**
   * Waits for all work in this context ({@code cuCtxSynchronize}).
   *
   * @throws CudaException the error of earlier asynchronous work, if any
   */
  public void synchronize() {
    makeCurrent();
    driver.ctxSynchronize();
  }

  /**
   * Allocates device memory ({@code cuMemAlloc_v2}).
   *
   * @param bytes size in bytes, &gt; 0
   * @return the buffer (contents undefined)
   * @throws CudaException {@code CUDA_ERROR_OUT_OF_MEMORY}
   * @throws IllegalArgumentException if bytes ≤ 0
   */
  public DeviceBuffer alloc(long bytes) {
    if (bytes <= 0) throw new IllegalArgumentException("bytes must be > 0: " + bytes);
    makeCurrent();
    return new DeviceBuffer(this, driver.memAlloc(bytes), bytes, true);
  }

  /**
   * Allocates page-locked host memory ({@code cuMemAllocHost_v2}).
   *
   * @param bytes size in bytes, &gt; 0
   * @return the buffer
   * @throws CudaException {@code CUDA_ERROR_OUT_OF_MEMORY}
   * @throws IllegalArgumentException if bytes ≤ 0
   */
  public PinnedBuffer allocPinned(long bytes) {
    if (bytes <= 0) throw new IllegalArgumentException("bytes must be > 0: " + bytes);
    makeCurrent();
    return new PinnedBuffer(this, driver.memAllocHost(bytes), bytes);
  }

  /**
   * Creates a stream that does not synchronise with the legacy default stream
   * ({@code cuStreamCreate(CU_STREAM_NON_BLOCKING)}).
   *
   * @return the stream
   * @throws CudaException on failure
   */
  public CudaStream createStream() {
    makeCurrent();
    return new CudaStream(this, driver.streamCreate(CudaDriver.STREAM_NON_BLOCKING));
  }

  /**
   * Creates a timing event ({@code cuEventCreate(CU_EVENT_DEFAULT)}).
   *
   * @return the event
   * @throws CudaException on failure
   */
  public CudaEvent createEvent() {
    makeCurrent();
    return new CudaEvent(this, driver.eventCreate(CudaDriver.EVENT_DEFAULT));
  }

  /**
   * Creates an event without timing for ordering work across streams
   * ({@code cuEventCreate(CU_EVENT_DISABLE_TIMING)}, the cheaper kind for {@link CudaStream#waitEvent}).
   *
   * @return the event ({@link CudaEvent#elapsedMillisTo} fails on it)
   * @throws CudaException on failure
   */
  public CudaEvent createSyncEvent() {
    makeCurrent();
    return new CudaEvent(this, driver.eventCreate(CudaDriver.EVENT_DISABLE_TIMING));
  }

  /**
   * Loads a PTX module ({@code cuModuleLoadData}); the driver JIT-compiles it for this device.
   *
   * @param ptx PTX text (as produced by {@link Nvrtc})
   * @return the module
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_PTX}
   */
  public CudaModule loadModule(String ptx) {
    return CudaModule.load(this, ptx);
  }

  /**
   * Compiles CUDA C with NVRTC for this device's architecture (through the default {@link PtxCache})
   * and loads it.
   *
   * @param source       CUDA C source; kernels should be {@code extern "C"} to keep their names
   * @param programName  a name for logs, e.g. {@code "vector_add.cu"}
   * @param extraOptions further NVRTC options, e.g. {@code "-DG=128"}
   * @return the loaded module
   * @throws NvrtcException       with the compile log if compilation fails
   * @throws CudaException        if loading fails
   * @throws UnsatisfiedLinkError if libnvrtc cannot be loaded (and the PTX is not cached)
   */
  public CudaModule compileModule(String source, String programName, String... extraOptions) {
    String ptx = Nvrtc.compileCached(source, programName, computeArch(), List.of(extraOptions),
        PtxCache.defaultCache());
    return CudaModule.load(this, ptx);
  }

  /**
   * A Java kernel on this device, loaded once per context: its CUDA C from {@link KernelSources#defaults()} (a
   * pre-translated file, else translated here), NVRTC for {@link #computeArch()} through the default
   * {@link PtxCache}, one module per kernel cached under the request's {@link KernelSources#key key} until
   * {@link #close()}.
   *
   * @param request the kernel and its specialisation
   * @return the entry point, named like the Java method
   * @throws IllegalStateException  if there is no CUDA C for it and it cannot be translated here
   * @throws dev.taco.kernels.compiler.KernelCompileException if the translator rejects the kernel
   * @throws NvrtcException         if NVRTC rejects the CUDA C
   * @throws CudaException          if loading fails
   */
  public CudaFunction kernel(KernelRequest request) {
    KernelSources sources = KernelSources.defaults();
    return cached(sources.key(request), () -> sources.cudaSource(request), sources.file(request).getFileName()
        .toString()).function(request.methodName());
  }

  /**
   * A CUDA C entry point on this device, its module loaded once per context and cached by its source text until
   * {@link #close()}, as {@link #kernel} caches Java kernels: a helper kernel that every instance of a class uses (a
   * link's wire kernel, a spin) loads one module, however many instances come and go.
   *
   * @param source CUDA C, its entry point {@code extern "C"}
   * @param programName a name for logs, e.g. {@code "wire.cu"}
   * @param entry the entry point's name
   * @throws NvrtcException with the compile log if compilation fails
   * @throws CudaException if loading fails or there is no such entry point
   */
  public CudaFunction function(String source, String programName, String entry) {
    return cached("cuda-c " + programName + "\n" + source, () -> source, programName).function(entry);
  }

  private CudaModule cached(String key, java.util.function.Supplier<String> source, String programName) {
    synchronized (kernels) {
      makeCurrent();
      CudaModule m = kernels.get(key);
      if (m == null) {
        m = compileModule(source.get(), programName);
        kernels.put(key, m);
      }
      return m;
    }
  }

  /** @return the driver binding this context uses */
  public CudaDriver driver() { return driver; }

  /** @return the {@code CUcontext} handle */
  public long handle() { return handle; }

  /** @return the device ordinal */
  public int ordinal() { return ordinal; }

  /** @return the {@code CUdevice} handle */
  public int device() { return device; }

  /** @return the device's name, e.g. {@code "NVIDIA H200"} */
  public String name() { return name; }

  /** @return compute capability major version (9 on Hopper) */
  public int computeCapabilityMajor() { return ccMajor; }

  /** @return compute capability minor version (0 on H100/H200) */
  public int computeCapabilityMinor() {
    return ccMinor;
  }

  /** @return the number of streaming multiprocessors (132 on H200) */
  public int smCount() { return smCount; }

  /** @return the most threads a block may have (1024) */
  public int maxThreadsPerBlock() { return maxThreadsPerBlock; }

  /** @return the most dynamic shared memory a block may opt in to, bytes */
  public int maxSharedBytesPerBlockOptin() {
    return maxSharedBytesPerBlockOptin;
  }

  /** @return total device memory, bytes */
  public long totalMemoryBytes() { return totalMemoryBytes; }

  /** @return the real architecture name, e.g. {@code "sm_90"} */
  public String arch() {
    return "sm_" + ccMajor + ccMinor;
  }

  /** @return the virtual architecture name for PTX, e.g. {@code "compute_90"} */
  public String computeArch() {
    return "compute_" + ccMajor + ccMinor;
  }

  /** @return whether {@link #close()} has been called */
  public boolean isClosed() { return closed; }

  /**
   * Unloads the modules of {@link #kernel(KernelRequest)} and releases the primary-context retain
   * ({@code cuDevicePrimaryCtxRelease_v2}); idempotent.
   *
   * @throws CudaException on failure
   */
  @Override
  public void close() {
    if (closed) return;
    synchronized (kernels) {
      kernels.values().forEach(CudaModule::close);
      kernels.clear();
    }
    closed = true;
    long[] cur = CURRENT.get();
    if (cur[0] == handle) cur[0] = 0;
    driver.devicePrimaryCtxRelease(device);
  }

  @Override
  public String toString() {
    return "CudaContext[" + ordinal + ": " + name + ", " + arch() + ", " + smCount + " SMs]";
  }
}
