package dev.taco.kernels.cuda;

import com.sun.jna.Library;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * cuBLAS GEMMs on device buffers through JNA, with the ROW-MAJOR semantics of the CPU {@link dev.taco.kernels.Gemm}:
 * {@code C[m,n] (+)= op(A)·op(B)}, bf16 or fp32 in, fp32 accumulation ({@code CUBLAS_COMPUTE_32F}), asynchronous on a
 * {@link CudaStream} (nothing here waits for the device).
 *
 * <h2>Row-major on a column-major library</h2>
 * The memory of a row-major r × c matrix X with leading dimension ld, read column-major with the same leading
 * dimension, is the c × r matrix Xᵀ. So the row-major product {@code C = op(A)·op(B)} is computed as the column-major
 * product {@code Cᵀ = op(B)ᵀ·op(A)ᵀ} (the transpose identity {@code (XY)ᵀ = YᵀXᵀ}): cuBLAS is called with the operands
 * swapped (B first), the sizes {@code (n, m, k)}, {@code transa = transB ? T : N}, {@code transb = transA ? T : N}, and
 * the row-major leading dimensions unchanged. No data moves; each transpose flag keeps its meaning and only changes
 * slot with its operand. The leading-dimension rules are then exactly {@link dev.taco.kernels.Gemm#gemm}'s: A is stored
 * [m, lda] with {@code lda >= k} (or, with {@code transA}, [k, lda] with {@code lda >= m}), B is [k, ldb] with
 * {@code ldb >= n} (or [n, ldb] with {@code ldb >= k}), C is [m, ldc] with {@code ldc >= n}.
 *
 * <h2>Types and precision</h2>
 * A and B share one {@link DataType}; C is fp32, or bf16 when A and B are bf16 (the {@code cublasGemmEx} type table for
 * {@code CUBLAS_COMPUTE_32F}). Products accumulate in fp32 on every path. fp32 inputs are multiplied as the handle's
 * {@link Fp32Math} says: exactly ({@code CUBLAS_COMPUTE_32F}, the default), or on tensor cores with the inputs rounded
 * to TF32 ({@code CUBLAS_COMPUTE_32F_FAST_TF32}, 10-bit mantissas) or to bf16 ({@code CUBLAS_COMPUTE_32F_FAST_16BF},
 * 7-bit mantissas: the bf16-in, fp32-accumulate arithmetic of a bf16 GEMM on fp32 storage). The math mode is {@code CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION}: a
 * split-K reduction of a bf16-output GEMM also stays in fp32 (PyTorch's
 * {@code allow_bf16_reduced_precision_reduction = False}). {@code NVIDIA_TF32_OVERRIDE=1} in the environment would
 * force TF32 behind our back; leave it unset. Alpha and beta are fp32 host scalars (the default
 * {@code CUBLAS_POINTER_MODE_HOST}: read when the call is made, so a CUDA graph capture records their values).
 *
 * <h2>Handle, stream, workspace</h2>
 * One {@code Cublas} is one {@code cublasHandle_t} ({@code cublasCreate_v2}) on one {@link CudaContext}, whose primary
 * context the runtime-API cuBLAS shares: every call makes it current first. The caller owns the workspace (
 * {@link #WORKSPACE_BYTES}, 32 MiB, is what cuBLAS recommends on Hopper) and keeps it alive until {@link #close()}.
 * cuBLAS runs a call on the handle's stream: when a call names a stream other than the last one, the handle is moved
 * there ({@code cublasSetStream_v2}) and given the workspace again ({@code cublasSetWorkspace_v2}), since
 * {@code cublasSetStream} resets the workspace to cuBLAS's own pool. One workspace serves one stream at a time: calls
 * through one handle on two streams must be ordered by events (or use a handle each). Methods are synchronized.
 *
 * <h2>Errors</h2>
 * Bad sizes, leading dimensions, offsets, types or buffers too small for the matrices throw
 * {@link IllegalArgumentException} naming the argument before anything is enqueued (as {@code Gemm} does); a null buffer
 * a {@link NullPointerException}. A failed cuBLAS call throws {@link CublasException} with the call, status number,
 * {@code cublasGetStatusName}, {@code cublasGetStatusString} and the column-major arguments passed. Errors of the
 * kernels themselves surface later, from the stream, as {@link CudaException}.
 *
 * <h2>Library</h2>
 * Searched as the system property {@code taco.libcublas} or {@code $TACO_LIBCUBLAS} if set, then
 * {@code libcublas.so.13}, {@code libcublas.so.12}, {@code cublas}. {@link #available()} says whether it loads.
 * Interface mapping for the setup calls, direct mapping ({@link Native#register(Class, NativeLibrary)}) for the GEMMs
 * and {@code cublasSetStream_v2} (docs/design.md §5).
 *
 * <p>Reference: cuBLAS Library User Guide (CUDA 13): "cuBLAS Helper Function Reference" ({@code cublasCreate},
 * {@code cublasDestroy}, {@code cublasSetStream}, {@code cublasSetWorkspace}, {@code cublasSetMathMode},
 * {@code cublasGetProperty}, {@code cublasGetStatusName}, {@code cublasGetStatusString}), "cublasGemmEx()",
 * "cublasGemmStridedBatchedEx()", "cublasComputeType_t", "cublasMath_t"; {@code cublas_api.h} of cuBLAS 13.1 for the
 * entry points ({@code _v2} names where {@code cublas_v2.h} maps them) and enum values; {@code library_types.h} for
 * {@code cudaDataType}.
 */
public final class Cublas implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(Cublas.class);

  /** The workspace size cuBLAS recommends on Hopper (32 MiB). */
  public static final long WORKSPACE_BYTES = 32L << 20;

  /** {@code CUBLAS_OP_N}. */
  static final int OP_N = 0;
  /** {@code CUBLAS_OP_T}. */
  static final int OP_T = 1;
  /** {@code CUBLAS_COMPUTE_32F}. */
  static final int COMPUTE_32F = 68;
  /** {@code CUBLAS_COMPUTE_32F_FAST_TF32}. */
  static final int COMPUTE_32F_FAST_TF32 = 77;
  /** {@code CUBLAS_COMPUTE_32F_FAST_16BF}. */
  static final int COMPUTE_32F_FAST_16BF = 75;
  /** {@code CUBLAS_GEMM_DEFAULT}: cuBLAS's heuristic picks the algorithm. */
  static final int GEMM_DEFAULT = -1;
  /** {@code CUBLAS_DEFAULT_MATH}. */
  static final int DEFAULT_MATH = 0;
  /** {@code CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION}. */
  static final int DISALLOW_REDUCED_PRECISION_REDUCTION = 16;

  /**
   * How a GEMM with fp32 inputs multiplies ({@code cublasComputeType_t}, cuBLAS guide "cublasComputeType_t"); bf16
   * inputs always use {@code CUBLAS_COMPUTE_32F}. Accumulation is fp32 in every mode.
   */
  public enum Fp32Math {
    /** {@code CUBLAS_COMPUTE_32F}: true fp32 products. */
    STRICT(COMPUTE_32F),
    /** {@code CUBLAS_COMPUTE_32F_FAST_TF32}: inputs rounded to TF32 (10-bit mantissa) on tensor cores. */
    TF32(COMPUTE_32F_FAST_TF32),
    /** {@code CUBLAS_COMPUTE_32F_FAST_16BF}: inputs rounded to bf16 (7-bit mantissa) on tensor cores. */
    BF16(COMPUTE_32F_FAST_16BF);

    /** The {@code cublasComputeType_t} value. */
    public final int computeType;

    Fp32Math(int computeType) {
      this.computeType = computeType;
    }
  }

  /** Element types of A, B and C ({@code cudaDataType} value, bytes per element). */
  public enum DataType {
    /** {@code CUDA_R_32F}: float32. */
    F32(0, 4),
    /** {@code CUDA_R_16BF}: bfloat16, carried as its 16-bit pattern (see {@link dev.taco.kernels.Bf16}). */
    BF16(14, 2);

    /** The {@code cudaDataType} value. */
    public final int cudaType;
    /** Bytes per element. */
    public final int bytes;

    DataType(int cudaType, int bytes) {
      this.cudaType = cudaType;
      this.bytes = bytes;
    }
  }

  /** The {@code cublasStatus_t} names of cuBLAS 13, for when the library cannot be asked. */
  static String statusName(int status) {
    return switch (status) {
      case 0 -> "CUBLAS_STATUS_SUCCESS";
      case 1 -> "CUBLAS_STATUS_NOT_INITIALIZED";
      case 3 -> "CUBLAS_STATUS_ALLOC_FAILED";
      case 7 -> "CUBLAS_STATUS_INVALID_VALUE";
      case 8 -> "CUBLAS_STATUS_ARCH_MISMATCH";
      case 11 -> "CUBLAS_STATUS_MAPPING_ERROR";
      case 13 -> "CUBLAS_STATUS_EXECUTION_FAILED";
      case 14 -> "CUBLAS_STATUS_INTERNAL_ERROR";
      case 15 -> "CUBLAS_STATUS_NOT_SUPPORTED";
      case 16 -> "CUBLAS_STATUS_LICENSE_ERROR";
      default -> "CUBLAS_STATUS_UNRECOGNIZED_" + status;
    };
  }

  interface Api extends Library {
    int cublasGetProperty(int type, IntByReference value);
    String cublasGetStatusName(int status);
    String cublasGetStatusString(int status);
    int cublasCreate_v2(LongByReference handle);
    int cublasDestroy_v2(long handle);
    int cublasSetMathMode(long handle, int mode);
    int cublasSetWorkspace_v2(long handle, long workspace, long bytes);
  }

  /** Direct-mapped hot entry points; pointers, handles and {@code size_t} as {@code long}, enums as {@code int}. */
  static final class Direct {
    private Direct() {}

    static native int cublasSetStream_v2(long handle, long stream);

    static native int cublasGemmEx(long handle, int transa, int transb, int m, int n, int k, long alpha,
        long a, int aType, int lda, long b, int bType, int ldb, long beta, long c, int cType, int ldc,
        int computeType, int algo);

    static native int cublasGemmStridedBatchedEx(long handle, int transa, int transb, int m, int n, int k, long alpha,
        long a, int aType, int lda, long strideA, long b, int bType, int ldb, long strideB, long beta,
        long c, int cType, int ldc, long strideC, int batchCount, int computeType, int algo);
  }

  /** The loaded library. */
  private record Binding(Api api, String name, String version) {
    String statusName(int status) {
      try {
        String s = api.cublasGetStatusName(status);
        if (s != null) return s;
      } catch (UnsatisfiedLinkError ignored) {
        // fall through to the table
      }
      return Cublas.statusName(status);
    }

    String statusString(int status) {
      try {
        String s = api.cublasGetStatusString(status);
        if (s != null) return s;
      } catch (UnsatisfiedLinkError ignored) {
        // fall through
      }
      return "unrecognized status";
    }

    void check(String call, int status, String detail) {
      if (status != 0) throw new CublasException(call, status, statusName(status), statusString(status), detail);
    }
  }

  /** The process-wide binding, loading libcublas on first use (the first failure, listing what was tried, stays). */
  private static final NativeLibraries.Once<Binding> BINDING = new NativeLibraries.Once<>(() -> {
    Binding loaded = NativeLibraries.loadFirst("libcublas", NativeLibraries.candidates("taco.libcublas",
        "TACO_LIBCUBLAS", "libcublas.so.13", "libcublas.so.12", "cublas"), name -> {
          NativeLibrary lib = NativeLibrary.getInstance(name);
          Api api = Native.load(name, Api.class);
          int[] v = new int[3];
          for (int p = 0; p < 3; p++) { // MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            IntByReference r = new IntByReference();
            int s = api.cublasGetProperty(p, r);
            if (s != 0) throw new UnsatisfiedLinkError("cublasGetProperty(" + p + ") returned " + s);
            v[p] = r.getValue();
          }
          Native.register(Direct.class, lib);
          return new Binding(api, name, v[0] + "." + v[1] + "." + v[2]);
        });
    LOG.debug("loaded cuBLAS {} from {}", loaded.version(), loaded.name());
    return loaded;
  });

  private static Binding binding() {
    return BINDING.get();
  }

  /**
   * Whether libcublas loads here (and answers {@code cublasGetProperty}). Never throws. It says nothing about a GPU:
   * GPU code asks {@code Cublas.available() && Cuda.available()}.
   *
   * @return true if the library loaded
   */
  public static boolean available() {
    return BINDING.available();
  }

  /**
   * @return why cuBLAS is unavailable (e.g. {@code "libcublas not loadable (libcublas.so.13: ...; ...)"}), or
   *     {@code "cuBLAS 13.1.1 available (libcublas.so.13)"}
   */
  public static String unavailableReason() {
    return BINDING.describe(b -> "cuBLAS " + b.version() + " available (" + b.name() + ")");
  }

  /**
   * @return the loaded library's version, e.g. {@code "13.1.1"} ({@code cublasGetProperty})
   * @throws UnsatisfiedLinkError if libcublas does not load
   */
  public static String version() { return binding().version(); }

  private final Binding lib;
  private final CudaContext ctx;
  private final DeviceBuffer workspace;
  private final Fp32Math fp32Math;
  private final long handle;
  private final Memory scalars = new Memory(8); // alpha at 0, beta at 4 (fp32)
  private long boundStream = -1; // the handle's stream; -1 before the first call
  private boolean closed;

  private Cublas(Binding lib, CudaContext ctx, DeviceBuffer workspace, Fp32Math fp32Math) {
    this.lib = lib;
    this.ctx = ctx;
    this.workspace = workspace;
    this.fp32Math = Objects.requireNonNull(fp32Math, "fp32Math");
    ctx.makeCurrent();
    LongByReference h = new LongByReference();
    lib.check("cublasCreate_v2", lib.api().cublasCreate_v2(h), "device " + ctx.ordinal());
    this.handle = h.getValue();
    int mode = DEFAULT_MATH | DISALLOW_REDUCED_PRECISION_REDUCTION;
    try {
      lib.check("cublasSetMathMode", lib.api().cublasSetMathMode(handle, mode), "mode=" + mode);
      lib.check("cublasSetWorkspace_v2",
          lib.api().cublasSetWorkspace_v2(handle, workspace.pointer(), workspace.bytes()),
          workspace.bytes() + " bytes");
    } catch (RuntimeException e) {
      lib.api().cublasDestroy_v2(handle);
      throw e;
    }
    LOG.debug("cuBLAS {} handle on device {} ({} MiB workspace, fp32 inputs {})", lib.version(), ctx.ordinal(),
        workspace.bytes() >> 20, fp32Math);
  }

  /**
   * A handle with TF32 off: fp32 GEMMs are true fp32.
   *
   * @param ctx       the context; its primary context is the one cuBLAS uses
   * @param workspace device memory of this context for cuBLAS's scratch, {@link #WORKSPACE_BYTES} recommended; the
   *                  caller frees it after {@link #close()}
   * @return the handle
   * @throws CublasException      e.g. {@code CUBLAS_STATUS_NOT_INITIALIZED} (no usable device)
   * @throws UnsatisfiedLinkError if libcublas does not load
   */
  public static Cublas create(CudaContext ctx, DeviceBuffer workspace) {
    return create(ctx, workspace, Fp32Math.STRICT);
  }

  /**
   * A handle.
   *
   * @param ctx       the context
   * @param workspace device memory of this context for cuBLAS's scratch ({@link #WORKSPACE_BYTES} recommended)
   * @param fp32Math  how GEMMs with fp32 inputs multiply
   * @return the handle
   * @throws CublasException      on a failed cuBLAS call
   * @throws UnsatisfiedLinkError if libcublas does not load
   * @throws IllegalArgumentException if the workspace belongs to another context or is empty
   */
  public static Cublas create(CudaContext ctx, DeviceBuffer workspace, Fp32Math fp32Math) {
    Objects.requireNonNull(ctx, "ctx");
    Objects.requireNonNull(workspace, "workspace");
    sameContext(ctx, "workspace", workspace);
    if (workspace.bytes() <= 0) throw new IllegalArgumentException("workspace is empty");
    return new Cublas(binding(), ctx, workspace, fp32Math);
  }

  /** @return the context */
  public CudaContext context() { return ctx; }

  /** @return how GEMMs with fp32 inputs multiply */
  public Fp32Math fp32Math() { return fp32Math; }

  /** @return the {@code cublasHandle_t} */
  public long handle() { return handle; }

  // ------------------------------------------------------------------ row-major GEMMs

  /**
   * {@code C[m,n] (+)= A[m,k]·B[k,n]}, row-major and dense (as {@link dev.taco.kernels.Gemm#matmul}): A at element
   * {@code aOff + i*k + p}, B at {@code bOff + p*n + j}, C at {@code cOff + i*n + j}.
   *
   * @param stream     the stream it is enqueued on
   * @param inType     type of A and B
   * @param outType    type of C ({@link DataType#F32}, or {@link DataType#BF16} when {@code inType} is BF16)
   * @param accumulate add into C when true, overwrite it when false
   * @throws IllegalArgumentException for bad sizes, offsets, types or buffers too small
   * @throws CublasException          if cuBLAS refuses the call
   */
  public void matmul(CudaStream stream, DataType inType, DataType outType, DeviceBuffer a, long aOff,
      DeviceBuffer b, long bOff, DeviceBuffer c, long cOff, int m, int n, int k, boolean accumulate) {
    gemm(stream, false, false, m, n, k, inType, outType, a, aOff, k, b, bOff, n, c, cOff, n, accumulate);
  }

  /**
   * {@code C[m,n] (+)= A[m,k]·Bᵀ} with B stored [n,k] (the {@code x·Wᵀ} of a linear layer), as
   * {@link dev.taco.kernels.Gemm#matmulTransB}.
   *
   * @see #matmul for the parameters and errors
   */
  public void matmulTransB(CudaStream stream, DataType inType, DataType outType, DeviceBuffer a, long aOff,
      DeviceBuffer b, long bOff, DeviceBuffer c, long cOff, int m, int n, int k, boolean accumulate) {
    gemm(stream, false, true, m, n, k, inType, outType, a, aOff, k, b, bOff, k, c, cOff, n, accumulate);
  }

  /**
   * {@code C[m,n] (+)= Aᵀ·B} with A stored [k,m] and B [k,n] (the weight gradient {@code Xᵀ·dY}), as
   * {@link dev.taco.kernels.Gemm#matmulTransA}.
   *
   * @see #matmul for the parameters and errors
   */
  public void matmulTransA(CudaStream stream, DataType inType, DataType outType, DeviceBuffer a, long aOff,
      DeviceBuffer b, long bOff, DeviceBuffer c, long cOff, int m, int n, int k, boolean accumulate) {
    gemm(stream, true, false, m, n, k, inType, outType, a, aOff, m, b, bOff, n, c, cOff, n, accumulate);
  }

  /**
   * General row-major form with leading dimensions, {@code C (+)= op(A)·op(B)}, as
   * {@link dev.taco.kernels.Gemm#gemm}: {@code alpha = 1}, {@code beta = accumulate ? 1 : 0}.
   *
   * @see #gemm(CudaStream, boolean, boolean, int, int, int, DataType, DataType, float, DeviceBuffer, long, int,
   *     DeviceBuffer, long, int, float, DeviceBuffer, long, int)
   */
  public void gemm(CudaStream stream, boolean transA, boolean transB, int m, int n, int k,
      DataType inType, DataType outType, DeviceBuffer a, long aOff, int lda, DeviceBuffer b, long bOff, int ldb,
      DeviceBuffer c, long cOff, int ldc, boolean accumulate) {
    gemm(stream, transA, transB, m, n, k, inType, outType, 1f, a, aOff, lda, b, bOff, ldb, accumulate ? 1f : 0f,
        c, cOff, ldc);
  }

  /**
   * {@code C = alpha·op(A)·op(B) + beta·C}, row-major ({@code cublasGemmEx}). {@code op(A)} is m×k: A is stored
   * [m, lda] (element (i,p) at {@code aOff + i*lda + p}, {@code lda >= k}) or, with {@code transA}, [k, lda] (element
   * (i,p) at {@code aOff + p*lda + i}, {@code lda >= m}). {@code op(B)} is k×n: B is [k, ldb] ({@code ldb >= n}) or,
   * with {@code transB}, [n, ldb] ({@code ldb >= k}). C is [m, ldc], {@code ldc >= n}. Offsets are in elements. With
   * {@code beta == 0} C is not read (NaNs in it do not leak). {@code k == 0} gives {@code C = beta·C}; {@code m == 0}
   * or {@code n == 0} enqueues nothing.
   *
   * @param stream  the stream the GEMM is enqueued on
   * @param inType  type of A and B
   * @param outType type of C: {@link DataType#F32}, or {@link DataType#BF16} when {@code inType} is BF16
   * @throws IllegalArgumentException if a size, leading dimension or offset is out of range, the types are not a
   *                                  supported pair, a buffer is too short or belongs to another context
   * @throws NullPointerException     if a buffer, type or the stream is null
   * @throws CublasException          if cuBLAS refuses the call
   */
  public synchronized void gemm(CudaStream stream, boolean transA, boolean transB, int m, int n, int k,
      DataType inType, DataType outType, float alpha, DeviceBuffer a, long aOff, int lda,
      DeviceBuffer b, long bOff, int ldb, float beta, DeviceBuffer c, long cOff, int ldc) {
    checkTypes(inType, outType);
    checkSizes(m, n, k, 1);
    long pa = operand(ctx, "a", a, aOff, inType, transA ? k : m, transA ? m : k, "lda", lda, 0, 1);
    long pb = operand(ctx, "b", b, bOff, inType, transB ? n : k, transB ? k : n, "ldb", ldb, 0, 1);
    long pc = operand(ctx, "c", c, cOff, outType, m, n, "ldc", ldc, 0, 1);
    if (m == 0 || n == 0) return;
    gemmExColumnMajor(stream, transB ? OP_T : OP_N, transA ? OP_T : OP_N, n, m, k, alpha,
        pb, inType, Math.max(1, ldb), pa, inType, Math.max(1, lda), beta, pc, outType, Math.max(1, ldc));
  }

  /**
   * {@code batchCount} independent row-major GEMMs {@code C_i = alpha·op(A_i)·op(B_i) + beta·C_i}
   * ({@code cublasGemmStridedBatchedEx}): matrix i of A starts at element {@code aOff + i*strideA}, of B at
   * {@code bOff + i*strideB}, of C at {@code cOff + i*strideC}; each is laid out as in
   * {@link #gemm(CudaStream, boolean, boolean, int, int, int, DataType, DataType, float, DeviceBuffer, long, int,
   * DeviceBuffer, long, int, float, DeviceBuffer, long, int)}. For attention's per-head products over (B·H) heads of
   * [T, d] blocks: scores {@code S = Q·Kᵀ} is {@code transB}, {@code m = n = T}, {@code k = d}; {@code P·V} is
   * {@code m = T, n = d, k = T}. A stride of 0 reuses one matrix for every batch (A and B only; C's matrices must not
   * overlap).
   *
   * @param strideA    elements between consecutive A matrices, {@code >= 0}
   * @param strideB    elements between consecutive B matrices, {@code >= 0}
   * @param strideC    elements between consecutive C matrices, {@code >= 0}
   * @param batchCount number of products, {@code >= 0} (0 enqueues nothing)
   * @throws IllegalArgumentException as for {@code gemm}, and for a negative stride or batch count
   * @throws CublasException          if cuBLAS refuses the call
   */
  public synchronized void gemmStridedBatched(CudaStream stream, boolean transA, boolean transB, int m, int n, int k,
      DataType inType, DataType outType, float alpha, DeviceBuffer a, long aOff, int lda, long strideA,
      DeviceBuffer b, long bOff, int ldb, long strideB, float beta, DeviceBuffer c, long cOff, int ldc, long strideC,
      int batchCount) {
    checkTypes(inType, outType);
    checkSizes(m, n, k, batchCount);
    long pa = operand(ctx, "a", a, aOff, inType, transA ? k : m, transA ? m : k, "lda", lda, strideA, batchCount);
    long pb = operand(ctx, "b", b, bOff, inType, transB ? n : k, transB ? k : n, "ldb", ldb, strideB, batchCount);
    long pc = operand(ctx, "c", c, cOff, outType, m, n, "ldc", ldc, strideC, batchCount);
    if (m == 0 || n == 0 || batchCount == 0) return;
    int opA = transB ? OP_T : OP_N, opB = transA ? OP_T : OP_N;
    int compute = computeType(inType);
    bind(stream);
    scalars.setFloat(0, alpha);
    scalars.setFloat(4, beta);
    long sp = Pointer.nativeValue(scalars);
    int s = Direct.cublasGemmStridedBatchedEx(handle, opA, opB, n, m, k, sp, pb, inType.cudaType, Math.max(1, ldb),
        strideB, pa, inType.cudaType, Math.max(1, lda), strideA, sp + 4, pc, outType.cudaType, Math.max(1, ldc),
        strideC, batchCount, compute, GEMM_DEFAULT);
    if (s != 0) {
      lib.check("cublasGemmStridedBatchedEx", s, describe(opA, opB, n, m, k, inType, Math.max(1, ldb), Math.max(1, lda),
          outType, Math.max(1, ldc), compute) + " strideA=" + strideB + " strideB=" + strideA + " strideC=" + strideC
          + " batchCount=" + batchCount);
    }
  }

  /**
   * The column-major {@code cublasGemmEx} exactly as cuBLAS takes it (operands as device addresses, no checks of
   * ours): for the row-major methods and for tests that need cuBLAS's own refusal.
   */
  void gemmExColumnMajor(CudaStream stream, int transa, int transb, int m, int n, int k, float alpha,
      long a, DataType aType, int lda, long b, DataType bType, int ldb, float beta, long c, DataType cType, int ldc) {
    int compute = computeType(aType);
    synchronized (this) {
      bind(stream);
      scalars.setFloat(0, alpha);
      scalars.setFloat(4, beta);
      long sp = Pointer.nativeValue(scalars);
      int s = Direct.cublasGemmEx(handle, transa, transb, m, n, k, sp, a, aType.cudaType, lda, b, bType.cudaType, ldb,
          sp + 4, c, cType.cudaType, ldc, compute, GEMM_DEFAULT);
      if (s != 0) lib.check("cublasGemmEx", s, describe(transa, transb, m, n, k, aType, lda, ldb, cType, ldc, compute));
    }
  }

  private int computeType(DataType inType) {
    return inType == DataType.F32 ? fp32Math.computeType : COMPUTE_32F;
  }

  private static String describe(int transa, int transb, int m, int n, int k, DataType in, int lda, int ldb,
      DataType out, int ldc, int compute) {
    return "transa=" + (transa == OP_N ? "N" : "T") + " transb=" + (transb == OP_N ? "N" : "T") + " m=" + m + " n=" + n
        + " k=" + k + " lda=" + lda + " ldb=" + ldb + " ldc=" + ldc + " A/B=" + in + " C=" + out + " compute="
        + computeName(compute);
  }

  private static String computeName(int compute) {
    return switch (compute) {
      case COMPUTE_32F -> "CUBLAS_COMPUTE_32F";
      case COMPUTE_32F_FAST_TF32 -> "CUBLAS_COMPUTE_32F_FAST_TF32";
      case COMPUTE_32F_FAST_16BF -> "CUBLAS_COMPUTE_32F_FAST_16BF";
      default -> String.valueOf(compute);
    };
  }

  /** Puts the handle on {@code stream} (and our workspace back) if it is elsewhere; makes the context current. */
  private void bind(CudaStream stream) {
    if (closed) throw new IllegalStateException("cuBLAS handle is closed");
    Objects.requireNonNull(stream, "stream");
    if (stream.context() != ctx) throw new IllegalArgumentException("stream belongs to another context");
    ctx.makeCurrent();
    long s = stream.handle();
    if (s == boundStream) return;
    lib.check("cublasSetStream_v2", Direct.cublasSetStream_v2(handle, s), "");
    // cublasSetStream resets the workspace to cuBLAS's default pool
    lib.check("cublasSetWorkspace_v2", lib.api().cublasSetWorkspace_v2(handle, workspace.pointer(), workspace.bytes()),
        workspace.bytes() + " bytes");
    boundStream = s;
  }

  // ------------------------------------------------------------------ checks (shared with CublasLt)

  static void checkTypes(DataType inType, DataType outType) {
    Objects.requireNonNull(inType, "inType");
    Objects.requireNonNull(outType, "outType");
    if (inType == DataType.F32 && outType == DataType.BF16) {
      throw new IllegalArgumentException("fp32 inputs need an fp32 output (cublasGemmEx with CUBLAS_COMPUTE_32F)");
    }
  }

  private static void checkSizes(int m, int n, int k, int batchCount) {
    nonNegative("m", m);
    nonNegative("n", n);
    nonNegative("k", k);
    nonNegative("batchCount", batchCount);
  }

  static void nonNegative(String name, long v) {
    if (v < 0) throw new IllegalArgumentException(name + " must be >= 0, got " + v);
  }

  static void sameContext(CudaContext ctx, String name, DeviceBuffer buf) {
    if (buf.context() != null && buf.context() != ctx) {
      throw new IllegalArgumentException(name + " belongs to another context");
    }
  }

  /**
   * Checks a row-major operand of {@code batch} matrices [rows, ld] holding {@code cols} columns each, {@code stride}
   * elements apart, from element {@code off} of {@code buf} (memory of {@code ctx}); returns its device address.
   */
  static long operand(CudaContext ctx, String name, DeviceBuffer buf, long off, DataType type, int rows, int cols,
      String ldName, int ld, long stride, int batch) {
    Objects.requireNonNull(buf, name);
    sameContext(ctx, name, buf);
    if (ld < cols) {
      throw new IllegalArgumentException(ldName + " must be >= " + cols + " (columns of " + name + "), got " + ld);
    }
    nonNegative(name + "Off", off);
    nonNegative("stride" + name.toUpperCase(java.util.Locale.ROOT), stride);
    long elements = rows == 0 || cols == 0 || batch == 0 ? off
        : off + (long) (batch - 1) * stride + (long) (rows - 1) * ld + cols;
    if (elements * type.bytes > buf.bytes()) {
      throw new IllegalArgumentException(name + " too short: " + (batch > 1 ? batch + " x " : "") + rows + "x" + cols
          + " " + type + " with " + ldName + "=" + ld + (batch > 1 ? " stride=" + stride : "") + " at element " + off
          + " needs " + elements * type.bytes + " bytes, buffer has " + buf.bytes());
    }
    return buf.pointer() + off * type.bytes;
  }

  /**
   * Destroys the handle ({@code cublasDestroy_v2}, which waits for the device: do it at the end, not per step);
   * idempotent. The workspace stays the caller's.
   *
   * @throws CublasException on failure
   */
  @Override
  public synchronized void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    try {
      lib.check("cublasDestroy_v2", lib.api().cublasDestroy_v2(handle), "");
    } finally {
      scalars.close();
    }
  }
}
