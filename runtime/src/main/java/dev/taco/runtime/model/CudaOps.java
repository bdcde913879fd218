package dev.taco.runtime.model;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;

import dev.taco.collective.device.DeviceOutOfMemoryException;
import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.CublasLt;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.runtime.layers.AdamW;
import dev.taco.runtime.layers.CrossEntropy;
import dev.taco.runtime.layers.Encoder;
import dev.taco.runtime.layers.FlashAttention;
import dev.taco.runtime.layers.Gelu;
import dev.taco.runtime.layers.GradNorm;
import dev.taco.runtime.layers.LayerNorm;
import dev.taco.runtime.layers.Matmul;
import dev.taco.runtime.layers.Residual;
import dev.taco.runtime.model.Bf16Copies.Operand;
import dev.taco.runtime.model.Bf16Copies.Slot;
import java.util.IdentityHashMap;
import java.util.Map;

/**
 * The GPU backend of {@link Ops} (docs/design.md §5–§6): every arena is one float32 {@link DeviceBuffer}, resident for
 * the whole step; GEMMs through {@link Cublas} (fp32 accumulation; the inputs exact or rounded to bf16 on tensor cores,
 * see {@link Precision}, with the bf16 operands kept by {@link Bf16Copies}); attention by {@link CudaAttention} (flash
 * attention in Java in bf16 mode, else per-head GEMMs); every other layer through the Java kernels of
 * {@code dev.taco.runtime.layers} (translated to CUDA C by {@code KernelSources}, compiled by NVRTC at first use),
 * launched by method reference: the CPU's element-wise kernels as they are, and the GPU's own forms where a row is
 * reduced (a warp per row: LayerNorm, softmax, cross-entropy), a column sum is split into partial sums (LayerNorm's
 * dweight/dbias, the gradient norm) or a gradient gathered (dwte as one-hot rows times dout). So a GPU step computes
 * the CPU step's formulas, with sums added in other orders. The first writer of an activation gradient overwrites it
 * ({@link Ops#matmulBackward}): no zeroing passes.
 *
 * <p>All work goes on one stream ({@link DeviceStream}). The host waits for it only where a host value is needed: the
 * mean loss (the B·T per-position losses come back and are summed in order, as on the CPU), the gradient norm (4096
 * float64 partial sums come back), and before token ids are uploaded (an async copy from pinned memory on the stream).
 * Token ids are uploaded by the forward calls ({@link #encoderForward}, {@link #crossEntropyForward}); the backward
 * calls with the same host array use the copy their forward made. Alone, a training step runs as one CUDA graph from
 * its second call on ({@link StepGraph}).
 *
 * <p>In a TP group the backend works on its collectives' stream ({@link #CudaOps(CudaContext, CudaStream, Precision)})
 * and {@link CudaTensorParallel} runs the collectives between its layers.
 *
 * <p>Not thread-safe: one thread per rank. Close it to free the device memory it allocated.
 */
public final class CudaOps implements Ops<DeviceBuffer>, AutoCloseable {
  /**
   * What the GEMMs multiply in. Weights, their gradients and the AdamW moments are fp32 in both modes; so are the
   * activations in fp32 mode. In bf16 mode the activations that only GEMMs and their own layer read are stored in
   * bf16 only, as PyTorch's autocast stores them (qkv with flash attention, the MLP's pre-activation and GELU output,
   * the GELU's input gradient, dqkv); the others (the residual stream, LayerNorm outputs, attention output, the
   * row-parallel outputs that are all-reduced) in fp32 with a bf16 copy beside them where a GEMM reads them.
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

  /** Most partial sums of the gradient norm (a thread each; the host adds them up). */
  static final int NORM_PARTS = 1 << 20;
  /** The largest one-hot matrix (N·V elements, 128 MiB) the wte gradient is computed through; above it, a gather. */
  static final long ONE_HOT_MAX = 1L << 25;
  /**
   * Row blocks of LayerNorm's dweight/dbias partial sums: 256 x C threads (196 K at C = 768) fill the GPU while each
   * sums B·T/256 rows (32 at the GPT-2-small shape).
   */
  static final int LN_PARAM_PARTS = 256;

  private final DeviceStream device;
  private final Precision precision;
  private final Cublas blas;
  /** Exact fp32 GEMMs (column sums, the one-hot wte gradient) whatever the precision: {@link #blas} in fp32 mode. */
  private final Cublas exact;
  private final CublasLt lt; // null in fp32 mode or without libcublasLt
  private final Bf16Copies copies;
  private final CudaAttention attention;
  private final StepGraph steps;
  /** Device copies of host arrays that do not change (the replicated mask, the weight-decay flags). */
  private final Map<Object, DeviceBuffer> constants = new IdentityHashMap<>();
  private DeviceBuffer normPartials;
  private DeviceBuffer columns;
  private DeviceBuffer ones;
  /** {@link #columnSums}' bf16 ones. */
  private DeviceBuffer onesBf16;
  private boolean closed;

  /**
   * One rank alone (TP = 1) in fp32: its own stream; a training step replays as a CUDA graph.
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
    this(ctx, null, precision);
  }

  /**
   * One rank of a TP group: every operation on {@code stream}, the rank's collectives' stream
   * ({@link dev.taco.collective.device.DeviceCollectives#stream}), so that each collective is ordered between the layer
   * that writes its input and the one that reads its output, with no host synchronisation. Steps run as they are (the
   * collectives coordinate the ranks from the host, which a CUDA graph cannot hold).
   *
   * @param stream the stream to work on (not closed by this), or null for one of its own and steps as CUDA graphs
   */
  public CudaOps(CudaContext ctx, CudaStream stream, Precision precision) {
    this.precision = java.util.Objects.requireNonNull(precision, "precision");
    this.device = new DeviceStream(ctx, stream);
    Cublas handle = null;
    Cublas strict = null;
    CublasLt fused = null;
    try {
      DeviceBuffer ws = device.alloc(Cublas.WORKSPACE_BYTES / 4); // freed with the other arenas by close
      handle = Cublas.create(ctx, ws, precision.math);
      strict = precision.math == Cublas.Fp32Math.STRICT ? handle : Cublas.create(ctx, ws, Cublas.Fp32Math.STRICT);
      // cuBLASLt's bias epilogue for the bf16 linear layers; both handles use the workspace, in stream order
      if (precision == Precision.BF16 && CublasLt.available()) fused = CublasLt.create(ctx, ws);
    } catch (RuntimeException | LinkageError e) {
      if (strict != null && strict != handle) strict.close();
      if (handle != null) handle.close();
      device.close();
      throw e;
    }
    this.blas = handle;
    this.exact = strict;
    this.lt = fused;
    this.copies = new Bf16Copies(device, precision == Precision.BF16);
    this.attention = new CudaAttention(device, copies, blas, precision == Precision.BF16);
    this.steps = new StepGraph(device, stream == null);
  }

  /** What the GEMMs multiply in. */
  public Precision precision() {
    return precision;
  }

  /** The stream every operation is enqueued on. */
  public CudaStream stream() {
    return device.stream();
  }

  /** The context. */
  public CudaContext context() {
    return device.context();
  }

  /** A collective has written a tensor: no bf16 copy made before it may be taken as fresh ({@link Bf16Copies}). */
  void collectiveWrote() {
    copies.collectiveWrote();
  }

  /**
   * A zeroed float32 device arena of {@code n} elements, freed by {@link #close}.
   *
   * @throws DeviceOutOfMemoryException if the device has not that much free memory (the message gives the size)
   */
  @Override
  public DeviceBuffer alloc(long n) {
    return device.alloc(n);
  }

  @Override
  public DeviceBuffer fromHost(float[] values) {
    DeviceBuffer b = alloc(values.length);
    device.copyIn(values, b);
    return b;
  }

  /**
   * Copies {@code values} to the start of {@code arena}, ordered on the stream after the work enqueued before.
   *
   * @throws IllegalArgumentException if the arena is shorter than the array
   */
  @Override
  public void copyToDevice(float[] values, DeviceBuffer arena) {
    DeviceStream.slice("arena", new View<>(arena, 0), values.length);
    device.copyIn(values, arena);
  }

  /** Copies {@code n} elements from {@code v} to a new host array (waits for the stream). */
  @Override
  public float[] toHost(View<DeviceBuffer> v, int n) {
    DeviceStream.slice("tensor", v, n);
    float[] out = new float[n];
    device.stream().synchronize();
    v.arena().copyToHost(out, 0, n, 4 * v.offset());
    return out;
  }

  @Override
  public void zero(View<DeviceBuffer> v, long n) {
    DeviceStream.slice("tensor", v, n).memsetAsync((byte) 0, device.stream());
  }

  @Override
  public void encoderForward(View<DeviceBuffer> out, int[] tokens, View<DeviceBuffer> wte, View<DeviceBuffer> wpe,
      int B, int T, int C, int V) {
    DeviceBuffer ids = steps.upload(tokens, B * T, V, "tokens");
    device.parallel((long) B * T * C).task("encoderForward", Encoder::encoderForward, slice("out", out,
        (long) B * T * C), 0, ids, 0, slice("wte", wte, (long) V * C), 0, slice("wpe", wpe, (long) T * C), 0, B, T, C);
  }

  @Override
  public void encoderBackward(View<DeviceBuffer> dwte, View<DeviceBuffer> dwpe, View<DeviceBuffer> dout, int[] tokens,
      int B, int T, int C, int V) {
    DeviceBuffer ids = steps.uploaded(tokens, "tokens");
    long n = (long) B * T;
    if (n * V <= ONE_HOT_MAX) { // dwte += onehot(ids)^T · dout: one exact GEMM instead of V·C scans of the ids
      DeviceBuffer hot = columnScratch(n * V);
      device.parallel(n * V).task("oneHotRows", Encoder::oneHotRows, hot, 0, ids, 0, (int) n, V);
      slice("dwte", dwte, (long) V * C);
      slice("dout", dout, n * C);
      exact.matmulTransA(device.stream(), DataType.F32, DataType.F32, hot, 0, dout.arena(), dout.offset(),
          dwte.arena(), dwte.offset(), V, C, (int) n, true);
    } else {
      device.parallel((long) V * C).task("encoderBackwardWteColumns", Encoder::encoderBackwardWteColumns,
          slice("dwte", dwte, (long) V * C), 0, slice("dout", dout, n * C), 0, ids, 0, B, T, C, V);
    }
    device.parallel((long) T * C).task("encoderBackwardWpe", Encoder::encoderBackwardWpe,
        slice("dwpe", dwpe, (long) T * C), 0, slice("dout", dout, (long) B * T * C), 0, B, T, C);
  }

  @Override
  public void layerNormForward(View<DeviceBuffer> out, View<DeviceBuffer> mean, View<DeviceBuffer> rstd,
      View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> b, int B, int T, int C) {
    long bt = (long) B * T, n = bt * C;
    boolean bf16 = precision == Precision.BF16;
    DeviceBuffer o = slice("out", out, n), copy = bf16 ? copies.forwardCopy(out, n) : o; // fp32: copy not touched
    device.warps(bt).task("layernormForwardWarp", LayerNorm::layernormForwardWarp, KERNEL_CONTEXT, o, 0, copy, 0,
        bf16 ? 1 : 0, slice("mean", mean, bt), 0, slice("rstd", rstd, bt), 0, slice("inp", inp, n), 0,
        slice("weight", w, C), 0, slice("bias", b, C), 0, B, T, C);
    if (bf16) copies.wroteCopy(out, n);
    else copies.noFreshCopy();
  }

  @Override
  public void layerNormBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dw, View<DeviceBuffer> db,
      View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> mean,
      View<DeviceBuffer> rstd, int B, int T, int C) {
    long bt = (long) B * T;
    DeviceBuffer d = slice("dout", dout, bt * C), x = slice("inp", inp, bt * C), mu = slice("mean", mean, bt);
    DeviceBuffer rs = slice("rstd", rstd, bt);
    boolean bf16 = precision == Precision.BF16;
    DeviceBuffer copy = bf16 ? copies.slot(Slot.GRADIENT, bt * C) : null;
    DeviceBuffer di = slice("dinp", dinp, bt * C), c = bf16 ? copy : di; // fp32: copy not touched
    device.warps(bt).task("layernormBackwardRowsWarp", LayerNorm::layernormBackwardRowsWarp, KERNEL_CONTEXT, di, 0, c,
        0, bf16 ? 1 : 0, d, 0, x, 0, slice("weight", w, C), 0, mu, 0, rs, 0, B, T, C);
    if (bf16) copies.wroteGradientCopy(dinp, bt * C, copy);
    else copies.noFreshGradient();
    int parts = (int) Math.min(bt, LN_PARAM_PARTS); // dweight, dbias: partial sums over blocks of rows, then a GEMV
    DeviceBuffer partials = columnScratch(2L * parts * C);
    device.parallel((long) parts * C).task("layernormParamPartials", LayerNorm::layernormParamPartials, partials, 0, d,
        0, x, 0, mu, 0, rs, 0, (int) bt, C, parts);
    columnSums(dw, new Operand(partials, 0, DataType.F32), parts, C);
    columnSums(db, new Operand(partials, (long) parts * C, DataType.F32), parts, C);
  }

  @Override
  public void matmulForward(View<DeviceBuffer> out, View<DeviceBuffer> inp, View<DeviceBuffer> w,
      View<DeviceBuffer> bias, int B, int T, int C, int OC) {
    int n = B * T;
    Operand a = copies.kept(inp, (long) n * C), b = copies.kept(w, (long) C * OC);
    slice("out", out, (long) n * OC);
    if (bias != null && lt != null) { // bf16 operands: the bias added in cuBLASLt's epilogue, no extra pass
      slice("bias", bias, OC);
      lt.matmul(device.stream(), CublasLt.Epilogue.BIAS, false, false, n, OC, C, a.buf(), a.off(), b.buf(), b.off(),
          bias.arena(), bias.offset(), DataType.F32, out.arena(), out.offset());
      return;
    }
    blas.matmul(device.stream(), a.type(), DataType.F32, a.buf(), a.off(), b.buf(), b.off(), out.arena(),
        out.offset(), n, OC, C, false);
    if (bias != null) {
      device.parallel((long) n * OC).task("matmulForwardBias", Matmul::matmulForwardBias, slice("out", out,
          (long) n * OC), 0, slice("bias", bias, OC), 0, n, OC);
    }
  }

  @Override
  public void matmulBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dw, View<DeviceBuffer> dbias,
      View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w, int B, int T, int C, int OC) {
    int n = B * T;
    Operand d = copies.operand(dout, (long) n * OC, Slot.GRADIENT), b = copies.reused(w, (long) C * OC, Slot.WEIGHT);
    slice("dinp", dinp, (long) n * C);
    blas.matmulTransB(device.stream(), d.type(), DataType.F32, d.buf(), d.off(), b.buf(), b.off(), dinp.arena(),
        dinp.offset(), n, C, OC, false);
    paramGrads(d, dw, dbias, inp, n, C, OC);
  }

  /**
   * dw += inp^T · dout and dbias += column sums of dout, {@code d} being dout as a GEMM operand: in bf16 mode the bias
   * gradient sums the bf16 dout the GEMMs multiply (fp32 accumulation), as under PyTorch's autocast, half the bytes
   * of the fp32 dout.
   */
  private void paramGrads(Operand d, View<DeviceBuffer> dw, View<DeviceBuffer> dbias, View<DeviceBuffer> inp, int n,
      int C, int OC) {
    slice("dw", dw, (long) C * OC);
    Operand a = copies.reused(inp, (long) n * C, Slot.ACTIVATION);
    blas.matmulTransA(device.stream(), a.type(), DataType.F32, a.buf(), a.off(), d.buf(), d.off(), dw.arena(),
        dw.offset(), C, OC, n, true);
    if (dbias != null) columnSums(dbias, d, n, OC);
  }

  /**
   * {@link #matmulForward} into pre, then GELU. In bf16 mode ({@link #bf16Mlp}) pre and out are stored in bf16 only,
   * as PyTorch's bf16 autocast stores them: cuBLASLt writes pre (bias in its epilogue, rounded to bf16 as autocast
   * rounds it) into pre's kept copy, {@link Gelu#geluForwardBf16} reads it and writes out's, which the next linear
   * layer's kept operand takes; their fp32 arena regions are not written. Against fp32 pre and out with a bf16 copy of
   * out, this moves 200 of 450 MB per layer at D=768, T=1024, B=8. (cuBLASLt's GELU_AUX_BIAS epilogue with fp32 output
   * ran as a separate epilogue kernel on the H200, 78 µs at 8192 x 3072.)
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
    DeviceBuffer preCopy = matmulIntoCopy(pre, inp, w, bias, B * T, C, OC), outCopy = copies.forwardCopy(out, n);
    device.parallel(n / 8).task("geluForwardBf16", Gelu::geluForwardBf16, outCopy, 0, preCopy, 0, (int) (n / 8));
    copies.bf16Only(out, n);
    copies.wroteCopy(out, n);
  }

  /**
   * bf16 mode: out(N,OC) = inp(N,C) · w(C,OC) + bias (bias rounded to bf16, as PyTorch's autocast rounds it) written by
   * cuBLASLt in bf16 only, into out's kept copy, which it returns; out's fp32 region is not written.
   */
  private DeviceBuffer matmulIntoCopy(View<DeviceBuffer> out, View<DeviceBuffer> inp, View<DeviceBuffer> w,
      View<DeviceBuffer> bias, int N, int C, int OC) {
    long n = (long) N * OC;
    Operand a = copies.kept(inp, (long) N * C), b = copies.kept(w, (long) C * OC);
    DeviceBuffer copy = copies.forwardCopy(out, n);
    if (bias == null) {
      blas.matmul(device.stream(), DataType.BF16, DataType.BF16, a.buf(), a.off(), b.buf(), b.off(), copy, 0, N, OC,
          C, false);
    } else {
      Operand bb = copies.kept(bias, OC);
      lt.matmul(device.stream(), CublasLt.Epilogue.BIAS, false, false, N, OC, C, a.buf(), a.off(), b.buf(), b.off(),
          bb.buf(), bb.off(), DataType.BF16, copy, 0);
    }
    copies.bf16Only(out, n);
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
      copies.wroteCopy(qkv, (long) B * T * oc);
    } else {
      matmulForward(qkv, inp, w, bias, B, T, C, oc);
    }
    attentionForward(out, att, qkv, B, T, NH, HS);
  }

  /**
   * {@link #matmulBackward} into scratch (dout · w^T), then dinp = scratch ⊙ GELU'(pre). In bf16 mode
   * ({@link #bf16Mlp}) all three in bf16, as under PyTorch's autocast: cuBLAS writes dout · w^T in bf16 into a work
   * slot, {@link Gelu#geluBackwardBf16} reads it and pre's kept copy and writes dinp's bf16 copy into the gradient slot,
   * which the previous linear layer's backward takes for its GEMMs and its bias gradient; dinp's and scratch's fp32
   * regions are not written. (cuBLASLt's DGELU epilogue with fp32 output ran as a separate epilogue kernel on the
   * H200, 195 µs at 8192 x 3072.)
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
    DeviceBuffer preCopy = copies.forwardCopyOf(pre, n);
    if (preCopy == null) throw new IllegalStateException("matmulBackwardGelu: no bf16 pre-activation from a forward");
    int rows = B * T;
    Operand d = copies.operand(dout, (long) rows * OC, Slot.GRADIENT);
    Operand b = copies.reused(w, (long) C * OC, Slot.WEIGHT);
    DeviceBuffer dh = copies.slot(Slot.GELU_INPUT, n);
    blas.matmulTransB(device.stream(), d.type(), DataType.BF16, d.buf(), d.off(), b.buf(), b.off(), dh, 0, rows, C,
        OC, false);
    paramGrads(d, dw, dbias, inp, rows, C, OC);
    DeviceBuffer copy = copies.slot(Slot.GRADIENT, n); // d's slot: the GEMMs that read d are ahead on the stream
    device.parallel(n / 8).task("geluBackwardBf16", Gelu::geluBackwardBf16, copy, 0, dh, 0, preCopy, 0,
        (int) (n / 8));
    copies.bf16Only(dinp, n);
    copies.wroteGradientCopy(dinp, n, copy);
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
    Operand a = copies.kept(x, (long) N * C), b = copies.kept(wte, (long) V * C);
    slice("logits", logits, (long) N * V);
    blas.matmulTransB(device.stream(), a.type(), DataType.F32, a.buf(), a.off(), b.buf(), b.off(), logits.arena(),
        logits.offset(), N, V, C, false);
  }

  @Override
  public void headBackward(View<DeviceBuffer> dx, View<DeviceBuffer> dwte, View<DeviceBuffer> dlogits,
      View<DeviceBuffer> x, View<DeviceBuffer> wte, int N, int C, int V) {
    Operand d = copies.operand(dlogits, (long) N * V, Slot.GRADIENT);
    Operand b = copies.reused(wte, (long) V * C, Slot.WEIGHT);
    slice("dx", dx, (long) N * C);
    slice("dwte", dwte, (long) V * C);
    blas.matmul(device.stream(), d.type(), DataType.F32, d.buf(), d.off(), b.buf(), b.off(), dx.arena(), dx.offset(),
        N, C, V, false);
    Operand a = copies.reused(x, (long) N * C, Slot.ACTIVATION);
    blas.matmulTransA(device.stream(), d.type(), DataType.F32, d.buf(), d.off(), a.buf(), a.off(), dwte.arena(),
        dwte.offset(), V, C, N, true);
  }

  /** See {@link CudaAttention#forward}. */
  @Override
  public void attentionForward(View<DeviceBuffer> out, View<DeviceBuffer> att, View<DeviceBuffer> qkv, int B, int T,
      int NH, int HS) {
    attention.forward(out, att, qkv, B, T, NH, HS);
  }

  /** See {@link CudaAttention#backward}. */
  @Override
  public void attentionBackward(View<DeviceBuffer> dqkv, View<DeviceBuffer> scratch, View<DeviceBuffer> dout,
      View<DeviceBuffer> qkv, View<DeviceBuffer> out, View<DeviceBuffer> att, int B, int T, int NH, int HS) {
    attention.backward(dqkv, scratch, dout, qkv, out, att, B, T, NH, HS);
  }

  /**
   * Whether attention runs as {@link FlashAttention} for head size HS: in bf16 mode, for the head sizes its kernels are
   * compiled for ({@link FlashAttention#supports}), on a GPU with bf16 tensor cores, unless switched off
   * ({@link #flashAttention(boolean)}). Otherwise the GEMMs over (B,NH,T,T) matrices.
   */
  public boolean flashAttention(int HS) {
    return attention.flash(HS);
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
    attention.flash(on);
  }

  /** B·NH·T log-sum-exps with {@link #flashAttention(int) flash attention}, else the (B,NH,T,T) probabilities. */
  @Override
  public long attentionStateSize(int B, int NH, int T, int HS) {
    return attention.stateSize(B, NH, T, HS);
  }

  /**
   * The block of the causal attention GEMMs for sequence length T: the score, probability and gradient matrices are
   * computed and read only in blocks of {@code blk} queries × the keys up to the block's end (the lower
   * block-triangle, where causal attention's non-zeros are): T/4 (5/8 of the square) where that is at least the
   * minimum ({@link #causalBlockMinimum}, 512), else T (one block, the full square). Measured on the H200 (device run
   * 15 of 2026-12-01, bf16, a whole step): at T = 2048 (D=1024) 4 blocks of 512 took 32.2 ms against 33.5 for one; at
   * T = 1024 (D=768) 2 blocks of 512 took 29.3 ms and 4 of 256 31.6 against 28.8 for one: the smaller batched GEMMs
   * (and their extra calls) lose there what the skipped blocks save.
   */
  public int causalBlock(int T) {
    return attention.causalBlock(T);
  }

  /**
   * Sets the smallest causal block ({@link #causalBlock}; 512 by default): tests use small ones to run the blocked
   * GEMMs on small models, benchmarks a huge one to time the one-block (full square) form.
   *
   * @throws IllegalArgumentException if {@code rows < 1}
   */
  public void causalBlockMinimum(int rows) {
    attention.causalBlockMinimum(rows);
  }

  /**
   * sums(C) += the column sums of x(rows, C), as the GEMM ones(1,rows)·x with fp32 accumulation, x fp32 or bf16 (the
   * column-sum kernels of the CPU give one thread per 16 columns, too few for a GPU).
   */
  private void columnSums(View<DeviceBuffer> sums, Operand x, int rows, int C) {
    slice("column sums", sums, C);
    boolean bf16 = x.type() == DataType.BF16;
    if (!bf16) slice("column-sum input", new View<>(x.buf(), x.off()), (long) rows * C);
    DeviceBuffer o = bf16 ? onesBf16 : ones;
    if (o == null || o.bytes() < (bf16 ? 2L : 4L) * rows) {
      float[] host = new float[bf16 ? (rows + 1) / 2 : rows];
      java.util.Arrays.fill(host, bf16 ? Float.intBitsToFloat(0x3F803F80) : 1f); // bf16: two 1.0 (0x3F80) a word
      device.release(o);
      o = fromHost(host);
      if (bf16) onesBf16 = o;
      else ones = o;
    }
    exact.matmul(device.stream(), x.type(), DataType.F32, o, 0, x.buf(), x.off(), sums.arena(), sums.offset(), 1, C,
        rows, true);
  }

  /** Work space of at least {@code n} elements for the column-sum terms, allocated at first use. */
  private DeviceBuffer columnScratch(long n) {
    if (columns == null || columns.bytes() < 4 * n) {
      device.release(columns);
      columns = alloc(n);
    }
    return columns;
  }

  @Override
  public void geluForward(View<DeviceBuffer> out, View<DeviceBuffer> inp, int n) {
    device.parallel(n).task("geluForward", Gelu::geluForward, slice("out", out, n), 0, slice("inp", inp, n), 0, n);
  }

  @Override
  public void geluBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dout, View<DeviceBuffer> inp, int n) {
    device.parallel(n).task("geluBackwardInto", Gelu::geluBackwardInto, slice("dinp", dinp, n), 0, slice("dout",
        dout, n), 0, slice("inp", inp, n), 0, n);
  }

  @Override
  public void residualForward(View<DeviceBuffer> out, View<DeviceBuffer> a, View<DeviceBuffer> b,
      View<DeviceBuffer> bias, int rows, int C) {
    long n = (long) rows * C;
    DeviceBuffer o = slice("out", out, n), x = slice("a", a, n), y = slice("b", b, n), c = slice("bias", bias, C);
    if (C % 4 == 0 && out.offset() % 4 == 0 && a.offset() % 4 == 0 && b.offset() % 4 == 0 && bias.offset() % 4 == 0) {
      device.parallel(n / 4).task("residualBiasForward4", Residual::residualBiasForward4, o, 0, x, 0, y, 0, c, 0, C,
          (int) (n / 4));
      return;
    }
    device.parallel(n).task("residualBiasForward", Residual::residualBiasForward, o, 0, x, 0, y, 0, c, 0, rows, C);
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
    DeviceBuffer ids = steps.upload(targets, bt, V, "targets");
    device.warps(bt).task("crossentropyForwardWarp", CrossEntropy::crossentropyForwardWarp, KERNEL_CONTEXT,
        slice("losses", losses, bt), 0, slice("probs", probs, (long) bt * V), 0, slice("logits", logits,
            (long) bt * V),
        0, ids, 0, B, T, V);
    return device.capturing() ? Float.NaN : meanLoss(losses, bt);
  }

  @Override
  public float meanLoss(View<DeviceBuffer> losses, int n) {
    float[] l = toHost(losses, n);
    double total = 0.0;
    for (float x : l) total += x;
    return (float) (total / n);
  }

  /**
   * One rank alone: the first call runs {@code work}, the second captures it as a CUDA graph, later calls launch the
   * graph, with the token ids it uploads copied again before each launch ({@link StepGraph}); the host arrays must be
   * the same arrays every call. A new {@code key} starts over. In a TP group {@code work} runs as it is.
   *
   * @throws IllegalStateException if the captured work allocates device memory or waits for the host (a bug)
   */
  @Override
  public void replay(Object key, Runnable work) {
    steps.replay(key, work);
  }

  /** How many times {@link #replay} has launched a captured graph. */
  public long graphLaunches() {
    return steps.launches();
  }

  @Override
  public void crossEntropyBackward(View<DeviceBuffer> dlogits, View<DeviceBuffer> probs, int[] targets, int B, int T,
      int V, float dloss) {
    long n = (long) B * T * V;
    device.parallel(n).task("crossentropyBackward", CrossEntropy::crossentropyBackward, slice("dlogits", dlogits, n), 0,
        slice("probs", probs, n), 0, steps.uploaded(targets, "targets"), 0, B, T, V, dloss);
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
    DeviceBuffer skip = constants.get(layout);
    if (skip == null) {
      boolean[] mask = layout.replicatedMask();
      byte[] bytes = new byte[n];
      for (int i = 0; i < n; i++) bytes[i] = (byte) (mask[i] ? 1 : 0);
      skip = uploadBytes(bytes);
      constants.put(layout, skip);
    }
    if (normPartials == null) normPartials = alloc(2L * (NORM_PARTS + GradNorm.PARTS)); // doubles
    if (n > Integer.MAX_VALUE - NORM_PARTS) throw new IllegalArgumentException(n + " gradients is too many");
    int parts = Math.max(GradNorm.PARTS, Math.min(NORM_PARTS, n / 64));
    device.parallel(parts).task("gradNormPartials", GradNorm::gradNormPartials, normPartials, 0, slice("grads",
        new View<>(grads, 0), n), 0, skip, 0, !includeReplicated, n, parts);
    int folded = GradNorm.PARTS; // ≤ parts: the second level, in the same buffer after the first
    DeviceBuffer second = normPartials.slice(8L * NORM_PARTS, 8L * GradNorm.PARTS);
    device.parallel(folded).task("foldPartials", GradNorm::foldPartials, second, 0, normPartials, 0, parts, folded);
    double[] partial = new double[folded];
    device.stream().synchronize();
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
    DeviceBuffer d = constants.get(decay);
    if (d == null) {
      d = uploadBytes(decay);
      constants.put(decay, d);
    }
    device.parallel(n).task("adamwUpdate", AdamW::adamwUpdate, slice("params", new View<>(params, 0), n), 0,
        slice("grads", new View<>(grads, 0), n), 0, slice("m", new View<>(m, 0), n), 0, slice("v", new View<>(v, 0), n),
        0, d, 0, n, lr, beta1, beta2, eps, weightDecay, gradScale, AdamW.biasCorrection(beta1, step),
        AdamW.biasCorrection(beta2, step));
  }

  /**
   * Bytes of the bf16 forward copies ({@link Bf16Copies#kept}) of R ranks for a micro-batch of B sequences: every
   * linear layer's input and weight, the attention's qkv, the MLP's pre-activation and the LM head's input and weight,
   * 2 bytes per element.
   */
  public static double forwardCopyBytes(GptConfig cfg, int microBatch) {
    double bt = (double) microBatch * cfg.seqLength(), c = cfg.hiddenSize(), cr = cfg.localHidden();
    double ff = cfg.localFfn(), perLayer = bt * (2 * c + 4 * cr + 2 * ff);
    double weights = cfg.parameterCount() / cfg.tp() + (double) cfg.vocabSize() * c;
    return 2.0 * cfg.tp() * (cfg.numLayers() * perLayer + bt * c + weights);
  }

  /**
   * Frees every arena, the cuBLAS handles, the step's graph and its own stream, after waiting for the stream;
   * idempotent. Everything is released even when the wait fails (a kernel fault), whose exception is then rethrown.
   */
  @Override
  public void close() {
    if (closed) return;
    closed = true;
    RuntimeException failure = null;
    try {
      device.stream().synchronize();
    } catch (RuntimeException e) {
      failure = e;
    }
    steps.close();
    if (lt != null) lt.close();
    if (exact != blas) exact.close();
    blas.close();
    try {
      device.close();
    } catch (RuntimeException e) {
      if (failure == null) failure = e;
    }
    if (failure != null) throw failure;
  }

  /** The {@code n} elements of {@code v} as a kernel's array argument ({@link DeviceStream#slice}). */
  private static DeviceBuffer slice(String name, View<DeviceBuffer> v, long n) {
    return DeviceStream.slice(name, v, n);
  }

  private DeviceBuffer uploadBytes(byte[] bytes) {
    DeviceBuffer d = alloc((bytes.length + 3) / 4);
    device.copyIn(bytes, d);
    return d;
  }
}
