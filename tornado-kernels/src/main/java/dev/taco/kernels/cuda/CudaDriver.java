package dev.taco.kernels.cuda;

import com.sun.jna.Library;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.FloatByReference;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import com.sun.jna.ptr.PointerByReference;
import java.nio.charset.StandardCharsets;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * JNA binding of the CUDA driver API ({@code libcuda.so.1}), every status checked.
 *
 * <p>Each method calls the entry point of the same name (the {@code _v2} variant where {@code cuda.h}
 * of CUDA 13.0 maps the plain name to one, e.g. {@code cuMemAlloc} → {@code cuMemAlloc_v2}) and throws
 * {@link CudaException} naming the call, the numeric {@code CUresult}, {@code cuGetErrorName} and
 * {@code cuGetErrorString} when the status is not {@code CUDA_SUCCESS}.
 *
 * <p>Handles ({@code CUcontext}, {@code CUmodule}, {@code CUfunction}, {@code CUstream},
 * {@code CUevent}) and device pointers ({@code CUdeviceptr}, 64-bit) are Java {@code long}s: on the
 * LP64 ABI a pointer and a 64-bit integer are passed the same way, and a {@code long} costs no object.
 * A {@code CUdevice} is an {@code int}. The stream handle 0 is the legacy default stream.
 *
 * <p>Two mappings: the hot calls ({@code cuLaunchKernel}, the async copies, {@code cuEventRecord},
 * {@code cuStreamWaitEvent}, {@code cuStreamSynchronize}, {@code cuGraphLaunch}) use JNA direct mapping
 * ({@link Native#register(Class, NativeLibrary)}), about 5–6 µs per launch against 7.4 µs through an interface
 * (docs/design.md §5); the rest use an interface mapping, whose symbols are resolved lazily, so a driver lacking a rarely
 * used entry point still loads.
 *
 * <p>The library is searched as the system property {@code taco.libcuda} or {@code $TACO_LIBCUDA} if set, then {@code libcuda.so.1}, {@code cuda}.
 * Use {@link Cuda#available()} before {@link #get()} when a GPU may be absent.
 *
 * <p>Reference: NVIDIA CUDA Driver API (CUDA 13.0), modules "Initialization", "Device Management",
 * "Primary Context Management", "Context Management", "Memory Management", "Module Management",
 * "Execution Control", "Stream Management", "Event Management", "Graph Management", "Error Handling".
 */
public final class CudaDriver {
  private static final Logger LOG = LoggerFactory.getLogger(CudaDriver.class);

  /** {@code CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK}. */
  public static final int ATTR_MAX_THREADS_PER_BLOCK = 1;
  /** {@code CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT}. */
  public static final int ATTR_MULTIPROCESSOR_COUNT = 16;
  /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR}. */
  public static final int ATTR_COMPUTE_CAPABILITY_MAJOR = 75;
  /** {@code CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR}. */
  public static final int ATTR_COMPUTE_CAPABILITY_MINOR = 76;
  /** {@code CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN} (bytes). */
  public static final int ATTR_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
  /** {@code CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES}. */
  public static final int FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
  /** {@code CU_STREAM_NON_BLOCKING}: the stream does not synchronise with the legacy default stream. */
  public static final int STREAM_NON_BLOCKING = 0x1;
  /** {@code CU_EVENT_DEFAULT}: an event that records timing. */
  public static final int EVENT_DEFAULT = 0x0;
  /** {@code CU_EVENT_DISABLE_TIMING}. */
  public static final int EVENT_DISABLE_TIMING = 0x2;
  /** {@code CU_STREAM_CAPTURE_MODE_GLOBAL}: no thread may make a capture-unsafe call while this capture runs. */
  public static final int CAPTURE_MODE_GLOBAL = 0;
  /** {@code CU_STREAM_CAPTURE_MODE_THREAD_LOCAL}: only the capturing thread is barred from capture-unsafe calls. */
  public static final int CAPTURE_MODE_THREAD_LOCAL = 1;
  /** {@code CU_STREAM_CAPTURE_MODE_RELAXED}: no thread is barred (the caller takes care). */
  public static final int CAPTURE_MODE_RELAXED = 2;
  /** {@code CU_STREAM_CAPTURE_STATUS_ACTIVE}, from {@link #streamIsCapturing(long)}. */
  public static final int CAPTURE_STATUS_ACTIVE = 1;

  /** Interface-mapped entry points (resolved lazily at first call). */
  interface Api extends Library {
    int cuInit(int flags);
    int cuDriverGetVersion(IntByReference version);
    int cuDeviceGet(IntByReference device, int ordinal);
    int cuDeviceGetCount(IntByReference count);
    int cuDeviceGetName(byte[] name, int len, int dev);
    int cuDeviceGetAttribute(IntByReference pi, int attrib, int dev);
    int cuDeviceTotalMem_v2(LongByReference bytes, int dev);
    int cuDevicePrimaryCtxRetain(LongByReference pctx, int dev);
    int cuDevicePrimaryCtxRelease_v2(int dev);
    int cuCtxSetCurrent(long ctx);
    int cuCtxSynchronize();
    int cuMemGetInfo_v2(LongByReference free, LongByReference total);
    int cuMemAlloc_v2(LongByReference dptr, long bytesize);
    int cuMemFree_v2(long dptr);
    int cuMemAllocHost_v2(LongByReference pp, long bytesize);
    int cuMemFreeHost(long p);
    int cuMemcpyHtoD_v2(long dst, Pointer src, long byteCount);
    int cuMemcpyDtoH_v2(Pointer dst, long src, long byteCount);
    int cuMemcpyDtoD_v2(long dst, long src, long byteCount);
    int cuMemsetD8_v2(long dst, byte uc, long n);
    int cuMemsetD8Async(long dst, byte uc, long n, long stream);
    int cuModuleLoadData(LongByReference module, Pointer image);
    int cuModuleGetFunction(LongByReference hfunc, long hmod, String name);
    int cuModuleUnload(long hmod);
    int cuFuncSetAttribute(long hfunc, int attrib, int value);
    int cuFuncGetAttribute(IntByReference pi, int attrib, long hfunc);
    int cuStreamCreate(LongByReference phStream, int flags);
    int cuStreamDestroy_v2(long hStream);
    int cuEventCreate(LongByReference phEvent, int flags);
    int cuEventSynchronize(long hEvent);
    int cuEventQuery(long hEvent);
    int cuStreamQuery(long hStream);
    int cuEventElapsedTime_v2(FloatByReference ms, long start, long end);
    int cuEventElapsedTime(FloatByReference ms, long start, long end);
    int cuEventDestroy_v2(long hEvent);
    int cuGetErrorName(int error, PointerByReference pStr);
    int cuGetErrorString(int error, PointerByReference pStr);
    int cuLaunchKernel(long f, int gx, int gy, int gz, int bx, int by, int bz, int sharedMemBytes,
        long hStream, Pointer kernelParams, Pointer extra);
    int cuStreamBeginCapture_v2(long hStream, int mode);
    int cuStreamEndCapture(long hStream, LongByReference phGraph);
    int cuStreamIsCapturing(long hStream, IntByReference captureStatus);
    int cuGraphInstantiateWithFlags(LongByReference phGraphExec, long hGraph, long flags);
    int cuGraphGetNodes(long hGraph, Pointer nodes, LongByReference numNodes);
    int cuGraphExecDestroy(long hGraphExec);
    int cuGraphDestroy(long hGraph);
  }

  /** Direct-mapped hot entry points (bound once by {@link Native#register(Class, NativeLibrary)}). */
  static final class Direct {
    private Direct() {}
    static native int cuLaunchKernel(long f, int gx, int gy, int gz, int bx, int by, int bz,
        int sharedMemBytes, long hStream, long kernelParams, long extra);
    static native int cuMemcpyHtoDAsync_v2(long dst, long srcHost, long byteCount, long hStream);
    static native int cuMemcpyDtoHAsync_v2(long dstHost, long src, long byteCount, long hStream);
    static native int cuMemcpyDtoDAsync_v2(long dst, long src, long byteCount, long hStream);
    static native int cuEventRecord(long hEvent, long hStream);
    static native int cuStreamSynchronize(long hStream);
    static native int cuStreamWaitEvent(long hStream, long hEvent, int flags);
    static native int cuGraphLaunch(long hGraphExec, long hStream);
  }

  private static volatile CudaDriver instance;
  private static volatile Throwable loadFailure;

  private final Api api;
  private final String libraryName;
  private volatile boolean initialised;

  private CudaDriver(NativeLibrary lib, String name) {
    this.api = Native.load(name, Api.class);
    Native.register(Direct.class, lib);
    this.libraryName = name;
  }

  /**
   * The process-wide binding, loading libcuda on first use.
   *
   * @return the driver binding
   * @throws UnsatisfiedLinkError if no libcuda can be loaded (the cause of the first failure is kept
   *                              and rethrown on every later call)
   */
  public static CudaDriver get() {
    CudaDriver d = instance;
    if (d != null) return d;
    synchronized (CudaDriver.class) {
      if (instance != null) return instance;
      if (loadFailure != null) throw linkError(loadFailure);
      try {
        instance = NativeLibraries.loadFirst("libcuda", NativeLibraries.candidates("taco.libcuda",
            "TACO_LIBCUDA", "libcuda.so.1", "cuda"), n -> new CudaDriver(NativeLibrary.getInstance(n), n));
      } catch (UnsatisfiedLinkError e) {
        loadFailure = e;
        throw linkError(loadFailure);
      }
      LOG.debug("loaded CUDA driver library {}", instance.libraryName());
      return instance;
    }
  }

  private static UnsatisfiedLinkError linkError(Throwable t) {
    UnsatisfiedLinkError e = new UnsatisfiedLinkError(t.getMessage());
    e.initCause(t);
    return e;
  }

  /** @return the name under which libcuda was loaded, e.g. {@code "libcuda.so.1"} */
  public String libraryName() {
    return libraryName;
  }

  // ---------------------------------------------------------------- errors

  /**
   * Throws {@link CudaException} if {@code status} is not {@code CUDA_SUCCESS}.
   *
   * @param call   the entry point's name, for the message
   * @param status the {@code CUresult} it returned
   * @throws CudaException if {@code status != 0}
   */
  public void check(String call, int status) {
    if (status != 0) throw exception(call, status);
  }

  /**
   * Builds the exception for a failed call, describing the status with {@code cuGetErrorName} and
   * {@code cuGetErrorString} (falling back to {@link CudaErrors} if the driver cannot).
   *
   * @param call   the failed entry point
   * @param status its non-zero {@code CUresult}
   * @return the exception (not thrown)
   */
  public CudaException exception(String call, int status) {
    return new CudaException(call, status, errorName(status), errorString(status));
  }

  /**
   * {@code cuGetErrorName}: the symbolic name of a status.
   *
   * @param status a {@code CUresult}
   * @return e.g. {@code "CUDA_ERROR_INVALID_VALUE"}; the {@link CudaErrors} name if the driver does not know it
   */
  public String errorName(int status) {
    PointerByReference p = new PointerByReference();
    try {
      if (api.cuGetErrorName(status, p) == 0 && p.getValue() != null) return p.getValue().getString(0);
    } catch (UnsatisfiedLinkError ignored) {
      // fall through to the table
    }
    return CudaErrors.name(status);
  }

  /**
   * {@code cuGetErrorString}: the description of a status.
   *
   * @param status a {@code CUresult}
   * @return e.g. {@code "invalid argument"}; {@code "unrecognized error code"} if the driver does not know it
   */
  public String errorString(int status) {
    PointerByReference p = new PointerByReference();
    try {
      if (api.cuGetErrorString(status, p) == 0 && p.getValue() != null) return p.getValue().getString(0);
    } catch (UnsatisfiedLinkError ignored) {
      // fall through
    }
    return "unrecognized error code";
  }

  // ---------------------------------------------------------------- initialisation and devices

  /**
   * {@code cuInit(0)}, once per process (later calls return at once).
   *
   * @throws CudaException e.g. {@code CUDA_ERROR_NO_DEVICE}, {@code CUDA_ERROR_INSUFFICIENT_DRIVER}
   */
  public void init() {
    if (initialised) return;
    synchronized (this) {
      if (initialised) return;
      check("cuInit", api.cuInit(0));
      initialised = true;
    }
  }

  /**
   * {@code cuDriverGetVersion}.
   *
   * @return the driver's CUDA version as 1000 × major + 10 × minor, e.g. 13000 for 13.0
   * @throws CudaException on failure
   */
  public int driverVersion() {
    IntByReference v = new IntByReference();
    check("cuDriverGetVersion", api.cuDriverGetVersion(v));
    return v.getValue();
  }

  /**
   * {@code cuDeviceGetCount}.
   *
   * @return the number of CUDA devices visible to this process
   * @throws CudaException on failure (e.g. {@code CUDA_ERROR_NOT_INITIALIZED} before {@link #init()})
   */
  public int deviceGetCount() {
    IntByReference c = new IntByReference();
    check("cuDeviceGetCount", api.cuDeviceGetCount(c));
    return c.getValue();
  }

  /**
   * {@code cuDeviceGet}.
   *
   * @param ordinal device ordinal, 0 ≤ ordinal &lt; {@link #deviceGetCount()}
   * @return the {@code CUdevice} handle
   * @throws CudaException {@code CUDA_ERROR_INVALID_DEVICE} for a bad ordinal
   */
  public int deviceGet(int ordinal) {
    IntByReference d = new IntByReference();
    check("cuDeviceGet", api.cuDeviceGet(d, ordinal));
    return d.getValue();
  }

  /**
   * {@code cuDeviceGetName}.
   *
   * @param device a {@code CUdevice}
   * @return the device's name, e.g. {@code "NVIDIA H200"}
   * @throws CudaException on failure
   */
  public String deviceGetName(int device) {
    byte[] buf = new byte[256];
    check("cuDeviceGetName", api.cuDeviceGetName(buf, buf.length, device));
    int n = 0;
    while (n < buf.length && buf[n] != 0) n++;
    return new String(buf, 0, n, StandardCharsets.UTF_8);
  }

  /**
   * {@code cuDeviceGetAttribute}.
   *
   * @param attribute a {@code CUdevice_attribute}, e.g. {@link #ATTR_MULTIPROCESSOR_COUNT}
   * @param device    a {@code CUdevice}
   * @return the attribute's value
   * @throws CudaException {@code CUDA_ERROR_INVALID_VALUE} for an unknown attribute
   */
  public int deviceGetAttribute(int attribute, int device) {
    IntByReference v = new IntByReference();
    check("cuDeviceGetAttribute", api.cuDeviceGetAttribute(v, attribute, device));
    return v.getValue();
  }

  /**
   * {@code cuDeviceTotalMem_v2}.
   *
   * @param device a {@code CUdevice}
   * @return total device memory in bytes
   * @throws CudaException on failure
   */
  public long deviceTotalMem(int device) {
    LongByReference v = new LongByReference();
    check("cuDeviceTotalMem_v2", api.cuDeviceTotalMem_v2(v, device));
    return v.getValue();
  }

  // ---------------------------------------------------------------- contexts

  /**
   * {@code cuDevicePrimaryCtxRetain}: retain (creating if needed) the device's primary context.
   *
   * @param device a {@code CUdevice}
   * @return the {@code CUcontext} handle
   * @throws CudaException e.g. {@code CUDA_ERROR_OUT_OF_MEMORY}
   */
  public long devicePrimaryCtxRetain(int device) {
    LongByReference c = new LongByReference();
    check("cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain(c, device));
    return c.getValue();
  }

  /**
   * {@code cuDevicePrimaryCtxRelease_v2}: release one retain of the device's primary context.
   *
   * @param device a {@code CUdevice}
   * @throws CudaException on failure
   */
  public void devicePrimaryCtxRelease(int device) {
    check("cuDevicePrimaryCtxRelease_v2", api.cuDevicePrimaryCtxRelease_v2(device));
  }

  /**
   * {@code cuCtxSetCurrent}: bind a context to the calling thread.
   *
   * @param ctx a {@code CUcontext}, or 0 to unbind
   * @throws CudaException on failure
   */
  public void ctxSetCurrent(long ctx) {
    check("cuCtxSetCurrent", api.cuCtxSetCurrent(ctx));
  }

  /**
   * {@code cuCtxSynchronize}: wait for all work of the current context.
   *
   * @throws CudaException an error of earlier asynchronous work (e.g. {@code CUDA_ERROR_ILLEGAL_ADDRESS})
   */
  public void ctxSynchronize() {
    check("cuCtxSynchronize", api.cuCtxSynchronize());
  }

  /**
   * {@code cuMemGetInfo_v2} for the current context.
   *
   * @return {free, total} device memory in bytes
   * @throws CudaException on failure
   */
  public long[] memGetInfo() {
    LongByReference f = new LongByReference();
    LongByReference t = new LongByReference();
    check("cuMemGetInfo_v2", api.cuMemGetInfo_v2(f, t));
    return new long[] {f.getValue(), t.getValue()};
  }

  // ---------------------------------------------------------------- memory

  /**
   * {@code cuMemAlloc_v2} in the current context.
   *
   * @param bytes size in bytes, &gt; 0
   * @return the {@code CUdeviceptr} (64-bit device address, 256-byte aligned)
   * @throws CudaException {@code CUDA_ERROR_OUT_OF_MEMORY}, {@code CUDA_ERROR_INVALID_VALUE} for 0 bytes
   */
  public long memAlloc(long bytes) {
    LongByReference p = new LongByReference();
    check("cuMemAlloc_v2", api.cuMemAlloc_v2(p, bytes));
    return p.getValue();
  }

  /**
   * {@code cuMemFree_v2}.
   *
   * @param dptr a pointer from {@link #memAlloc(long)}
   * @throws CudaException on failure
   */
  public void memFree(long dptr) {
    check("cuMemFree_v2", api.cuMemFree_v2(dptr));
  }

  /**
   * {@code cuMemAllocHost_v2}: page-locked host memory, usable by async copies.
   *
   * @param bytes size in bytes, &gt; 0
   * @return the host address
   * @throws CudaException {@code CUDA_ERROR_OUT_OF_MEMORY}
   */
  public long memAllocHost(long bytes) {
    LongByReference p = new LongByReference();
    check("cuMemAllocHost_v2", api.cuMemAllocHost_v2(p, bytes));
    return p.getValue();
  }

  /**
   * {@code cuMemFreeHost}.
   *
   * @param address an address from {@link #memAllocHost(long)}
   * @throws CudaException on failure
   */
  public void memFreeHost(long address) {
    check("cuMemFreeHost", api.cuMemFreeHost(address));
  }

  /**
   * {@code cuMemcpyHtoD_v2} (synchronous with respect to the host).
   *
   * @param dst   device address
   * @param src   host memory
   * @param bytes byte count
   * @throws CudaException on failure
   */
  public void memcpyHtoD(long dst, Pointer src, long bytes) {
    check("cuMemcpyHtoD_v2", api.cuMemcpyHtoD_v2(dst, src, bytes));
  }

  /**
   * {@code cuMemcpyDtoH_v2} (synchronous with respect to the host).
   *
   * @param dst   host memory
   * @param src   device address
   * @param bytes byte count
   * @throws CudaException on failure
   */
  public void memcpyDtoH(Pointer dst, long src, long bytes) {
    check("cuMemcpyDtoH_v2", api.cuMemcpyDtoH_v2(dst, src, bytes));
  }

  /**
   * {@code cuMemcpyDtoD_v2}.
   *
   * @param dst   device address
   * @param src   device address
   * @param bytes byte count
   * @throws CudaException on failure
   */
  public void memcpyDtoD(long dst, long src, long bytes) {
    check("cuMemcpyDtoD_v2", api.cuMemcpyDtoD_v2(dst, src, bytes));
  }

  /**
   * {@code cuMemcpyHtoDAsync_v2} (direct mapping). {@code srcHost} must be page-locked for the copy
   * to be asynchronous.
   *
   * @param dst     device address
   * @param srcHost host address
   * @param bytes   byte count
   * @param stream  {@code CUstream}, 0 for the default stream
   * @throws CudaException on failure
   */
  public void memcpyHtoDAsync(long dst, long srcHost, long bytes, long stream) {
    int s = Direct.cuMemcpyHtoDAsync_v2(dst, srcHost, bytes, stream);
    if (s != 0) throw exception("cuMemcpyHtoDAsync_v2", s);
  }

  /**
   * {@code cuMemcpyDtoHAsync_v2} (direct mapping). {@code dstHost} must be page-locked.
   *
   * @param dstHost host address
   * @param src     device address
   * @param bytes   byte count
   * @param stream  {@code CUstream}
   * @throws CudaException on failure
   */
  public void memcpyDtoHAsync(long dstHost, long src, long bytes, long stream) {
    int s = Direct.cuMemcpyDtoHAsync_v2(dstHost, src, bytes, stream);
    if (s != 0) throw exception("cuMemcpyDtoHAsync_v2", s);
  }

  /**
   * {@code cuMemcpyDtoDAsync_v2} (direct mapping).
   *
   * @param dst    device address
   * @param src    device address
   * @param bytes  byte count
   * @param stream {@code CUstream}
   * @throws CudaException on failure
   */
  public void memcpyDtoDAsync(long dst, long src, long bytes, long stream) {
    int s = Direct.cuMemcpyDtoDAsync_v2(dst, src, bytes, stream);
    if (s != 0) throw exception("cuMemcpyDtoDAsync_v2", s);
  }

  /**
   * {@code cuMemsetD8_v2}.
   *
   * @param dst   device address
   * @param value byte value
   * @param count number of bytes
   * @throws CudaException on failure
   */
  public void memsetD8(long dst, byte value, long count) {
    check("cuMemsetD8_v2", api.cuMemsetD8_v2(dst, value, count));
  }

  /**
   * {@code cuMemsetD8Async}.
   *
   * @param dst    device address
   * @param value  byte value
   * @param count  number of bytes
   * @param stream {@code CUstream}
   * @throws CudaException on failure
   */
  public void memsetD8Async(long dst, byte value, long count, long stream) {
    check("cuMemsetD8Async", api.cuMemsetD8Async(dst, value, count, stream));
  }

  // ---------------------------------------------------------------- modules and launches

  /**
   * {@code cuModuleLoadData}: load a PTX (JIT-compiled by the driver) or cubin image.
   *
   * @param image the image; PTX must be NUL-terminated
   * @return the {@code CUmodule}
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_PTX}, {@code CUDA_ERROR_UNSUPPORTED_PTX_VERSION}
   */
  public long moduleLoadData(Pointer image) {
    LongByReference m = new LongByReference();
    check("cuModuleLoadData", api.cuModuleLoadData(m, image));
    return m.getValue();
  }

  /**
   * {@code cuModuleGetFunction}.
   *
   * @param module a {@code CUmodule}
   * @param name   the kernel's (unmangled if {@code extern "C"}) name
   * @return the {@code CUfunction}
   * @throws CudaException {@code CUDA_ERROR_NOT_FOUND} if there is no such kernel
   */
  public long moduleGetFunction(long module, String name) {
    LongByReference f = new LongByReference();
    check("cuModuleGetFunction(" + name + ")", api.cuModuleGetFunction(f, module, name));
    return f.getValue();
  }

  /**
   * {@code cuModuleUnload}.
   *
   * @param module a {@code CUmodule}
   * @throws CudaException on failure
   */
  public void moduleUnload(long module) {
    check("cuModuleUnload", api.cuModuleUnload(module));
  }

  /**
   * {@code cuFuncSetAttribute}.
   *
   * @param function  a {@code CUfunction}
   * @param attribute a {@code CUfunction_attribute}, e.g. {@link #FUNC_ATTR_MAX_DYNAMIC_SHARED_SIZE_BYTES}
   * @param value     the value
   * @throws CudaException {@code CUDA_ERROR_INVALID_VALUE} if out of range
   */
  public void funcSetAttribute(long function, int attribute, int value) {
    check("cuFuncSetAttribute", api.cuFuncSetAttribute(function, attribute, value));
  }

  /**
   * {@code cuFuncGetAttribute}.
   *
   * @param function  a {@code CUfunction}
   * @param attribute a {@code CUfunction_attribute} (0 = max threads per block, 4 = registers)
   * @return the value
   * @throws CudaException on failure
   */
  public int funcGetAttribute(long function, int attribute) {
    IntByReference v = new IntByReference();
    check("cuFuncGetAttribute", api.cuFuncGetAttribute(v, attribute, function));
    return v.getValue();
  }

  /**
   * {@code cuLaunchKernel} through direct mapping (the hot path).
   *
   * @param function     a {@code CUfunction}
   * @param gx           grid size x in blocks (y, z likewise)
   * @param gy           grid size y
   * @param gz           grid size z
   * @param bx           block size x in threads (y, z likewise); bx·by·bz ≤ 1024
   * @param by           block size y
   * @param bz           block size z
   * @param sharedBytes  dynamic shared memory per block, bytes
   * @param stream       {@code CUstream}, 0 for the default stream
   * @param kernelParams address of the {@code void*[]} of argument pointers, 0 for none
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_VALUE} (bad dimensions),
   *                       {@code CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES}
   */
  public void launchKernel(long function, int gx, int gy, int gz, int bx, int by, int bz, int sharedBytes,
      long stream, long kernelParams) {
    int s = Direct.cuLaunchKernel(function, gx, gy, gz, bx, by, bz, sharedBytes, stream, kernelParams, 0L);
    if (s != 0) throw exception("cuLaunchKernel", s);
  }

  /**
   * {@code cuLaunchKernel} through the interface mapping: the same call as
   * {@link #launchKernel(long, int, int, int, int, int, int, int, long, long)}, kept to measure what
   * direct mapping saves (docs/design.md §5).
   *
   * @param function     a {@code CUfunction}
   * @param gx           grid x
   * @param bx           block x
   * @param sharedBytes  dynamic shared memory, bytes
   * @param stream       {@code CUstream}
   * @param kernelParams the {@code void*[]} of argument pointers, or null
   * @throws CudaException on failure
   */
  public void launchKernelInterfaceMapped(long function, int gx, int bx, int sharedBytes, long stream,
      Pointer kernelParams) {
    check("cuLaunchKernel", api.cuLaunchKernel(function, gx, 1, 1, bx, 1, 1, sharedBytes, stream, kernelParams, null));
  }

  // ---------------------------------------------------------------- streams and events

  /**
   * {@code cuStreamCreate}.
   *
   * @param flags {@link #STREAM_NON_BLOCKING} or 0
   * @return the {@code CUstream}
   * @throws CudaException on failure
   */
  public long streamCreate(int flags) {
    LongByReference s = new LongByReference();
    check("cuStreamCreate", api.cuStreamCreate(s, flags));
    return s.getValue();
  }

  /**
   * {@code cuStreamSynchronize} (direct mapping).
   *
   * @param stream a {@code CUstream}
   * @throws CudaException an error of work on the stream (e.g. {@code CUDA_ERROR_ILLEGAL_ADDRESS})
   */
  public void streamSynchronize(long stream) {
    int s = Direct.cuStreamSynchronize(stream);
    if (s != 0) throw exception("cuStreamSynchronize", s);
  }

  /**
   * {@code cuStreamDestroy_v2}.
   *
   * @param stream a {@code CUstream}
   * @throws CudaException on failure
   */
  public void streamDestroy(long stream) {
    check("cuStreamDestroy_v2", api.cuStreamDestroy_v2(stream));
  }

  /**
   * {@code cuEventCreate}.
   *
   * @param flags {@link #EVENT_DEFAULT} (timing) or {@link #EVENT_DISABLE_TIMING}
   * @return the {@code CUevent}
   * @throws CudaException on failure
   */
  public long eventCreate(int flags) {
    LongByReference e = new LongByReference();
    check("cuEventCreate", api.cuEventCreate(e, flags));
    return e.getValue();
  }

  /**
   * {@code cuEventRecord} (direct mapping).
   *
   * @param event  a {@code CUevent}
   * @param stream a {@code CUstream}
   * @throws CudaException on failure
   */
  public void eventRecord(long event, long stream) {
    int s = Direct.cuEventRecord(event, stream);
    if (s != 0) throw exception("cuEventRecord", s);
  }

  /** {@code CUDA_ERROR_NOT_READY}: what {@code cuEventQuery} and {@code cuStreamQuery} return for pending work. */
  public static final int CUDA_ERROR_NOT_READY = 600;

  /**
   * {@code cuEventQuery}: whether the work captured by the event's last record has completed, without blocking.
   *
   * @param event a {@code CUevent}
   * @return true when complete (or never recorded), false while pending ({@code CUDA_ERROR_NOT_READY})
   * @throws CudaException any other status, e.g. the error of a kernel that failed before the event
   */
  public boolean eventQuery(long event) {
    int s = api.cuEventQuery(event);
    if (s == CUDA_ERROR_NOT_READY) return false;
    check("cuEventQuery", s);
    return true;
  }

  /**
   * {@code cuStreamQuery}: whether all work enqueued on the stream has completed, without blocking.
   *
   * @param stream a {@code CUstream}
   * @return true when idle, false while work is pending
   * @throws CudaException any other status
   */
  public boolean streamQuery(long stream) {
    int s = api.cuStreamQuery(stream);
    if (s == CUDA_ERROR_NOT_READY) return false;
    check("cuStreamQuery", s);
    return true;
  }

  /**
   * {@code cuStreamWaitEvent} (direct mapping): work enqueued on {@code stream} after this call waits for the
   * event's last record to complete; no host blocking. An event never recorded makes the wait a no-op.
   *
   * @param stream a {@code CUstream}
   * @param event  a {@code CUevent} of the same or another stream (of any context on the device)
   * @throws CudaException on failure
   */
  public void streamWaitEvent(long stream, long event) {
    int s = Direct.cuStreamWaitEvent(stream, event, 0);
    if (s != 0) throw exception("cuStreamWaitEvent", s);
  }

  /**
   * {@code cuEventSynchronize}.
   *
   * @param event a {@code CUevent}
   * @throws CudaException on failure
   */
  public void eventSynchronize(long event) {
    check("cuEventSynchronize", api.cuEventSynchronize(event));
  }

  /**
   * {@code cuEventElapsedTime_v2} (falling back to {@code cuEventElapsedTime} on drivers before 12.8).
   *
   * @param start a recorded, completed {@code CUevent}
   * @param end   a recorded, completed {@code CUevent}
   * @return milliseconds between the two (resolution about 0.5 µs)
   * @throws CudaException {@code CUDA_ERROR_NOT_READY} if either has not completed,
   *                       {@code CUDA_ERROR_INVALID_HANDLE} for events without timing
   */
  public float eventElapsedTime(long start, long end) {
    FloatByReference ms = new FloatByReference();
    int s;
    String call = "cuEventElapsedTime_v2";
    try {
      s = api.cuEventElapsedTime_v2(ms, start, end);
    } catch (UnsatisfiedLinkError e) {
      call = "cuEventElapsedTime";
      s = api.cuEventElapsedTime(ms, start, end);
    }
    check(call, s);
    return ms.getValue();
  }

  /**
   * {@code cuEventDestroy_v2}.
   *
   * @param event a {@code CUevent}
   * @throws CudaException on failure
   */
  public void eventDestroy(long event) {
    check("cuEventDestroy_v2", api.cuEventDestroy_v2(event));
  }

  // ---------------------------------------------------------------- stream capture and graphs

  /**
   * {@code cuStreamBeginCapture_v2} ({@code cuda.h} maps {@code cuStreamBeginCapture} to it): work enqueued on
   * {@code stream} afterwards, and on streams that wait on events recorded in the capture, is recorded into a graph
   * instead of running.
   *
   * @param stream a {@code CUstream}, not the legacy default stream
   * @param mode   {@link #CAPTURE_MODE_GLOBAL}, {@link #CAPTURE_MODE_THREAD_LOCAL} or {@link #CAPTURE_MODE_RELAXED}
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_VALUE} for the legacy stream or a stream already capturing
   */
  public void streamBeginCapture(long stream, int mode) {
    check("cuStreamBeginCapture_v2", api.cuStreamBeginCapture_v2(stream, mode));
  }

  /**
   * {@code cuStreamEndCapture}: ends the capture begun on {@code stream} (from the same thread unless relaxed).
   *
   * @param stream the {@code CUstream} the capture began on
   * @return the captured {@code CUgraph} (destroy with {@link #graphDestroy(long)})
   * @throws CudaException e.g. {@code CUDA_ERROR_STREAM_CAPTURE_UNJOINED} (a forked stream was not joined back),
   *                       {@code CUDA_ERROR_STREAM_CAPTURE_INVALIDATED} (an illegal call during the capture),
   *                       {@code CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD}; the stream has left capture mode either way
   */
  public long streamEndCapture(long stream) {
    LongByReference g = new LongByReference();
    check("cuStreamEndCapture", api.cuStreamEndCapture(stream, g));
    return g.getValue();
  }

  /**
   * {@code cuStreamIsCapturing}.
   *
   * @param stream a {@code CUstream}
   * @return {@code CU_STREAM_CAPTURE_STATUS_NONE} (0), {@link #CAPTURE_STATUS_ACTIVE} (1) or
   *         {@code CU_STREAM_CAPTURE_STATUS_INVALIDATED} (2)
   * @throws CudaException on failure
   */
  public int streamIsCapturing(long stream) {
    IntByReference st = new IntByReference();
    check("cuStreamIsCapturing", api.cuStreamIsCapturing(stream, st));
    return st.getValue();
  }

  /**
   * {@code cuGraphInstantiateWithFlags} with flags 0 ({@code cuda.h} maps {@code cuGraphInstantiate} to it).
   *
   * @param graph a {@code CUgraph}
   * @return the executable {@code CUgraphExec} (destroy with {@link #graphExecDestroy(long)})
   * @throws CudaException e.g. {@code CUDA_ERROR_INVALID_VALUE}
   */
  public long graphInstantiate(long graph) {
    LongByReference e = new LongByReference();
    check("cuGraphInstantiateWithFlags", api.cuGraphInstantiateWithFlags(e, graph, 0L));
    return e.getValue();
  }

  /**
   * {@code cuGraphGetNodes} with a null array: the number of nodes in a graph.
   *
   * @param graph a {@code CUgraph}
   * @return its node count
   * @throws CudaException on failure
   */
  public long graphNodeCount(long graph) {
    LongByReference n = new LongByReference();
    check("cuGraphGetNodes", api.cuGraphGetNodes(graph, null, n));
    return n.getValue();
  }

  /**
   * {@code cuGraphLaunch} (direct mapping): one call enqueues every node of the instantiated graph on {@code stream}.
   *
   * @param graphExec a {@code CUgraphExec}
   * @param stream    a {@code CUstream}
   * @throws CudaException on failure
   */
  public void graphLaunch(long graphExec, long stream) {
    int s = Direct.cuGraphLaunch(graphExec, stream);
    if (s != 0) throw exception("cuGraphLaunch", s);
  }

  /**
   * {@code cuGraphExecDestroy}.
   *
   * @param graphExec a {@code CUgraphExec}
   * @throws CudaException on failure
   */
  public void graphExecDestroy(long graphExec) {
    check("cuGraphExecDestroy", api.cuGraphExecDestroy(graphExec));
  }

  /**
   * {@code cuGraphDestroy}.
   *
   * @param graph a {@code CUgraph}
   * @throws CudaException on failure
   */
  public void graphDestroy(long graph) {
    check("cuGraphDestroy", api.cuGraphDestroy(graph));
  }
}
