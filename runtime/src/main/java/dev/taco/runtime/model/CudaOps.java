package dev.taco.runtime.model;

import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceOutOfMemoryException;
import dev.taco.collective.device.DeviceTensor;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.CublasLt;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaException;
import dev.taco.kernels.cuda.CudaFunction;
import dev.taco.kernels.cuda.CudaGraph;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.kernels.cuda.HostArrays;
import dev.taco.kernels.cuda.PinnedBuffer;
import dev.taco.runtime.layers.Attention;
import dev.taco.runtime.layers.CrossEntropy;
import dev.taco.runtime.layers.Encoder;
import dev.taco.runtime.layers.FlashAttention;
import dev.taco.runtime.layers.Gelu;
import dev.taco.runtime.layers.GradNorm;
import dev.taco.runtime.layers.LayerKernels;
import dev.taco.runtime.layers.LayerNorm;
import dev.taco.runtime.layers.Matmul;
import dev.taco.runtime.layers.Residual;
import dev.taco.runtime.train.AdamW;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The GPU backend of {@link Ops} (docs/design.md §5–§6): every arena is one float32 {@link DeviceBuffer}, resident for
 * the whole step; GEMMs through {@link Cublas} (fp32 accumulation; the inputs exact or rounded to bf16 on tensor cores,
 * see {@link Precision}; in bf16 mode the forward's GEMM inputs are rounded once and kept for the backward,
 * {@link #kept}, or written in bf16 by their producer, {@link #matmulGeluForward}, {@link #matmulAttentionForward});
 * attention in bf16 mode as
 * {@link FlashAttention} (tensor-core kernels in Java, no (B,NH,T,T) matrices: {@link #flashAttention(int)}), else as
 * per-head strided-batched GEMMs reading q, k, v in place from the qkv tensor, around the causal softmax kernels, as
 * llm.c, over the lower block-triangle of the score matrices only ({@link #causalBlock}); every other layer through Java kernels
 * of {@code dev.taco.runtime.layers} (translated to CUDA C by {@code KernelSources}, compiled by NVRTC at first use):
 * the CPU's element-wise kernels as they are, and the GPU's own forms where a row is reduced (a warp per row:
 * LayerNorm, softmax, cross-entropy), a column sum is split into partial sums (LayerNorm's dweight/dbias, the gradient
 * norm) or a gradient gathered (dwte as one-hot rows times dout). So a GPU step computes the CPU step's formulas, with
 * sums added in other orders. The first writer of an activation gradient overwrites it ({@link Ops#matmulBackward}):
 * no zeroing passes.
 *
 * <p>All work goes on one stream. The host waits for it only where a host value is needed: the mean loss (the B·T
 * per-position losses come back and are summed in order, as on the CPU), the gradient norm (4096 float64 partial sums
 * come back), and before token ids are uploaded (an async copy from pinned memory on the stream). Token ids are
 * uploaded by the forward calls ({@link #encoderForward}, {@link #crossEntropyForward}); the backward calls with the
 * same host array use the copy their forward made.
 *
 * <p>Tensor parallelism: one rank alone ({@link #CudaOps(CudaContext)}), or one rank of a TP group whose all-reduces go
 * through D's {@link DeviceCollectives} ({@code device-local}: ranks as threads sharing one GPU; NCCL: a GPU per rank)
 * with one plan for every site, or per-site plans ({@link CollectiveSites}: calibrated and sampled as on the CPU).
 *
 * <p>Not thread-safe: one thread per rank. Close it to free the device memory it allocated.
 */
public final class CudaOps implements Ops<DeviceBuffer>, AutoCloseable {
  /**
   * What the GEMMs multiply in. Weights, their gradients and the AdamW moments are fp32 in both modes; so are the
   * activations in fp32 mode. In bf16 mode the activations that only GEMMs and their own layer read are stored in
   * bf16 only, as PyTorch's autocast stores them (qkv with flash attention, the MLP's pre-activation and GELU output,
   * the GELU's input gradient, dqkv: {@link #bf16Only}); the others (the residual stream, LayerNorm outputs, attention
   * output, the row-parallel outputs that are all-reduced) in fp32 with a bf16 copy beside them where a GEMM reads them.
   */
  public enum Precision {
    /** Exact fp32 products ({@code CUBLAS_COMPUTE_32F}): the testing mode, within 1e-4 of the CPU. */
    FP32(Cublas.Fp32Math.STRICT),
    /**
     * GEMM inputs rounded to bf16, fp32 accumulation, the arithmetic of PyTorch's bf16 autocast for the matrix
     * products: the linear layers and the LM head multiply bf16 copies of their operands ({@link Matmul#roundToBf16},
     * or written by their producer) on tensor cores, and their bias gradients sum the bf16 output gradient; the
     * MLP's GELU reads and writes bf16; the GEMM form of attention lets cuBLAS round its fp32 operands
     * ({@code CUBLAS_COMPUTE_32F_FAST_16BF}, which may also pick TF32); every other layer computes in fp32.
     */
    BF16(Cublas.Fp32Math.BF16);

    final Cublas.Fp32Math math;

    Precision(Cublas.Fp32Math math) {
      this.math = math;
    }
  }

  /** Threads per block of the layer kernels (grid-stride loops: any grid covers the iterations). */
  static final int BLOCK = 256;
  /** Most partial sums of the gradient norm (a thread each; the host adds them up). */
  static final int NORM_PARTS = 1 << 20;
  /** The largest one-hot matrix (N·V elements, 128 MiB) the wte gradient is computed through; above it, a gather. */
  static final long ONE_HOT_MAX = 1L << 25;
  /** Warps per block of the SIMT kernels that give a warp to each row. */
  static final int WARPS = BLOCK / 32;
  private static final long MAX_BLOCKS = 1L << 20;
  /**
   * Row blocks of LayerNorm's dweight/dbias partial sums: 256 x C threads (196 K at C = 768) fill the GPU while each
   * sums B·T/256 rows (32 at the GPT-2-small shape).
   */
  static final int LN_PARAM_PARTS = 256;

  private final CudaContext ctx;
  private final DeviceCollectives tp;
  private final Plan plan;
  /** Per-site plans (calibrated, sampled), or null: {@link #plan} at every site. */
  private CollectiveSites sites;
  /** The plan each site used last (with {@link #sites}): a plan no site uses any more is released. */
  private final Map<String, Plan> sitePlans = new HashMap<>();
  private final Precision precision;
  private final boolean tpComm;
  private final boolean ownsStream;
  private final CudaStream stream;
  private final Cublas blas;
  /** Exact fp32 GEMMs (column sums, the one-hot wte gradient) whatever the precision: {@link #blas} in fp32 mode. */
  private final Cublas exact;
  private final CublasLt lt; // null in fp32 mode or without libcublasLt
  /** See {@link #causalBlock}. */
  private int causalBlockMinimum = 512;
  /** See {@link #flashAttention(int)}. */
  private boolean flashAttention = true;
  private final List<DeviceBuffer> owned = new ArrayList<>();
  private final Map<String, CudaFunction> kernels = new HashMap<>();
  private final Map<Object, DeviceBuffer> hostCopies = new IdentityHashMap<>();
  private PinnedBuffer staging;
  private DeviceBuffer normPartials;
  private DeviceBuffer columns;
  private final DeviceBuffer[] bf16Scratch = new DeviceBuffer[5];
  /** bf16 copies of the forward's GEMM inputs, for the backward ({@link #kept}). */
  private final Map<CopyKey, DeviceBuffer> forwardCopies = new HashMap<>();
  /**
   * The activation whose {@link #kept} copy its producer has just written along with it (LayerNorm, flash attention,
   * GELU), or null: the next {@link #kept} call takes that copy as it is if it asks for this tensor; any such call, and
   * any collective, clears it.
   */
  private CopyKey freshCopy;
  /**
   * The activation gradient whose bf16 copy its producer has just written along with it (LayerNorm's and GELU's
   * backward, flash attention's dqkv), and where, or null: the next {@link #operand} call for the gradient slot takes
   * that copy if it asks for this tensor; any such call, and any collective, clears it.
   */
  private Fresh freshGradient;

  /**
   * Views whose producer writes only their bf16 copy in bf16 mode (qkv, the MLP's pre-activation, GELU output and GELU
   * input gradient, dqkv): {@link #roundInto} refuses them, since their fp32 regions hold no values.
   */
  private final java.util.Set<CopyKey> bf16Only = new java.util.HashSet<>();

  /** A bf16 copy of the {@code n} elements of a view ({@link CopyKey}) that its producer wrote. */
  private record Fresh(CopyKey key, DeviceBuffer copy) {}
  private DeviceBuffer ones;
  /** {@link #columnSums}' bf16 ones. */
  private DeviceBuffer onesBf16;
  private boolean closed;
  private boolean capturing;
  private Object graphKey;
  private int graphRuns;
  private long graphLaunches;
  private CudaGraph graph;
  private final List<Upload> graphUploads = new ArrayList<>();

  /**
   * One rank alone (TP = 1): its own stream; the TP all-reduces move nothing.
   *
   * @param ctx the device context (owned by the caller, which closes it after this)
   * @throws dev.taco.kernels.cuda.CublasException if cuBLAS cannot start on this device
   * @throws UnsatisfiedLinkError if libcublas does not load
   */
  public CudaOps(CudaContext ctx) {
    this(ctx, Precision.FP32);
  }

  /**
   * One rank alone (TP = 1) in the given precision.
   *
   * @see #CudaOps(CudaContext)
   */
  public CudaOps(CudaContext ctx, Precision precision) {
    this(ctx, null, null, null, precision, true);
  }

  /**
   * One rank of a TP group: every operation on the collectives' stream, so that each all-reduce is ordered between the
   * layer that writes its input and the one that reads its output, with no host synchronisation.
   *
   * @param tp this rank's device collectives (owned by the caller, closed after this)
   * @param plan the plan of every collective site (a plan the GPU cannot run is refused at the first all-reduce; see
   *     {@link DeviceCollectives#resolve})
   */
  public CudaOps(DeviceCollectives tp, Plan plan) {
    this(tp, plan, Precision.FP32, true);
  }

  /**
   * One rank of a TP group in the given precision.
   *
   * @param tpComm false replaces every TP all-reduce by a no-op ({@code --no-tp-comm}: the step's time without its
   *     communication; the numbers are then wrong, each rank keeping its partial sums)
   * @see #CudaOps(DeviceCollectives, Plan)
   */
  public CudaOps(DeviceCollectives tp, Plan plan, Precision precision, boolean tpComm) {
    this(tp.transport().context(), tp, tp.stream(), plan, precision, tpComm);
  }

  /**
   * One rank of a TP group whose sites choose their own plans, as on the CPU ({@link CollectiveSites#planAt}: per-site
   * calibration and codec-error sampling on host copies of the tensors, fetched only for the uses that need them; the
   * data moves through {@code tp}). {@code sites} is this rank's, built on the group's host communicator.
   *
   * @see #CudaOps(DeviceCollectives, Plan, Precision, boolean)
   */
  public CudaOps(DeviceCollectives tp, CollectiveSites sites, Precision precision, boolean tpComm) {
    this(tp, (Plan) null, precision, tpComm);
    this.sites = java.util.Objects.requireNonNull(sites, "sites");
  }

  private CudaOps(CudaContext ctx, DeviceCollectives tp, CudaStream shared, Plan plan, Precision precision,
      boolean tpComm) {
    this.ctx = ctx;
    ctx.makeCurrent(); // this thread's: a rank's thread builds and drives its backend
    this.tp = tp;
    this.plan = plan;
    this.precision = java.util.Objects.requireNonNull(precision, "precision");
    this.tpComm = tpComm;
    this.ownsStream = shared == null;
    this.stream = ownsStream ? ctx.createStream() : shared;
    Cublas handle = null;
    Cublas strict = null;
    CublasLt fused = null;
    try {
      DeviceBuffer ws = alloc(Cublas.WORKSPACE_BYTES / 4); // freed with the other arenas by close
      handle = Cublas.create(ctx, ws, precision.math);
      strict = precision.math == Cublas.Fp32Math.STRICT ? handle : Cublas.create(ctx, ws, Cublas.Fp32Math.STRICT);
      // cuBLASLt's bias epilogue for the bf16 linear layers; both handles use the workspace, in stream order
      if (precision == Precision.BF16 && CublasLt.available()) fused = CublasLt.create(ctx, ws);
    } catch (RuntimeException | LinkageError e) {
      if (strict != null && strict != handle) strict.close();
      if (handle != null) handle.close();
      for (DeviceBuffer b : owned) b.close();
      owned.clear();
      if (ownsStream) stream.close();
      throw e;
    }
    this.blas = handle;
    this.exact = strict;
    this.lt = fused;
  }

  @Override
  public long bytesSent() {
    return tp == null ? 0 : tp.bytesSent();
  }

  /** What the GEMMs multiply in. */
  public Precision precision() {
    return precision;
  }

  /** The stream every operation is enqueued on. */
  public CudaStream stream() {
    return stream;
  }

  /** The context. */
  public CudaContext context() {
    return ctx;
  }

  /**
   * A zeroed float32 device arena of {@code n} elements, freed by {@link #close}.
   *
   * @throws DeviceOutOfMemoryException if the device has not that much free memory (the message gives the size)
   */
  @Override
  public DeviceBuffer alloc(long n) {
    if (n <= 0) throw new IllegalArgumentException("an arena needs at least one element, got " + n);
    if (capturing) throw new IllegalStateException("device memory allocated while a step is captured as a graph");
    DeviceBuffer b;
    try {
      b = ctx.alloc(4 * n);
    } catch (CudaException e) {
      if (e.code() == 2) { // CUDA_ERROR_OUT_OF_MEMORY
        throw new DeviceOutOfMemoryException(String.format("out of GPU memory allocating %.3f GiB on %s (%.1f GiB "
            + "in all): lower --micro-batch-size, --seq-length, --hidden-size or --num-layers", 4.0 * n / (1 << 30),
            ctx.name(), ctx.totalMemoryBytes() / (double) (1 << 30)), e);
      }
      throw e;
    }
    owned.add(b);
    b.memsetAsync((byte) 0, stream);
    return b;
  }

  @Override
  public DeviceBuffer fromHost(float[] values) {
    DeviceBuffer b = alloc(values.length);
    copyIn(values, b);
    return b;
  }

  /**
   * Copies {@code values} to the start of {@code arena}, ordered on the stream after the work enqueued before.
   *
   * @throws IllegalArgumentException if the arena is shorter than the array
   */
  @Override
  public void copyToDevice(float[] values, DeviceBuffer arena) {
    check("arena", new View<>(arena, 0), values.length);
    copyIn(values, arena);
  }

  /** Copies {@code n} elements from {@code v} to a new host array (waits for the stream). */
  @Override
  public float[] toHost(View<DeviceBuffer> v, int n) {
    check("tensor", v, n);
    float[] out = new float[n];
    stream.synchronize();
    v.arena().copyToHost(out, 0, n, 4 * v.offset());
    return out;
  }

  @Override
  public void zero(View<DeviceBuffer> v, long n) {
    check("tensor", v, n);
    v.arena().slice(4 * v.offset(), 4 * n).memsetAsync((byte) 0, stream);
  }

  @Override
  public void encoderForward(View<DeviceBuffer> out, int[] tokens, View<DeviceBuffer> wte, View<DeviceBuffer> wpe,
      int B, int T, int C, int V) {
    DeviceBuffer ids = upload(tokens, B * T, V, "tokens");
    launch(Encoder.class, "encoderForward", (long) B * T * C, p("out", out, (long) B * T * C), 0, ids, 0,
        p("wte", wte, (long) V * C), 0, p("wpe", wpe, (long) T * C), 0, B, T, C);
  }

  @Override
  public void encoderBackward(View<DeviceBuffer> dwte, View<DeviceBuffer> dwpe, View<DeviceBuffer> dout, int[] tokens,
      int B, int T, int C, int V) {
    DeviceBuffer ids = uploaded(tokens, "tokens");
    long n = (long) B * T;
    if (n * V <= ONE_HOT_MAX) { // dwte += onehot(ids)^T · dout: one exact GEMM instead of V·C scans of the ids
      DeviceBuffer hot = columnScratch(n * V);
      launch(Encoder.class, "oneHotRows", n * V, hot, 0, ids, 0, (int) n, V);
      check("dwte", dwte, (long) V * C);
      check("dout", dout, n * C);
      exact.matmulTransA(stream, DataType.F32, DataType.F32, hot, 0, dout.arena(), dout.offset(), dwte.arena(),
          dwte.offset(), V, C, (int) n, true);
    } else {
      launch(Encoder.class, "encoderBackwardWteColumns", (long) V * C, p("dwte", dwte, (long) V * C), 0,
          p("dout", dout, n * C), 0, ids, 0, B, T, C, V);
    }
    launch(Encoder.class, "encoderBackwardWpe", (long) T * C, p("dwpe", dwpe, (long) T * C), 0,
        p("dout", dout, (long) B * T * C), 0, B, T, C);
  }

  @Override
  public void layerNormForward(View<DeviceBuffer> out, View<DeviceBuffer> mean, View<DeviceBuffer> rstd,
      View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> b, int B, int T, int C) {
    long bt = (long) B * T, n = bt * C;
    boolean bf16 = precision == Precision.BF16;
    Long pOut = p("out", out, n), pCopy = bf16 ? forwardCopy(out, n).pointer() : pOut; // fp32: copy not touched
    launchWarps(LayerNorm.class, "layernormForwardWarp", bt, pOut, 0, pCopy, 0, bf16 ? 1 : 0, p("mean", mean, bt), 0,
        p("rstd", rstd, bt), 0, p("inp", inp, n), 0, p("weight", w, C), 0, p("bias", b, C), 0, B, T, C);
    freshCopy = bf16 ? key(out, n) : null;
  }

  @Override
  public void layerNormBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dw, View<DeviceBuffer> db,
      View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> mean,
      View<DeviceBuffer> rstd, int B, int T, int C) {
    long bt = (long) B * T;
    Long pDout = p("dout", dout, bt * C), pInp = p("inp", inp, bt * C), pMean = p("mean", mean, bt);
    Long pRstd = p("rstd", rstd, bt);
    boolean bf16 = precision == Precision.BF16;
    DeviceBuffer copy = bf16 ? gradientSlot(bt * C) : null;
    Long pDinp = p("dinp", dinp, bt * C), pCopy = bf16 ? copy.pointer() : pDinp; // fp32: copy not touched
    launchWarps(LayerNorm.class, "layernormBackwardRowsWarp", bt, pDinp, 0, pCopy, 0, bf16 ? 1 : 0, pDout, 0, pInp, 0,
        p("weight", w, C), 0, pMean, 0, pRstd, 0, B, T, C);
    freshGradient = bf16 ? new Fresh(key(dinp, bt * C), copy) : null;
    int parts = (int) Math.min(bt, LN_PARAM_PARTS); // dweight, dbias: partial sums over blocks of rows, then a GEMV
    DeviceBuffer partials = columnScratch(2L * parts * C);
    launch(LayerNorm.class, "layernormParamPartials", (long) parts * C, partials, 0, pDout, 0, pInp, 0, pMean, 0, pRstd,
        0, (int) bt, C, parts);
    columnSums(dw, new View<>(partials, 0), parts, C);
    columnSums(db, new View<>(partials, (long) parts * C), parts, C);
  }

  @Override
  public void matmulForward(View<DeviceBuffer> out, View<DeviceBuffer> inp, View<DeviceBuffer> w,
      View<DeviceBuffer> bias, int B, int T, int C, int OC) {
    int n = B * T;
    Operand a = kept(inp, (long) n * C), b = kept(w, (long) C * OC);
    check("out", out, (long) n * OC);
    if (bias != null && lt != null) { // bf16 operands: the bias added in cuBLASLt's epilogue, no extra pass
      check("bias", bias, OC);
      lt.matmul(stream, CublasLt.Epilogue.BIAS, false, false, n, OC, C, a.buf, a.off, b.buf, b.off, bias.arena(),
          bias.offset(), DataType.F32, out.arena(), out.offset());
      return;
    }
    blas.matmul(stream, a.type, DataType.F32, a.buf, a.off, b.buf, b.off, out.arena(), out.offset(), n, OC, C, false);
    if (bias != null) addBias(out, bias, n, OC);
  }

  @Override
  public void matmulBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dw, View<DeviceBuffer> dbias,
      View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w, int B, int T, int C, int OC) {
    int n = B * T;
    Operand d = operand(dout, (long) n * OC, GRADIENT), b = reused(w, (long) C * OC, WEIGHT);
    check("dinp", dinp, (long) n * C);
    blas.matmulTransB(stream, d.type, DataType.F32, d.buf, d.off, b.buf, b.off, dinp.arena(), dinp.offset(), n, C, OC,
        false);
    paramGrads(d, dw, dbias, inp, n, C, OC);
  }

  /**
   * dw += inp^T · dout and dbias += column sums of dout, {@code d} being dout as a GEMM operand: in bf16 mode the bias
   * gradient sums the bf16 dout the GEMMs multiply (fp32 accumulation), as under PyTorch's autocast, half the bytes
   * of the fp32 dout.
   */
  private void paramGrads(Operand d, View<DeviceBuffer> dw, View<DeviceBuffer> dbias, View<DeviceBuffer> inp, int n,
      int C, int OC) {
    check("dw", dw, (long) C * OC);
    Operand a = reused(inp, (long) n * C, ACTIVATION);
    blas.matmulTransA(stream, a.type, DataType.F32, a.buf, a.off, d.buf, d.off, dw.arena(), dw.offset(), C, OC, n,
        true);
    if (dbias != null) columnSums(dbias, d, n, OC);
  }

  /**
   * {@link #matmulForward} into pre, then GELU. In bf16 mode ({@link #bf16Mlp}) pre and out are stored in bf16 only,
   * as PyTorch's bf16 autocast stores them: cuBLASLt writes pre (bias in its epilogue, rounded to bf16 as autocast
   * rounds it) into pre's kept copy, {@link Gelu#geluForwardBf16} reads it and writes out's, which the next linear
   * layer's {@link #kept} takes; their fp32 arena regions are not written ({@link #bf16Only}). Against fp32 pre and out
   * with a bf16 copy of out, this moves 200 of 450 MB per layer at D=768, T=1024, B=8. (cuBLASLt's GELU_AUX_BIAS
   * epilogue with fp32 output ran as a separate epilogue kernel on the H200, 78 µs at 8192 x 3072.)
   */
  @Override
  public void matmulGeluForward(View<DeviceBuffer> out, View<DeviceBuffer> pre, View<DeviceBuffer> inp,
      View<DeviceBuffer> w, View<DeviceBuffer> bias, int B, int T, int C, int OC) {
    long n = (long) B * T * OC;
    if (!bf16Mlp(out, pre, n)) {
      matmulForward(pre, inp, w, bias, B, T, C, OC);
      geluForward(out, pre, (int) n);
      return;
    }
    DeviceBuffer preCopy = matmulIntoCopy(pre, inp, w, bias, B * T, C, OC), outCopy = forwardCopy(out, n);
    launch(Gelu.class, "geluForwardBf16", n / 8, outCopy, 0, preCopy, 0, (int) (n / 8));
    bf16Only.add(key(out, n));
    freshCopy = key(out, n);
  }

  /**
   * bf16 mode: out(N,OC) = inp(N,C) · w(C,OC) + bias (bias rounded to bf16, as PyTorch's autocast rounds it) written by
   * cuBLASLt in bf16 only, into out's kept copy ({@link #forwardCopy}), which it returns; out's fp32 region is not
   * written ({@link #bf16Only}).
   */
  private DeviceBuffer matmulIntoCopy(View<DeviceBuffer> out, View<DeviceBuffer> inp, View<DeviceBuffer> w,
      View<DeviceBuffer> bias, int N, int C, int OC) {
    long n = (long) N * OC;
    Operand a = kept(inp, (long) N * C), b = kept(w, (long) C * OC);
    DeviceBuffer copy = forwardCopy(out, n);
    if (bias == null) {
      blas.matmul(stream, DataType.BF16, DataType.BF16, a.buf, a.off, b.buf, b.off, copy, 0, N, OC, C, false);
    } else {
      Operand bb = kept(bias, OC);
      lt.matmul(stream, CublasLt.Epilogue.BIAS, false, false, N, OC, C, a.buf, a.off, b.buf, b.off, bb.buf, bb.off,
          DataType.BF16, copy, 0);
    }
    bf16Only.add(key(out, n));
    return copy;
  }

  /**
   * {@link #matmulForward} into qkv, then {@link #attentionForward}; in bf16 mode with flash attention and cuBLASLt,
   * qkv is stored in bf16 only ({@link #matmulIntoCopy}), the copy flash attention reads forward and backward (against
   * an fp32 qkv rounded into its copy, 150 of 225 MB per layer fewer at D=768, T=1024, B=8).
   */
  @Override
  public void matmulAttentionForward(View<DeviceBuffer> out, View<DeviceBuffer> att, View<DeviceBuffer> qkv,
      View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> bias, int B, int T, int C, int NH, int HS) {
    int oc = 3 * NH * HS;
    if (precision == Precision.BF16 && lt != null && flashAttention(HS)) {
      matmulIntoCopy(qkv, inp, w, bias, B * T, C, oc);
      freshCopy = key(qkv, (long) B * T * oc);
    } else {
      matmulForward(qkv, inp, w, bias, B, T, C, oc);
    }
    attentionForward(out, att, qkv, B, T, NH, HS);
  }

  /**
   * {@link #matmulBackward} into scratch (dout · w^T), then dinp = scratch ⊙ GELU'(pre). In bf16 mode
   * ({@link #bf16Mlp}) all three in bf16, as under PyTorch's autocast: cuBLAS writes dout · w^T in bf16 into a work
   * slot, {@link Gelu#geluBackwardBf16} reads it and pre's kept copy and writes dinp's bf16 copy into the gradient slot,
   * which the previous linear layer's backward takes ({@link #operand}) for its GEMMs and its bias gradient; dinp's and
   * scratch's fp32 regions are not written. (cuBLASLt's DGELU epilogue with fp32 output ran as a separate epilogue
   * kernel on the H200, 195 µs at 8192 x 3072.)
   */
  @Override
  public void matmulBackwardGelu(View<DeviceBuffer> dinp, View<DeviceBuffer> scratch, View<DeviceBuffer> dw,
      View<DeviceBuffer> dbias, View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w,
      View<DeviceBuffer> pre, int B, int T, int C, int OC) {
    long n = (long) B * T * C;
    if (!bf16Mlp(inp, pre, n)) {
      matmulBackward(scratch, dw, dbias, dout, inp, w, B, T, C, OC);
      geluBackward(dinp, scratch, pre, (int) n);
      return;
    }
    DeviceBuffer preCopy = forwardCopies.get(key(pre, n));
    if (preCopy == null) throw new IllegalStateException("matmulBackwardGelu: no bf16 pre-activation from a forward");
    int rows = B * T;
    Operand d = operand(dout, (long) rows * OC, GRADIENT), b = reused(w, (long) C * OC, WEIGHT);
    DeviceBuffer dh = scratchSlot(GELU_INPUT, n);
    blas.matmulTransB(stream, d.type, DataType.BF16, d.buf, d.off, b.buf, b.off, dh, 0, rows, C, OC, false);
    paramGrads(d, dw, dbias, inp, rows, C, OC);
    DeviceBuffer copy = gradientSlot(n); // d's slot: the GEMMs that read d are ahead of this kernel on the stream
    launch(Gelu.class, "geluBackwardBf16", n / 8, copy, 0, dh, 0, preCopy, 0, (int) (n / 8));
    bf16Only.add(key(dinp, n));
    freshGradient = new Fresh(key(dinp, n), copy);
  }

  /**
   * Whether the MLP's GELU runs in bf16 ({@link #matmulGeluForward}, {@link #matmulBackwardGelu}): bf16 mode with
   * cuBLASLt, and {@code n} elements of both views in 16-byte-aligned groups of eight. The same answer forward and
   * backward (the backward asks with the forward's out, its inp).
   */
  private boolean bf16Mlp(View<DeviceBuffer> out, View<DeviceBuffer> pre, long n) {
    return precision == Precision.BF16 && lt != null && eightAligned(out, n) && eightAligned(pre, n);
  }

  /** Whether {@code n} elements of {@code v} go eight to a 16-byte-aligned group. */
  private static boolean eightAligned(View<DeviceBuffer> v, long n) {
    return v.offset() % 4 == 0 && n % 8 == 0;
  }

  @Override
  public void headForward(View<DeviceBuffer> logits, View<DeviceBuffer> x, View<DeviceBuffer> wte, int N, int C,
      int V) {
    Operand a = kept(x, (long) N * C), b = kept(wte, (long) V * C);
    check("logits", logits, (long) N * V);
    blas.matmulTransB(stream, a.type, DataType.F32, a.buf, a.off, b.buf, b.off, logits.arena(), logits.offset(), N, V,
        C, false);
  }

  @Override
  public void headBackward(View<DeviceBuffer> dx, View<DeviceBuffer> dwte, View<DeviceBuffer> dlogits,
      View<DeviceBuffer> x, View<DeviceBuffer> wte, int N, int C, int V) {
    Operand d = operand(dlogits, (long) N * V, GRADIENT), b = reused(wte, (long) V * C, WEIGHT);
    check("dx", dx, (long) N * C);
    check("dwte", dwte, (long) V * C);
    blas.matmul(stream, d.type, DataType.F32, d.buf, d.off, b.buf, b.off, dx.arena(), dx.offset(), N, C, V, false);
    Operand a = reused(x, (long) N * C, ACTIVATION);
    blas.matmulTransA(stream, d.type, DataType.F32, d.buf, d.off, a.buf, a.off, dwte.arena(), dwte.offset(), V, C, N,
        true);
  }

  /** A GEMM operand: where it is and in which type. */
  private record Operand(DeviceBuffer buf, long off, DataType type) {}

  /**
   * Work-space slots of the bf16 operands: an activation, a weight, an output gradient (a GEMM reads two at once),
   * dqkv's copy, which flash attention's backward writes while it reads dout's in the gradient slot, and the bf16
   * dout · w^T that the GELU backward reads ({@link #matmulBackwardGelu}).
   */
  private static final int ACTIVATION = 0, WEIGHT = 1, GRADIENT = 2, DQKV = 3, GELU_INPUT = 4;

  /**
   * The {@code n} elements of {@code v} as a GEMM operand: in place (fp32) in {@link Precision#FP32} mode; in
   * {@link Precision#BF16} mode rounded to bf16 ({@link Matmul#roundToBf16}) into work-space slot {@code slot},
   * since cuBLAS multiplies bf16 operands at twice the speed and half the bytes (an output gradient, used by one
   * backward call).
   */
  private Operand operand(View<DeviceBuffer> v, long n, int slot) {
    if (precision == Precision.FP32) {
      check("operand", v, n);
      return new Operand(v.arena(), v.offset(), DataType.F32);
    }
    if (slot == GRADIENT) {
      Fresh f = freshGradient;
      freshGradient = null;
      if (f != null && f.key.equals(key(v, n))) return new Operand(f.copy, 0, DataType.BF16);
    }
    return roundInto(scratchSlot(slot, n), v, n);
  }

  /** Work-space slot {@code slot}, of at least {@code n} bf16 elements. */
  private DeviceBuffer scratchSlot(int slot, long n) {
    DeviceBuffer s = bf16Scratch[slot];
    if (s == null || s.bytes() < 2 * n) {
      release(s);
      s = alloc(bf16Words(n));
      bf16Scratch[slot] = s;
    }
    return s;
  }

  /** The output gradients' slot ({@link #scratchSlot}); where {@link #freshGradient}'s copy is. */
  private DeviceBuffer gradientSlot(long n) {
    return scratchSlot(GRADIENT, n);
  }

  /**
   * A forward pass's GEMM operand (an activation or a weight): as {@link #operand}, but in bf16 mode rounded into a
   * copy kept for this tensor (its arena, offset and size), which the backward of the same tensors takes through
   * {@link #reused} instead of rounding again. The rule that makes this safe is the model's: a backward multiplies
   * the activations and weights its forward multiplied, unchanged in between ({@link Gpt#trainStep}: forward,
   * backward, then the optimizer); every forward rounds afresh, or its producer writes the copy ({@link #freshCopy}).
   * The copies cost 2 bytes per element of every GEMM input of the step (about 1.9 GiB at D=768, L=12, T=1024, B=8)
   * and save a read and a half-size write of each in the backward.
   */
  private Operand kept(View<DeviceBuffer> v, long n) {
    if (precision == Precision.FP32) return operand(v, n, ACTIVATION);
    DeviceBuffer s = forwardCopy(v, n);
    boolean fresh = key(v, n).equals(freshCopy);
    freshCopy = null;
    return fresh ? new Operand(s, 0, DataType.BF16) : roundInto(s, v, n);
  }

  /** The bf16 copy {@link #kept} keeps for {@code n} elements of {@code v}, allocated at first use. */
  private DeviceBuffer forwardCopy(View<DeviceBuffer> v, long n) {
    return forwardCopies.computeIfAbsent(key(v, n), k -> alloc(bf16Words(n)));
  }

  /** A collective may change a tensor whose copy was fresh: from here on every operand is rounded afresh. */
  private void noFreshCopies() {
    freshCopy = null;
    freshGradient = null;
  }

  private static CopyKey key(View<DeviceBuffer> v, long n) {
    return new CopyKey(v.arena().pointer(), v.offset(), n);
  }

  /** A backward pass's operand: the copy {@link #kept} made in the forward, else {@link #operand}'s. */
  private Operand reused(View<DeviceBuffer> v, long n, int slot) {
    DeviceBuffer s = precision == Precision.FP32 ? null : forwardCopies.get(key(v, n));
    return s != null ? new Operand(s, 0, DataType.BF16) : operand(v, n, slot);
  }

  /**
   * Bytes of the bf16 forward copies ({@link #kept}) of R ranks for a micro-batch of B sequences: every linear layer's
   * input and weight, the attention's qkv, the MLP's pre-activation and the LM head's input and weight, 2 bytes per
   * element.
   */
  public static double forwardCopyBytes(GptConfig cfg, int microBatch) {
    double bt = (double) microBatch * cfg.seqLength(), c = cfg.hiddenSize(), cr = cfg.localHidden();
    double ff = cfg.localFfn(), perLayer = bt * (2 * c + 4 * cr + 2 * ff);
    double weights = cfg.parameterCount() / cfg.tp() + (double) cfg.vocabSize() * c;
    return 2.0 * cfg.tp() * (cfg.numLayers() * perLayer + bt * c + weights);
  }

  /** Where a forward copy was made from: an arena's device address, an offset and a length, in elements. */
  private record CopyKey(long pointer, long offset, long n) {}

  private static long bf16Words(long n) {
    if (n > Integer.MAX_VALUE) throw new IllegalArgumentException("a bf16 operand of " + n + " elements is too large");
    return (n + 1) / 2;
  }

  /** Rounds the {@code n} elements of {@code v} to bf16 into {@code s}, eight per thread where aligned. */
  private Operand roundInto(DeviceBuffer s, View<DeviceBuffer> v, long n) {
    if (bf16Only.contains(key(v, n))) {
      throw new IllegalStateException("a GEMM operand of " + n + " elements at offset " + v.offset() + " is stored in "
          + "bf16 only, and its copy is not the one its producer wrote last");
    }
    if (v.offset() % 4 == 0 && n % 8 == 0) { // 16-byte aligned: eight elements per thread
      launch(Matmul.class, "roundToBf16x8", n / 8, s, 0, p("operand", v, n), 0, (int) (n / 8));
    } else {
      launch(Matmul.class, "roundToBf16", n, s, 0, p("operand", v, n), 0, (int) n);
    }
    return new Operand(s, 0, DataType.BF16);
  }

  /**
   * With {@link #flashAttention(int) flash attention} (bf16 mode): {@link FlashAttention#flashForward} on the bf16 copy
   * of qkv ({@link #kept}, which the backward reuses), {@code att} receiving the B·NH·T row log-sum-exps. Otherwise as
   * llm.c's cuBLAS attention, without its head permutes: the scores Q·Kᵀ of every (b,h) as strided-batched GEMMs
   * reading q and k in place from qkv (B,T,3C) (leading dimension 3C) into {@code att} (B,NH,T,T); the causal softmax
   * in place ({@link Attention#softmaxForwardWarp}); then P·V straight into out (B,T,C) (leading dimension C). See
   * {@link #headGemms} for the batching. In {@link Precision#BF16} mode the GEMMs read a bf16 copy of qkv and the
   * score and probability matrices are bf16, in the first half of {@code att}'s bytes
   * ({@link Attention#softmaxForwardWarpBf16}): half the bytes of the (B,NH,T,T) matrices, which bound this layer.
   */
  @Override
  public void attentionForward(View<DeviceBuffer> out, View<DeviceBuffer> att, View<DeviceBuffer> qkv, int B, int T,
      int NH, int HS) {
    int c = NH * HS, blk = causalBlock(T);
    long n = (long) B * T * c;
    if (flashAttention(HS)) { // out and the rows' log-sum-exps, no (B,NH,T,T) matrices; qkv's bf16 copy kept
      Operand q = kept(qkv, 3 * n);
      launchFlash("flashForward", HS, B, NH, T, p("out", out, n), 0, forwardCopy(out, n).pointer(), 0,
          p("att", att, (long) B * NH * T), 0, q.buf.pointer() + 2 * q.off, 0, B, T, NH, Attention.scale(HS));
      freshCopy = key(out, n);
      return;
    }
    check("out", out, n);
    Operand q = kept(qkv, 3 * n), s = scores("att", att, (long) B * NH * T * T);
    Operand o = new Operand(out.arena(), out.offset(), DataType.F32);
    Heads h = new Heads(B, NH, T, c, HS);
    for (int r0 = 0; r0 < T; r0 += blk) { // S[r0.., 0..keys) = Q[r0..] · K[0..keys)ᵀ, the query block's keys only
      int keys = r0 + blk;
      headGemms(h, s.type, false, true, blk, keys, HS, q, (long) r0 * 3 * c, 3 * c, h.qkv, q, c, 3 * c, h.qkv, s,
          (long) r0 * T, T, h.att);
    }
    long ps = s.buf.pointer() + s.off * s.type.bytes;
    launchWarps(Attention.class, s.type == DataType.F32 ? "softmaxForwardWarp" : "softmaxForwardWarpBf16",
        (long) B * NH * T, ps, 0, ps, 0, B, NH, T, Attention.scale(HS), blk);
    for (int r0 = 0; r0 < T; r0 += blk) { // O[r0..] = P[r0.., 0..keys) · V[0..keys)
      int keys = r0 + blk;
      headGemms(h, DataType.F32, false, false, blk, HS, keys, s, (long) r0 * T, T, h.att, q, 2 * c, 3 * c, h.qkv,
          o, (long) r0 * c, c, h.rows);
    }
  }

  /**
   * The backward of {@link #attentionForward}. With flash attention: dsum = rowsum(dO ∘ O) into {@code scratch}
   * ({@link FlashAttention#flashBackwardDot}, fp32), then {@link FlashAttention#flashBackwardKeyValue} and
   * {@link FlashAttention#flashBackwardQuery} on the bf16 copies of qkv and dout, overwriting dqkv. Otherwise as llm.c's
   * {@code attention_backward}, in place: with dY the heads of
   * {@code dout} (leading dimension C), dP = dY·Vᵀ into {@code scratch}, dV += Pᵀ·dY; dS = softmax backward in place
   * (scale included); dQ += dS·K, dK += dSᵀ·Q; dQ, dK, dV added straight into {@code dqkv} (leading dimension 3C).
   * In bf16 mode dY and qkv are read as bf16 copies and P, dP, dS are bf16, as in the forward.
   */
  @Override
  public void attentionBackward(View<DeviceBuffer> dqkv, View<DeviceBuffer> scratch, View<DeviceBuffer> dout,
      View<DeviceBuffer> qkv, View<DeviceBuffer> out, View<DeviceBuffer> att, int B, int T, int NH, int HS) {
    int c = NH * HS, blk = causalBlock(T);
    long n = (long) B * T * c, bhtt = (long) B * NH * T * T;
    if (flashAttention(HS)) { // dsum = rowsum(dO ∘ O) into scratch; then dK, dV per key rows and dQ per query rows
      long bht = (long) B * NH * T;
      Long pg = p("dqkv", dqkv, 3 * n), pl = p("att", att, bht), ps = p("scratch", scratch, bht);
      DeviceBuffer y = gradientSlot(n); // dout's bf16 copy, written by the dot kernel
      freshGradient = null;
      launchWarps(FlashAttention.class, "flashBackwardDot", bht, ps, 0, y, 0, p("dout", dout, n), 0, p("out", out, n),
          0, B, T, NH, HS);
      Operand q = reused(qkv, 3 * n, ACTIVATION); // the bf16 copies the kernels read
      long pq = q.buf.pointer() + 2 * q.off, py = y.pointer();
      DeviceBuffer copy = scratchSlot(DQKV, 3 * n);
      float scale = Attention.scale(HS);
      launchFlash("flashBackwardKeyValue", HS, B, NH, T, pg, 0, copy, 0, 0, py, 0, pq, 0, pl, 0, ps, 0, B, T, NH,
          scale);
      launchFlash("flashBackwardQuery", HS, B, NH, T, pg, 0, copy, 0, 0, py, 0, pq, 0, pl, 0, ps, 0, B, T, NH, scale);
      bf16Only.add(key(dqkv, 3 * n)); // the kernels write dqkv's copy only (fp32 flag 0)
      freshGradient = new Fresh(key(dqkv, 3 * n), copy);
      return;
    }
    check("dqkv", dqkv, 3 * n);
    Operand q = reused(qkv, 3 * n, ACTIVATION), y = operand(dout, n, GRADIENT);
    Operand p = scores("att", att, bhtt), d = scores("scratch", scratch, bhtt);
    Operand g = new Operand(dqkv.arena(), dqkv.offset(), DataType.F32);
    Heads h = new Heads(B, NH, T, c, HS);
    for (int r0 = 0; r0 < T; r0 += blk) { // dP[r0.., 0..keys) = dY[r0..] · V[0..keys)ᵀ
      int keys = r0 + blk;
      headGemms(h, d.type, false, true, blk, keys, HS, y, (long) r0 * c, c, h.rows, q, 2 * c, 3 * c, h.qkv, d,
          (long) r0 * T, T, h.att);
    }
    for (int k0 = 0; k0 < T; k0 += blk) { // dV[k0..] = P[k0.., k0..]ᵀ · dY[k0..]: the queries that see these keys
      int queries = T - k0;
      headGemms(h, DataType.F32, true, false, blk, HS, queries, p, (long) k0 * T + k0, T, h.att, y, (long) k0 * c, c,
          h.rows, g, 2 * c + (long) k0 * 3 * c, 3 * c, h.qkv);
    }
    long pd = d.buf.pointer() + d.off * d.type.bytes, pp = p.buf.pointer() + p.off * p.type.bytes;
    launchWarps(Attention.class, d.type == DataType.F32 ? "softmaxBackwardWarp" : "softmaxBackwardWarpBf16",
        (long) B * NH * T, pd, 0, pd, 0, pp, 0, B, NH, T, Attention.scale(HS), blk);
    for (int r0 = 0; r0 < T; r0 += blk) { // dQ[r0..] = dS[r0.., 0..keys) · K[0..keys)
      int keys = r0 + blk;
      headGemms(h, DataType.F32, false, false, blk, HS, keys, d, (long) r0 * T, T, h.att, q, c, 3 * c, h.qkv, g,
          (long) r0 * 3 * c, 3 * c, h.qkv);
    }
    for (int k0 = 0; k0 < T; k0 += blk) { // dK[k0..] = dS[k0.., k0..]ᵀ · Q[k0..]
      int queries = T - k0;
      headGemms(h, DataType.F32, true, false, blk, HS, queries, d, (long) k0 * T + k0, T, h.att, q, (long) k0 * 3 * c,
          3 * c, h.qkv, g, c + (long) k0 * 3 * c, 3 * c, h.qkv);
    }
  }

  /**
   * Whether attention runs as {@link FlashAttention} for head size HS: in bf16 mode, for the head sizes its kernels are
   * compiled for ({@link FlashAttention#supports}), on a GPU with bf16 tensor cores, unless switched off
   * ({@link #flashAttention(boolean)}). Otherwise the GEMMs over (B,NH,T,T) matrices of {@link #attentionForward}.
   */
  public boolean flashAttention(int HS) {
    return flashAttention && flashAttention(precision, HS, ctx.computeCapabilityMajor());
  }

  /**
   * {@link #flashAttention(int)} of a backend in {@code precision} on a GPU of compute capability {@code ccMajor}.x with
   * flash attention on (the default): the kernels' {@code mma.sync ... .bf16} needs sm_80 or later (PTX ISA,
   * "Warp-level matrix multiply-accumulate instructions"; below it the kernels would trap), so older GPUs keep the GEMM
   * form.
   */
  public static boolean flashAttention(Precision precision, int HS, int ccMajor) {
    return precision == Precision.BF16 && FlashAttention.supports(HS) && ccMajor >= 8;
  }

  /**
   * Switches flash attention on (the default) or off, before the model's activations are laid out
   * ({@link #attentionStateSize}): benchmarks time the GEMM form against it.
   */
  public void flashAttention(boolean on) {
    flashAttention = on;
  }

  /** B·NH·T log-sum-exps with {@link #flashAttention(int) flash attention}, else the (B,NH,T,T) probabilities. */
  @Override
  public long attentionStateSize(int B, int NH, int T, int HS) {
    return flashAttention(HS) ? (long) B * NH * T : (long) B * NH * T * T;
  }

  /** A {@link FlashAttention} kernel specialised for HS, on its grid ({@link FlashAttention#blocks}). */
  private void launchFlash(String kernel, int HS, int B, int NH, int T, Object... args) {
    kernels.computeIfAbsent(FlashAttention.class.getName() + "#" + kernel + "#" + HS,
        k -> ctx.kernel(LayerKernels.flash(kernel, HS)))
        .launch(Dim3.of(FlashAttention.blocks(B, NH, T)), Dim3.of(FlashAttention.WARPS * 32), 0, stream, args);
  }

  /**
   * The block of the causal attention GEMMs for sequence length T: the score, probability and gradient matrices are
   * computed and read only in blocks of {@code blk} queries × the keys up to the block's end (the lower
   * block-triangle, where causal attention's non-zeros are): T/4 (5/8 of the square) where that is at least
   * {@link #causalBlockMinimum}, else T (one block, the full square). Measured on the H200 (device run 15 of
   * 2026-12-01, bf16, a whole step): at T = 2048 (D=1024) 4 blocks of 512 took 32.2 ms against 33.5 for one; at
   * T = 1024 (D=768) 2 blocks of 512 took 29.3 ms and 4 of 256 31.6 against 28.8 for one: the smaller batched GEMMs
   * (and their extra calls) lose there what the skipped blocks save.
   */
  public int causalBlock(int T) {
    return T % 4 == 0 && T / 4 >= causalBlockMinimum ? T / 4 : T;
  }

  /**
   * Sets the smallest causal block ({@link #causalBlock}; 512 by default): tests use small ones to run the blocked
   * GEMMs on small models, benchmarks a huge one to time the one-block (full square) form.
   *
   * @throws IllegalArgumentException if {@code rows < 1}
   */
  public void causalBlockMinimum(int rows) {
    if (rows < 1) throw new IllegalArgumentException("causal block minimum must be >= 1, got " + rows);
    causalBlockMinimum = rows;
  }

  /**
   * A (B,NH,T,T) score-shaped tensor of {@code n} elements as a GEMM operand: itself (fp32), or in bf16 mode its bytes
   * read as bf16 (the first half of the region holds the matrix).
   */
  private Operand scores(String name, View<DeviceBuffer> v, long n) {
    check(name, v, n);
    return precision == Precision.FP32 ? new Operand(v.arena(), v.offset(), DataType.F32)
        : new Operand(v.arena(), 2 * v.offset(), DataType.BF16);
  }

  /**
   * The (b,h) strides, in elements, of attention's three kinds of operand: a head of qkv or dqkv (B,T,3C), a head of
   * out or dout (B,T,C), a (T,T) block of att or scratch (B,NH,T,T); {@code [0]} steps b, {@code [1]} steps h.
   */
  private record Heads(int B, int NH, long[] qkv, long[] rows, long[] att) {
    Heads(int B, int NH, int T, int c, int HS) {
      this(B, NH, new long[] {3L * T * c, HS}, new long[] {(long) T * c, HS}, new long[] {(long) NH * T * T,
          (long) T * T});
    }
  }

  /**
   * One product {@code C = op(A)·op(B)} (C overwritten) for every (b,h), as strided-batched GEMMs: batched over the longer of
   * B and NH (a constant stride either way), one call per index of the shorter, so a step makes min(B, NH) calls per
   * product rather than B·NH. A and B share a type; {@code outType} is C's. Offsets ({@code aAt} ...) are of (b,h) =
   * (0,0), in elements from each operand's own offset; {@code sA}, {@code sB}, {@code sC} are the strides from
   * {@link Heads}.
   */
  private void headGemms(Heads h, DataType outType, boolean transA, boolean transB, int m, int n, int k, Operand a,
      long aAt, int lda, long[] sA, Operand b, long bAt, int ldb, long[] sB, Operand c, long cAt, int ldc, long[] sC) {
    if (a.type != b.type || c.type != outType) throw new IllegalStateException("attention operand types disagree");
    int batchDim = h.NH() >= h.B() ? 1 : 0, loopDim = 1 - batchDim;
    int calls = batchDim == 1 ? h.B() : h.NH(), batch = batchDim == 1 ? h.NH() : h.B();
    for (int i = 0; i < calls; i++) {
      blas.gemmStridedBatched(stream, transA, transB, m, n, k, a.type, outType, 1f, a.buf, a.off + aAt
          + i * sA[loopDim], lda, sA[batchDim], b.buf, b.off + bAt + i * sB[loopDim], ldb, sB[batchDim], 0f, c.buf,
          c.off + cAt + i * sC[loopDim], ldc, sC[batchDim], batch);
    }
  }

  /**
   * sums(C) += the column sums of x(rows, C), as the GEMM ones(1,rows)·x with fp32 accumulation, x fp32 or bf16 (the
   * column-sum kernels of the CPU give one thread per 16 columns, too few for a GPU).
   */
  private void columnSums(View<DeviceBuffer> sums, Operand x, int rows, int C) {
    check("column sums", sums, C);
    boolean bf16 = x.type == DataType.BF16;
    if (!bf16) check("column-sum input", new View<>(x.buf, x.off), (long) rows * C);
    DeviceBuffer o = bf16 ? onesBf16 : ones;
    if (o == null || o.bytes() < (bf16 ? 2L : 4L) * rows) {
      float[] host = new float[bf16 ? (rows + 1) / 2 : rows];
      java.util.Arrays.fill(host, bf16 ? Float.intBitsToFloat(0x3F803F80) : 1f); // bf16: two 1.0 (0x3F80) a word
      release(o);
      o = fromHost(host);
      if (bf16) onesBf16 = o;
      else ones = o;
    }
    exact.matmul(stream, x.type, DataType.F32, o, 0, x.buf, x.off, sums.arena(), sums.offset(), 1, C, rows, true);
  }

  private void columnSums(View<DeviceBuffer> sums, View<DeviceBuffer> x, int rows, int C) {
    columnSums(sums, new Operand(x.arena(), x.offset(), DataType.F32), rows, C);
  }

  /** Frees a work-space arena being replaced by a larger one, once the stream no longer uses it. */
  private void release(DeviceBuffer b) {
    if (b == null) return;
    if (capturing) throw new IllegalStateException("work space released while a step is captured as a graph");
    stream.synchronize();
    owned.remove(b);
    b.close();
  }

  /** Work space of at least {@code n} elements for the column-sum terms, allocated at first use. */
  private DeviceBuffer columnScratch(long n) {
    if (columns == null || columns.bytes() < 4 * n) {
      release(columns);
      columns = alloc(n);
    }
    return columns;
  }

  @Override
  public void geluForward(View<DeviceBuffer> out, View<DeviceBuffer> inp, int n) {
    launch(Gelu.class, "geluForward", n, p("out", out, n), 0, p("inp", inp, n), 0, n);
  }

  @Override
  public void geluBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dout, View<DeviceBuffer> inp, int n) {
    launch(Gelu.class, "geluBackwardInto", n, p("dinp", dinp, n), 0, p("dout", dout, n), 0, p("inp", inp, n), 0, n);
  }

  @Override
  public void residualForward(View<DeviceBuffer> out, View<DeviceBuffer> a, View<DeviceBuffer> b,
      View<DeviceBuffer> bias, int rows, int C) {
    long n = (long) rows * C;
    if (C % 4 == 0 && out.offset() % 4 == 0 && a.offset() % 4 == 0 && b.offset() % 4 == 0 && bias.offset() % 4 == 0) {
      launch(Residual.class, "residualBiasForward4", n / 4, p("out", out, n), 0, p("a", a, n), 0, p("b", b, n), 0,
          p("bias", bias, C), 0, C, (int) (n / 4));
      return;
    }
    launch(Residual.class, "residualBiasForward", n, p("out", out, n), 0, p("a", a, n), 0, p("b", b, n), 0,
        p("bias", bias, C), 0, rows, C);
  }

  /** out(rows, C) += bias(C) (the fp32 mode's linear-layer bias). */
  private void addBias(View<DeviceBuffer> out, View<DeviceBuffer> bias, int rows, int C) {
    launch(Matmul.class, "matmulForwardBias", (long) rows * C, p("out", out, (long) rows * C), 0, p("bias", bias, C), 0,
        rows, C);
  }

  /**
   * Waits for the stream to bring the B·T losses back and sums them in order, as the CPU does; while a step is being
   * captured as a graph ({@link #replay}) nothing comes back and the result is NaN ({@link #meanLoss} reads it after
   * the replay).
   */
  @Override
  public float crossEntropyForward(View<DeviceBuffer> losses, View<DeviceBuffer> probs, View<DeviceBuffer> logits,
      int[] targets, int B, int T, int V) {
    int bt = B * T;
    DeviceBuffer ids = upload(targets, bt, V, "targets");
    launchWarps(CrossEntropy.class, "crossentropyForwardWarp", bt, p("losses", losses, bt), 0,
        p("probs", probs, (long) bt * V),
        0, p("logits", logits, (long) bt * V), 0, ids, 0, B, T, V);
    return capturing ? Float.NaN : meanLoss(losses, bt);
  }

  @Override
  public float meanLoss(View<DeviceBuffer> losses, int n) {
    float[] l = toHost(losses, n);
    double total = 0.0;
    for (float x : l) total += x;
    return (float) (total / n);
  }

  /**
   * One rank alone (TP = 1): the first call runs {@code work} (it compiles the kernels and allocates the work space),
   * the second captures it as a CUDA graph ({@link CudaGraph}, thread-local capture) and launches it, later calls
   * launch the graph; before each launch the token ids that {@code work} uploads (its host arrays, which must be the
   * same arrays every call) are checked and copied again. A new {@code key} starts over. In a TP group {@code work}
   * runs as it is: the device-local collectives coordinate the ranks from the host, which a graph cannot hold.
   *
   * @throws IllegalStateException if the captured work allocates device memory or waits for the host (a bug)
   */
  @Override
  public void replay(Object key, Runnable work) {
    if (tp != null) {
      work.run();
      return;
    }
    if (key != graphKey) {
      if (graph != null) graph.close();
      graph = null;
      graphKey = key;
      graphRuns = 0;
      graphUploads.clear();
    }
    if (graphRuns++ == 0) {
      work.run();
      return;
    }
    if (graph == null) {
      stream.synchronize();
      graphUploads.clear();
      RuntimeException failure = null;
      capturing = true;
      stream.beginCapture(CudaGraph.CaptureMode.THREAD_LOCAL);
      try {
        work.run();
      } catch (RuntimeException e) {
        failure = e;
      }
      capturing = false;
      CudaGraph captured;
      try {
        captured = stream.endCapture(); // ends the capture even when the work failed
      } catch (RuntimeException e) {
        if (failure == null) throw e;
        failure.addSuppressed(e);
        throw failure;
      }
      if (failure != null) {
        captured.close();
        throw failure;
      }
      try {
        graph = captured.instantiate();
      } catch (RuntimeException e) {
        captured.close();
        throw e;
      }
    }
    for (Upload u : graphUploads) copyIn(checkedIds(u.ids, u.n, u.vocab, u.name), u.device);
    graph.launch(stream);
    graphLaunches++;
  }

  /** How many times {@link #replay} has launched a captured graph. */
  public long graphLaunches() {
    return graphLaunches;
  }

  /** A host id array that a captured step reads from its device copy, copied again before each replay. */
  private record Upload(int[] ids, int n, int vocab, String name, DeviceBuffer device) {}

  @Override
  public void crossEntropyBackward(View<DeviceBuffer> dlogits, View<DeviceBuffer> probs, int[] targets, int B, int T,
      int V, float dloss) {
    int bt = B * T;
    launch(CrossEntropy.class, "crossentropyBackward", (long) bt * V, p("dlogits", dlogits, (long) bt * V), 0,
        p("probs", probs, (long) bt * V), 0, uploaded(targets, "targets"), 0, B, T, V, dloss);
  }

  /**
   * Through this rank's device collectives with the plan, or the site's ({@link CollectiveSites#planAt}); nothing to do
   * with one rank, or when built without TP communication.
   */
  @Override
  public void allReduce(String site, View<DeviceBuffer> x, int rows, int cols) {
    noFreshCopies();
    check(site, x, (long) rows * cols);
    if (tp == null || !tpComm) return;
    Plan p = sitePlan(site, () -> toHost(x, rows * cols), rows, cols, "all-reduce");
    named("all-reduce", site, () -> tp.allReduce(p, new DeviceTensor(x.arena().slice(4 * x.offset(),
        4L * rows * cols), false), rows, cols));
  }

  /**
   * All-gather at {@code site} through the device collectives, with the site's plan ({@link CollectiveSites#planAt},
   * no token-axis layout); without collectives (TP = 1) a device copy, without TP communication nothing.
   */
  @Override
  public void allGather(String site, View<DeviceBuffer> out, View<DeviceBuffer> shard, int shardRows, int cols) {
    noFreshCopies();
    long n = (long) shardRows * cols;
    check(site, shard, n);
    if (tp == null) {
      check(site, out, n);
      out.arena().slice(4 * out.offset(), 4 * n).copyFromAsync(shard.arena().slice(4 * shard.offset(), 4 * n), 4 * n,
          stream);
      return;
    }
    check(site, out, n * tp.worldSize());
    if (!tpComm) return;
    Plan p = sitePlan(site, () -> toHost(shard, (int) n), shardRows, cols, "all-gather");
    named("all-gather", site, () -> tp.allGather(p, new DeviceTensor(shard.arena().slice(4 * shard.offset(), 4 * n),
        false), shardRows, cols, new DeviceTensor(out.arena().slice(4 * out.offset(), 4 * n * tp.worldSize()), false)));
  }

  /** Reduce-scatter at {@code site}, as {@link #allGather}. */
  @Override
  public void reduceScatter(String site, View<DeviceBuffer> shard, View<DeviceBuffer> x, int rows, int cols) {
    noFreshCopies();
    long n = (long) rows * cols;
    check(site, x, n);
    int world = tp == null ? 1 : tp.worldSize();
    check(site, shard, n / world);
    if (tp == null) {
      shard.arena().slice(4 * shard.offset(), 4 * n).copyFromAsync(x.arena().slice(4 * x.offset(), 4 * n), 4 * n,
          stream);
      return;
    }
    if (!tpComm) return;
    Plan p = sitePlan(site, () -> toHost(x, (int) n), rows, cols, "reduce-scatter");
    named("reduce-scatter", site, () -> tp.reduceScatter(p, new DeviceTensor(x.arena().slice(4 * x.offset(), 4 * n),
        false), rows, cols, new DeviceTensor(shard.arena().slice(4 * shard.offset(), 4 * n / world), false)));
  }

  /** Exact all-reduce through the device collectives ({@link Plan#EXACT}); nothing at TP = 1 or without TP comm. */
  @Override
  public void allReduceExact(View<DeviceBuffer> x, int n) {
    noFreshCopies();
    check("gradients", x, n);
    if (tp == null || !tpComm) return;
    tp.allReduce(Plan.EXACT, new DeviceTensor(x.arena().slice(4 * x.offset(), 4L * n), false), n, 1);
  }

  /** Runs {@code op}, a collective of {@code kind} at {@code site}, naming both in a refusal's message. */
  private static void named(String kind, String site, Runnable op) {
    try {
      op.run();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(kind + " at " + site + ": " + e.getMessage(), e);
    }
  }

  /** The plan of the next collective at {@code site}, releasing a plan no site uses any more. */
  private Plan sitePlan(String site, java.util.function.Supplier<float[]> host, int rows, int cols, String kind) {
    if (sites == null) return plan;
    Plan p = sites.planAt(site, host, rows, cols, kind);
    Plan before = sitePlans.put(site, p);
    if (before != null && before != p && !sitePlans.containsValue(before)) {
      tp.release(before); // no site uses it any more (calibrated or recalibrated away): free its buffers
    }
    return p;
  }

  /**
   * Device milliseconds of the kernels of the last TP all-reduce (quantise, reduce, dequantise; pack and unpack for
   * the raw plans), once it has finished (this waits for the stream): the collectives' share that is compression
   * rather than moving bytes. 0 without collectives or TP communication; NaN where the collectives run as a CUDA graph
   * (NCCL), which records no per-task times. For {@link OpTimes}' {@code compression} category.
   */
  public double lastCollectiveKernelMillis() {
    if (tp == null || !tpComm) return 0;
    stream.synchronize();
    try {
      double ms = 0;
      for (Map.Entry<String, Float> e : tp.lastTaskMillis().entrySet()) {
        String n = e.getKey();
        if (!n.startsWith("all-to-all") && !n.startsWith("all-gather")) ms += e.getValue();
      }
      return ms;
    } catch (IllegalStateException e) {
      return Double.NaN; // under CUDA graphs, or before any collective
    }
  }

  /**
   * {@link GradNorm#gradNormPartials} on the device with n/64 partial sums, at least the CPU's {@link GradNorm#PARTS}
   * and at most {@link #NORM_PARTS} (4096 alone would leave most of the GPU idle, 16 blocks for 10⁸ elements; n/512
   * still kept too few loads in flight: 0.73 ms for 85 M gradients at D=768, a sixth of the memory's speed), folded
   * on the device into {@link GradNorm#PARTS} ({@link GradNorm#foldPartials}), which come back and are added in order.
   */
  @Override
  public double squaredNorm(DeviceBuffer grads, ParameterTensors layout, boolean includeReplicated) {
    int n = layout.size();
    DeviceBuffer skip = hostCopies.get(layout);
    if (skip == null) {
      boolean[] mask = layout.replicatedMask();
      byte[] bytes = new byte[n];
      for (int i = 0; i < n; i++) bytes[i] = (byte) (mask[i] ? 1 : 0);
      skip = uploadBytes(bytes);
      hostCopies.put(layout, skip);
    }
    if (normPartials == null) normPartials = alloc(2L * (NORM_PARTS + GradNorm.PARTS)); // doubles
    if (n > Integer.MAX_VALUE - NORM_PARTS) throw new IllegalArgumentException(n + " gradients is too many");
    int parts = Math.max(GradNorm.PARTS, Math.min(NORM_PARTS, n / 64));
    launch(GradNorm.class, "gradNormPartials", parts, normPartials, 0, p("grads", new View<>(grads, 0), n),
        0, skip, 0, !includeReplicated, n, parts);
    int folded = GradNorm.PARTS; // ≤ parts: the second level, in the same buffer after the first
    long second = normPartials.pointer() + 8L * NORM_PARTS;
    launch(GradNorm.class, "foldPartials", folded, second, 0, normPartials, 0, parts, folded);
    double[] partial = new double[folded];
    stream.synchronize();
    normPartials.copyToHost(partial, 0, partial.length, 8L * NORM_PARTS);
    double s = 0;
    for (double x : partial) s += x;
    return s;
  }

  @Override
  public void adamw(DeviceBuffer params, DeviceBuffer grads, DeviceBuffer m, DeviceBuffer v, byte[] decay, int n,
      float lr, float beta1, float beta2, float eps, float weightDecay, float gradScale, int step) {
    if (n < 0 || step < 1) {
      throw new IllegalArgumentException("need n >= 0 and step >= 1, got n = " + n + ", step = " + step);
    }
    if (decay.length < n) throw new IllegalArgumentException("decay has " + decay.length + " flags, needs " + n);
    DeviceBuffer d = hostCopies.get(decay);
    if (d == null) {
      d = uploadBytes(decay);
      hostCopies.put(decay, d);
    }
    launch(AdamW.class, "adamwUpdate", n, p("params", new View<>(params, 0), n), 0, p("grads", new View<>(grads, 0), n),
        0, p("m", new View<>(m, 0), n), 0, p("v", new View<>(v, 0), n), 0, d, 0, n, lr, beta1, beta2, eps, weightDecay,
        gradScale, AdamW.biasCorrection(beta1, step), AdamW.biasCorrection(beta2, step));
  }

  /**
   * Frees every arena, the cuBLAS handle and its own stream, after waiting for the stream; idempotent. Everything is
   * released even when the wait fails (a kernel fault), whose exception is then rethrown.
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    RuntimeException failure = null;
    try {
      stream.synchronize();
    } catch (RuntimeException e) {
      failure = e;
    }
    if (graph != null) graph.close();
    if (lt != null) lt.close();
    if (exact != blas) exact.close();
    blas.close();
    for (DeviceBuffer b : owned) b.close();
    owned.clear();
    if (staging != null) staging.close();
    if (ownsStream) stream.close();
    if (failure != null) throw failure;
  }

  // ------------------------------------------------------------------ helpers

  /** A kernel with one {@code @Parallel} loop of {@code iterations} (grid-stride: the grid is capped). */
  private void launch(Class<?> owner, String kernel, long iterations, Object... args) {
    int blocks = (int) Math.max(1, Math.min((iterations + BLOCK - 1) / BLOCK, MAX_BLOCKS));
    function(owner, kernel).launch(Dim3.of(blocks), Dim3.of(BLOCK), 0, stream, args);
  }

  /** A SIMT kernel that gives warp w of the grid row w: one warp per row, {@link #WARPS} rows per block. */
  private void launchWarps(Class<?> owner, String kernel, long rows, Object... args) {
    long blocks = (rows + WARPS - 1) / WARPS;
    if (blocks > Integer.MAX_VALUE) throw new IllegalArgumentException(kernel + ": " + rows + " rows is too many");
    function(owner, kernel).launch(Dim3.of((int) Math.max(1, blocks)), Dim3.of(BLOCK), 0, stream, args);
  }

  private CudaFunction function(Class<?> owner, String kernel) {
    return kernels.computeIfAbsent(owner.getName() + "#" + kernel, k -> ctx.kernel(KernelRequest.of(owner, kernel)));
  }

  /** The device address of {@code v}, after checking that {@code n} elements from it fit its arena. */
  private static Long p(String name, View<DeviceBuffer> v, long n) {
    check(name, v, n);
    return v.arena().pointer() + 4 * v.offset();
  }

  private static void check(String name, View<DeviceBuffer> v, long n) {
    if (v.offset() < 0 || n < 0 || 4 * (v.offset() + n) > v.arena().bytes()) {
      throw new IllegalArgumentException(name + ": " + n + " elements from offset " + v.offset() + " do not fit an "
          + "arena of " + v.arena().bytes() / 4 + " float32 elements");
    }
  }

  /**
   * Checks {@code n} ids against {@code [0, V)} and copies them to the device copy kept for {@code ids}; while a step
   * is being captured, registers the copy to be made before each replay instead ({@link #replay}).
   */
  private DeviceBuffer upload(int[] ids, int n, int V, String name) {
    checkedIds(ids, n, V, name);
    DeviceBuffer d = hostCopies.get(ids);
    if (d == null) {
      d = alloc(ids.length);
      hostCopies.put(ids, d);
    }
    if (capturing) {
      graphUploads.add(new Upload(ids, n, V, name, d));
    } else {
      copyIn(ids, d);
    }
    return d;
  }

  private static int[] checkedIds(int[] ids, int n, int V, String name) {
    if (ids.length < n) throw new IllegalArgumentException(name + " has " + ids.length + " ids, needs " + n);
    for (int i = 0; i < n; i++) {
      if (ids[i] < 0 || ids[i] >= V) {
        throw new IllegalArgumentException(name + "[" + i + "] = " + ids[i] + " is outside the vocabulary [0, " + V
            + ")");
      }
    }
    return ids;
  }

  private DeviceBuffer uploaded(int[] ids, String name) {
    DeviceBuffer d = hostCopies.get(ids);
    if (d == null) {
      throw new IllegalStateException(name + ": a backward call before the forward call that uploads its ids");
    }
    return d;
  }

  private DeviceBuffer uploadBytes(byte[] bytes) {
    DeviceBuffer d = alloc((bytes.length + 3) / 4);
    copyIn(bytes, d);
    return d;
  }

  /**
   * A whole host array → pinned staging → the start of {@code d}, ordered on the stream (a synchronous copy from
   * pageable memory is not ordered with a non-blocking stream); the staging is reused once the stream has drained.
   */
  private void copyIn(Object array, DeviceBuffer d) {
    long bytes = HostArrays.byteSize(array);
    if (bytes == 0) return;
    if (capturing) throw new IllegalStateException("a host copy while a step is captured as a graph");
    stream.synchronize();
    if (staging == null || staging.bytes() < bytes) {
      if (staging != null) staging.close();
      staging = ctx.allocPinned(Math.max(bytes, 1 << 16));
    }
    staging.write(0, array);
    d.copyFromAsync(staging, 0, 0, bytes, stream);
  }
}
