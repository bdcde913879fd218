package dev.taco.kernels.cuda;

import com.sun.jna.Library;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import com.sun.jna.ptr.IntByReference;
import com.sun.jna.ptr.LongByReference;
import dev.taco.kernels.cuda.Cublas.DataType;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One cuBLASLt matmul with a fused epilogue, row-major like {@link Cublas}: {@code C[m,n] = op(A)·op(B) + bias} or
 * {@code C = gelu(op(A)·op(B) + bias)}, bias broadcast along the rows (one value per output column j, the bias of a
 * linear layer {@code y = x·Wᵀ + b} with {@code transB}). A and B are bf16, dense ({@code lda = transA ? m : k},
 * {@code ldb = transB ? k : n}), offsets in elements; products accumulate in fp32 ({@code CUBLAS_COMPUTE_32F}, scale
 * type fp32, alpha 1, beta 0); C is bf16 or fp32 and the bias has C's type (cuBLASLt's default bias type: D's). Enqueued
 * on the given stream; nothing waits for the device.
 *
 * <p>Row-major mapping as in {@link Cublas}: the column-major {@code Cᵀ (n×m) = op(B)ᵀ·op(A)ᵀ}, so the bias, one value
 * per row of the column-major D (which is what {@code CUBLASLT_EPILOGUE_BIAS} adds), is one value per column of our C.
 *
 * <p>GELU: {@code CUBLASLT_EPILOGUE_GELU_BIAS} applies bias, then "GELU" ({@code cublasLt.h} says no more). PyTorch,
 * whose {@code _addmm_activation(use_gelu=True)} runs on this epilogue, decomposes that op on CUDA as
 * {@code gelu(approximate="tanh")}, i.e. the tanh approximation
 * {@code 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))} that {@code runtime/layers/Gelu} and GPT-2 use; the GPU test
 * {@code CublasGpuTest} measures which form the library computes (against both the tanh and the erf forms) rather than
 * taking that on trust.
 *
 * <p>Algorithm: chosen once per shape by {@code cublasLtMatmulAlgoGetHeuristic} (best of 1, within the workspace)
 * and cached with its descriptors. The key holds the epilogue, transposes, sizes, output type and the alignment (up
 * to 256 bytes) of each pointer: the heuristic assumes 256-byte alignment unless told otherwise
 * ({@code CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES}), and it reads the bias pointer's alignment from the descriptor.
 * Per call only the bias and aux pointer attributes are set again (host-side; the library reads descriptors when the
 * call is made).
 *
 * <p>Workspace: caller-owned, {@link Cublas#WORKSPACE_BYTES} recommended; one {@link Cublas} and one {@code CublasLt}
 * may share a workspace when their work is ordered on one stream. Methods are synchronized.
 *
 * <p>Errors as in {@link Cublas}: {@link IllegalArgumentException} before anything is enqueued for bad sizes, types or
 * short buffers; {@link CublasException} for a refused call ({@code cublasLtGetStatusName},
 * {@code cublasLtGetStatusString}); {@code CUBLAS_STATUS_NOT_SUPPORTED} when the heuristic finds no algorithm.
 *
 * <p>Library: the system property {@code taco.libcublaslt} or {@code $TACO_LIBCUBLASLT} if set, then
 * {@code libcublasLt.so.13}, {@code libcublasLt.so.12}, {@code cublasLt}.
 *
 * <p>Reference: cuBLAS Library User Guide (CUDA 13), "Using the cuBLASLt API": {@code cublasLtCreate},
 * {@code cublasLtMatmul}, {@code cublasLtMatmulDescCreate}/{@code SetAttribute}/{@code Destroy},
 * {@code cublasLtMatrixLayoutCreate}/{@code Destroy}, {@code cublasLtMatmulPreferenceCreate}/{@code SetAttribute}/
 * {@code Destroy}, {@code cublasLtMatmulAlgoGetHeuristic}, {@code cublasLtMatmulDescAttributes_t},
 * {@code cublasLtMatmulPreferenceAttributes_t}, {@code cublasLtEpilogue_t}; {@code cublasLt.h} of cuBLAS 13.1 for the
 * enum values and {@code cublasLtMatmulHeuristicResult_t} (96 bytes: algo[64], workspaceSize, state, wavesCount,
 * reserved[4]).
 */
public final class CublasLt implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(CublasLt.class);

  /** The fused epilogues offered ({@code cublasLtEpilogue_t}). */
  public enum Epilogue {
    /** {@code CUBLASLT_EPILOGUE_BIAS}: {@code C = A·B + bias}. */
    BIAS(4, true, false),
    /** {@code CUBLASLT_EPILOGUE_GELU_BIAS}: {@code C = gelu(A·B + bias)}. */
    GELU_BIAS(36, true, false),
    /**
     * {@code CUBLASLT_EPILOGUE_GELU_AUX_BIAS}: {@code aux = A·B + bias}, {@code C = gelu(aux)} (the GELU's input kept
     * for the backward).
     */
    GELU_AUX_BIAS(164, true, true),
    /** {@code CUBLASLT_EPILOGUE_DGELU}: {@code C = (A·B) ⊙ gelu'(aux)}, aux the GELU's input (no bias). */
    DGELU(192, false, true);

    /** The {@code cublasLtEpilogue_t} value. */
    public final int value;
    /** Whether it adds a bias vector ({@code CUBLASLT_MATMUL_DESC_BIAS_POINTER}). */
    public final boolean bias;
    /**
     * Whether it writes or reads an auxiliary matrix of C's type and shape ({@code CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_*};
     * its leading dimension must be divisible by 8).
     */
    public final boolean aux;

    Epilogue(int value, boolean bias, boolean aux) {
      this.value = value;
      this.bias = bias;
      this.aux = aux;
    }
  }

  /** {@code CUBLASLT_MATMUL_DESC_TRANSA} (int32). */
  static final int DESC_TRANSA = 3;
  /** {@code CUBLASLT_MATMUL_DESC_TRANSB} (int32). */
  static final int DESC_TRANSB = 4;
  /** {@code CUBLASLT_MATMUL_DESC_EPILOGUE} (uint32). */
  static final int DESC_EPILOGUE = 7;
  /** {@code CUBLASLT_MATMUL_DESC_BIAS_POINTER} (const void*). */
  static final int DESC_BIAS_POINTER = 8;
  /** {@code CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER} (void*). */
  static final int DESC_EPILOGUE_AUX_POINTER = 11;
  /** {@code CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD} (int64). */
  static final int DESC_EPILOGUE_AUX_LD = 12;
  /** {@code CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES} (uint64). */
  static final int PREF_MAX_WORKSPACE_BYTES = 1;
  /** {@code CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES} (uint32); B, C, D follow as 6, 7, 8. */
  static final int PREF_MIN_ALIGNMENT_A_BYTES = 5;
  /** {@code sizeof(cublasLtMatmulHeuristicResult_t)}. */
  static final int HEURISTIC_RESULT_BYTES = 96;
  /** Offset of {@code workspaceSize} in it (after the 64-byte {@code cublasLtMatmulAlgo_t}). */
  static final int HEURISTIC_WORKSPACE_OFFSET = 64;
  /** Offset of {@code state}. */
  static final int HEURISTIC_STATE_OFFSET = 72;
  /** Offset of {@code wavesCount}. */
  static final int HEURISTIC_WAVES_OFFSET = 76;

  interface Api extends Library {
    long cublasLtGetVersion();
    String cublasLtGetStatusName(int status);
    String cublasLtGetStatusString(int status);
    int cublasLtCreate(LongByReference handle);
    int cublasLtDestroy(long handle);
    int cublasLtMatmulDescCreate(LongByReference desc, int computeType, int scaleType);
    int cublasLtMatmulDescDestroy(long desc);
    int cublasLtMatmulDescSetAttribute(long desc, int attr, Pointer buf, long size);
    int cublasLtMatrixLayoutCreate(LongByReference layout, int type, long rows, long cols, long ld);
    int cublasLtMatrixLayoutDestroy(long layout);
    int cublasLtMatmulPreferenceCreate(LongByReference pref);
    int cublasLtMatmulPreferenceDestroy(long pref);
    int cublasLtMatmulPreferenceSetAttribute(long pref, int attr, Pointer buf, long size);
    int cublasLtMatmulAlgoGetHeuristic(long handle, long desc, long aDesc, long bDesc, long cDesc, long dDesc,
        long pref, int requested, Pointer results, IntByReference returned);
  }

  /** Direct-mapped {@code cublasLtMatmul}: every pointer and handle as {@code long}. */
  static final class Direct {
    private Direct() {}

    static native int cublasLtMatmul(long handle, long desc, long alpha, long a, long aDesc, long b, long bDesc,
        long beta, long c, long cDesc, long d, long dDesc, long algo, long workspace, long workspaceBytes, long stream);
  }

  private record Binding(Api api, String name, String version) {
    void check(String call, int status, String detail) {
      if (status == 0) return;
      String name = null, text = null;
      try {
        name = api.cublasLtGetStatusName(status);
        text = api.cublasLtGetStatusString(status);
      } catch (UnsatisfiedLinkError ignored) {
        // fall through to the table
      }
      throw new CublasException(call, status, name != null ? name : Cublas.statusName(status),
          text != null ? text : "unrecognized status", detail);
    }
  }

  /** The process-wide binding, loading libcublasLt on first use (the first failure stays the answer). */
  private static final NativeLibraries.Once<Binding> BINDING = new NativeLibraries.Once<>(() -> {
    Binding loaded = NativeLibraries.loadFirst("libcublasLt", NativeLibraries.candidates("taco.libcublaslt",
        "TACO_LIBCUBLASLT", "libcublasLt.so.13", "libcublasLt.so.12", "cublasLt"), name -> {
          NativeLibrary lib = NativeLibrary.getInstance(name);
          Api api = Native.load(name, Api.class);
          long v = api.cublasLtGetVersion(); // e.g. 130101
          Native.register(Direct.class, lib);
          return new Binding(api, name, v / 10000 + "." + v / 100 % 100 + "." + v % 100);
        });
    LOG.debug("loaded cuBLASLt {} from {}", loaded.version(), loaded.name());
    return loaded;
  });

  private static Binding binding() {
    return BINDING.get();
  }

  /**
   * Whether libcublasLt loads here. Never throws; says nothing about a GPU.
   *
   * @return true if the library loaded
   */
  public static boolean available() {
    return BINDING.available();
  }

  /** @return why cuBLASLt is unavailable, or {@code "cuBLASLt 13.1.1 available (libcublasLt.so.13)"} */
  public static String unavailableReason() {
    return BINDING.describe(b -> "cuBLASLt " + b.version() + " available (" + b.name() + ")");
  }

  /** The cache key: everything the heuristic's choice depends on. */
  private record Key(Epilogue epilogue, boolean transA, boolean transB, int m, int n, int k, DataType outType,
      int alignA, int alignB, int alignC, int alignBias, int alignAux) {}

  /** A cached shape: descriptors and the chosen algorithm. */
  private static final class Plan {
    long desc, layoutA, layoutB, layoutD, pref;
    final Memory result = new Memory(HEURISTIC_RESULT_BYTES);

    void destroy(Api api) {
      if (pref != 0) api.cublasLtMatmulPreferenceDestroy(pref);
      if (layoutD != 0) api.cublasLtMatrixLayoutDestroy(layoutD);
      if (layoutB != 0) api.cublasLtMatrixLayoutDestroy(layoutB);
      if (layoutA != 0) api.cublasLtMatrixLayoutDestroy(layoutA);
      if (desc != 0) api.cublasLtMatmulDescDestroy(desc);
      result.close();
    }
  }

  private final Binding lib;
  private final CudaContext ctx;
  private final DeviceBuffer workspace;
  private final long handle;
  private final Memory scalars = new Memory(8); // alpha = 1 at 0, beta = 0 at 4 (fp32)
  private final Memory attr = new Memory(8);
  private final Map<Key, Plan> plans = new HashMap<>();
  private boolean closed;

  private CublasLt(Binding lib, CudaContext ctx, DeviceBuffer workspace) {
    this.lib = lib;
    this.ctx = ctx;
    this.workspace = workspace;
    scalars.setFloat(0, 1f);
    scalars.setFloat(4, 0f);
    ctx.makeCurrent();
    LongByReference h = new LongByReference();
    lib.check("cublasLtCreate", lib.api().cublasLtCreate(h), "device " + ctx.ordinal());
    this.handle = h.getValue();
  }

  /**
   * A cuBLASLt handle ({@code cublasLtCreate}) on {@code ctx}.
   *
   * @param ctx       the context (its primary context is the one cuBLASLt uses)
   * @param workspace device memory of this context, {@link Cublas#WORKSPACE_BYTES} recommended; the caller frees it
   *                  after {@link #close()}
   * @return the handle
   * @throws CublasException      on a failed call
   * @throws UnsatisfiedLinkError if libcublasLt does not load
   */
  public static CublasLt create(CudaContext ctx, DeviceBuffer workspace) {
    Objects.requireNonNull(ctx, "ctx");
    Objects.requireNonNull(workspace, "workspace");
    Cublas.sameContext(ctx, "workspace", workspace);
    return new CublasLt(binding(), ctx, workspace);
  }

  /**
   * {@code C[m,n] = epilogue(op(A)·op(B) + bias)}, row-major: A is bf16 [m,k] (or [k,m] with {@code transA}), B is
   * bf16 [k,n] (or [n,k] with {@code transB}), bias is {@code n} values of {@code outType}, C is [m,n] of
   * {@code outType}; all dense, offsets in elements. C must not overlap A, B or the bias.
   *
   * @param stream   the stream it is enqueued on
   * @param epilogue {@link Epilogue#BIAS} or {@link Epilogue#GELU_BIAS}
   * @param outType  type of C and of the bias: {@link DataType#BF16} or {@link DataType#F32}
   * @throws IllegalArgumentException for sizes below 1, or buffers too short or of another context
   * @throws CublasException          if cuBLASLt refuses the call or has no algorithm for it
   *                                  ({@code CUBLAS_STATUS_NOT_SUPPORTED})
   */
  public void matmul(CudaStream stream, Epilogue epilogue, boolean transA, boolean transB,
      int m, int n, int k, DeviceBuffer a, long aOff, DeviceBuffer b, long bOff, DeviceBuffer bias, long biasOff,
      DataType outType, DeviceBuffer c, long cOff) {
    matmul(stream, epilogue, transA, transB, m, n, k, a, aOff, b, bOff, bias, biasOff, null, 0, outType, c, cOff);
  }

  /**
   * {@link #matmul(CudaStream, Epilogue, boolean, boolean, int, int, int, DeviceBuffer, long, DeviceBuffer, long,
   * DeviceBuffer, long, DataType, DeviceBuffer, long)} for every epilogue: {@code aux} is an [m,n] matrix of
   * {@code outType} (dense, ld n) that {@link Epilogue#GELU_AUX_BIAS} writes and {@link Epilogue#DGELU} reads, null
   * for the others; {@code bias} is null for {@link Epilogue#DGELU}.
   *
   * @throws IllegalArgumentException also for a bias or aux given where the epilogue takes none or missing where it
   *     needs one, and for an aux epilogue with n not divisible by 8 (cuBLASLt's rule for its leading dimension)
   */
  public synchronized void matmul(CudaStream stream, Epilogue epilogue, boolean transA, boolean transB,
      int m, int n, int k, DeviceBuffer a, long aOff, DeviceBuffer b, long bOff, DeviceBuffer bias, long biasOff,
      DeviceBuffer aux, long auxOff, DataType outType, DeviceBuffer c, long cOff) {
    Objects.requireNonNull(epilogue, "epilogue");
    if ((bias != null) != epilogue.bias || (aux != null) != epilogue.aux) {
      throw new IllegalArgumentException(epilogue + " takes " + (epilogue.bias ? "a bias" : "no bias") + " and "
          + (epilogue.aux ? "an aux matrix" : "no aux matrix") + ", given " + (bias == null ? "no bias" : "a bias")
          + " and " + (aux == null ? "no aux matrix" : "an aux matrix"));
    }
    if (epilogue.aux && n % 8 != 0) {
      throw new IllegalArgumentException(epilogue + ": n = " + n + " is the aux matrix's leading dimension, which must "
          + "be divisible by 8");
    }
    Objects.requireNonNull(stream, "stream");
    Cublas.checkTypes(DataType.BF16, outType);
    if (m < 1 || n < 1 || k < 1)
      throw new IllegalArgumentException("sizes must be >= 1: m=" + m + " n=" + n + " k=" + k);
    long pa = Cublas.operand(ctx, "a", a, aOff, DataType.BF16, transA ? k : m, transA ? m : k, "lda", transA ? m : k, 0,
        1);
    long pb = Cublas.operand(ctx, "b", b, bOff, DataType.BF16, transB ? n : k, transB ? k : n, "ldb", transB ? k : n, 0,
        1);
    long pc = Cublas.operand(ctx, "c", c, cOff, outType, m, n, "ldc", n, 0, 1);
    long pbias = bias == null ? 0 : Cublas.operand(ctx, "bias", bias, biasOff, outType, 1, n, "length", n, 0, 1);
    long paux = aux == null ? 0 : Cublas.operand(ctx, "aux", aux, auxOff, outType, m, n, "ld", n, 0, 1);
    if (stream.context() != ctx) throw new IllegalArgumentException("stream belongs to another context");
    if (closed) throw new IllegalStateException("cuBLASLt handle is closed");
    ctx.makeCurrent();
    Key key = new Key(epilogue, transA, transB, m, n, k, outType, align(pa), align(pb), align(pc), align(pbias),
        align(paux));
    Plan plan = plans.get(key);
    if (plan == null) {
      plan = plan(key, pbias, paux);
      plans.put(key, plan);
    }
    String detail = describe(key);
    pointers(plan.desc, pbias, paux, epilogue);
    long sp = Pointer.nativeValue(scalars);
    // column-major: A' = our B, B' = our A, C = D = our C
    lib.check("cublasLtMatmul", Direct.cublasLtMatmul(handle, plan.desc, sp, pb, plan.layoutA, pa, plan.layoutB,
        sp + 4, pc, plan.layoutD, pc, plan.layoutD, Pointer.nativeValue(plan.result), workspace.pointer(),
        workspace.bytes(), stream.handle()), detail);
  }

  /** @return the number of shapes whose algorithm is cached */
  public synchronized int cachedPlans() {
    return plans.size();
  }

  /** The alignment of a device address in bytes, at most 256. */
  static int align(long address) {
    return address == 0 ? 256 : (int) Math.min(256, Long.lowestOneBit(address));
  }

  private static String describe(Key key) {
    return key.epilogue() + " row-major m=" + key.m() + " n=" + key.n() + " k=" + key.k() + " transA=" + key.transA()
        + " transB=" + key.transB() + " A/B=BF16 C=" + key.outType() + " (column-major D " + key.n() + "x" + key.m()
        + "), alignment A/B/C/bias/aux " + key.alignA() + "/" + key.alignB() + "/" + key.alignC() + "/"
        + key.alignBias() + "/" + key.alignAux();
  }

  private void setInt(long desc, int attribute, int value, String name) {
    attr.setInt(0, value);
    lib.check("cublasLtMatmulDescSetAttribute", lib.api().cublasLtMatmulDescSetAttribute(desc, attribute, attr, 4),
        name);
  }

  private long layout(DataType type, long rows, long cols, long ld) {
    LongByReference r = new LongByReference();
    lib.check("cublasLtMatrixLayoutCreate", lib.api().cublasLtMatrixLayoutCreate(r, type.cudaType, rows, cols, ld),
        type + " " + rows + "x" + cols + " ld=" + ld);
    return r.getValue();
  }

  /** Sets the bias and aux pointers of a descriptor, those its epilogue uses. */
  private void pointers(long desc, long bias, long aux, Epilogue epilogue) {
    if (epilogue.bias) {
      attr.setLong(0, bias);
      lib.check("cublasLtMatmulDescSetAttribute", lib.api().cublasLtMatmulDescSetAttribute(desc, DESC_BIAS_POINTER,
          attr, 8), "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
    }
    if (epilogue.aux) {
      attr.setLong(0, aux);
      lib.check("cublasLtMatmulDescSetAttribute", lib.api().cublasLtMatmulDescSetAttribute(desc,
          DESC_EPILOGUE_AUX_POINTER, attr, 8), "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER");
    }
  }

  /** Builds the descriptors for {@code key} and asks the heuristic for the best algorithm. */
  private Plan plan(Key key, long biasPointer, long auxPointer) {
    Api api = lib.api();
    Plan p = new Plan();
    String detail = describe(key);
    try {
      LongByReference r = new LongByReference();
      lib.check("cublasLtMatmulDescCreate", api.cublasLtMatmulDescCreate(r, Cublas.COMPUTE_32F, DataType.F32.cudaType),
          "CUBLAS_COMPUTE_32F, scale CUDA_R_32F");
      p.desc = r.getValue();
      setInt(p.desc, DESC_TRANSA, key.transB() ? Cublas.OP_T : Cublas.OP_N, "CUBLASLT_MATMUL_DESC_TRANSA");
      setInt(p.desc, DESC_TRANSB, key.transA() ? Cublas.OP_T : Cublas.OP_N, "CUBLASLT_MATMUL_DESC_TRANSB");
      setInt(p.desc, DESC_EPILOGUE, key.epilogue().value, "CUBLASLT_MATMUL_DESC_EPILOGUE");
      int m = key.m(), n = key.n(), k = key.k();
      if (key.epilogue().aux) { // the aux matrix has D's column-major shape (n x m): leading dimension n
        attr.setLong(0, n);
        lib.check("cublasLtMatmulDescSetAttribute", api.cublasLtMatmulDescSetAttribute(p.desc, DESC_EPILOGUE_AUX_LD,
            attr, 8), "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD");
      }
      pointers(p.desc, biasPointer, auxPointer, key.epilogue());
      // the stored column-major shapes (before op): our row-major B [k,n] is n×k (ld n), [n,k] is k×n (ld k); likewise A
      p.layoutA = key.transB() ? layout(DataType.BF16, k, n, k) : layout(DataType.BF16, n, k, n);
      p.layoutB = key.transA() ? layout(DataType.BF16, m, k, m) : layout(DataType.BF16, k, m, k);
      p.layoutD = layout(key.outType(), n, m, n);
      lib.check("cublasLtMatmulPreferenceCreate", api.cublasLtMatmulPreferenceCreate(r), "");
      p.pref = r.getValue();
      attr.setLong(0, workspace.bytes());
      lib.check("cublasLtMatmulPreferenceSetAttribute", api.cublasLtMatmulPreferenceSetAttribute(p.pref,
          PREF_MAX_WORKSPACE_BYTES, attr, 8), "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
      int[] aligns = {key.alignB(), key.alignA(), key.alignC(), key.alignC()}; // A', B', C, D
      for (int i = 0; i < 4; i++) {
        attr.setInt(0, aligns[i]);
        lib.check("cublasLtMatmulPreferenceSetAttribute", api.cublasLtMatmulPreferenceSetAttribute(p.pref,
            PREF_MIN_ALIGNMENT_A_BYTES + i, attr, 4),
            "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" + "ABCD".charAt(i) + "_BYTES");
      }
      IntByReference found = new IntByReference();
      lib.check("cublasLtMatmulAlgoGetHeuristic", api.cublasLtMatmulAlgoGetHeuristic(handle, p.desc, p.layoutA,
          p.layoutB, p.layoutD, p.layoutD, p.pref, 1, p.result, found), detail);
      int state = p.result.getInt(HEURISTIC_STATE_OFFSET);
      if (found.getValue() < 1 || state != 0) {
        lib.check("cublasLtMatmulAlgoGetHeuristic", found.getValue() < 1 ? 15 : state,
            "no algorithm for " + detail + " within " + workspace.bytes() + " workspace bytes");
      }
      LOG.debug("cuBLASLt algorithm for {}: workspace {} bytes, {} waves", detail,
          p.result.getLong(HEURISTIC_WORKSPACE_OFFSET), p.result.getFloat(HEURISTIC_WAVES_OFFSET));
      return p;
    } catch (RuntimeException e) {
      p.destroy(api);
      throw e;
    }
  }

  /**
   * Destroys the cached descriptors and the handle ({@code cublasLtDestroy}); idempotent. The workspace stays the
   * caller's.
   *
   * @throws CublasException on failure
   */
  @Override
  public synchronized void close() {
    if (closed) return;
    closed = true;
    ctx.makeCurrent();
    plans.values().forEach(p -> p.destroy(lib.api()));
    plans.clear();
    try {
      lib.check("cublasLtDestroy", lib.api().cublasLtDestroy(handle), "");
    } finally {
      scalars.close();
      attr.close();
    }
  }
}
