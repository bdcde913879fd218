package dev.taco.runtime.model;

import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceOutOfMemoryException;
import dev.taco.collective.device.DeviceTensor;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cublas.DataType;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaException;
import dev.taco.kernels.cuda.CudaFunction;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.kernels.cuda.HostArrays;
import dev.taco.kernels.cuda.PinnedBuffer;
import dev.taco.runtime.layers.Attention;
import dev.taco.runtime.layers.CrossEntropy;
import dev.taco.runtime.layers.Encoder;
import dev.taco.runtime.layers.Gelu;
import dev.taco.runtime.layers.GradNorm;
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
 * The GPU backend of {@link Ops} (issue E, DESIGN §5–§6), fp32 mode: every arena is one float32 {@link DeviceBuffer},
 * resident for the whole step; GEMMs through {@link Cublas} (fp32 in and out, TF32 off), attention too (strided-batched
 * GEMMs around the causal softmax kernels, as llm.c); every other layer through the same Java kernels the CPU runs ({@code dev.taco.runtime.layers}, translated to CUDA C by
 * {@code KernelSources} and compiled by NVRTC at first use), launched with the same arguments in the same order as the
 * CPU's host wrappers. So apart from the GEMMs' summation order a GPU step computes the CPU step's float operations.
 *
 * <p>All work goes on one stream. The host waits for it only where a host value is needed: the mean loss (the B·T
 * per-position losses come back and are summed in order, as on the CPU), the gradient norm (4096 float64 partial sums
 * come back), and before token ids are uploaded (an async copy from pinned memory on the stream). Token ids are
 * uploaded by the forward calls ({@link #encoderForward}, {@link #crossEntropyForward}); the backward calls with the
 * same host array use the copy their forward made.
 *
 * <p>Tensor parallelism: one rank alone ({@link #CudaOps(CudaContext)}), or one rank of a TP group whose all-reduces go
 * through D's {@link DeviceCollectives} ({@code device-local}: ranks as threads sharing one GPU; NCCL: a GPU per rank)
 * with one plan for every site.
 *
 * <p>Not thread-safe: one thread per rank. Close it to free the device memory it allocated.
 */
public final class CudaOps implements Ops<DeviceBuffer>, AutoCloseable {
  /** Threads per block of the layer kernels (grid-stride loops: any grid covers the iterations). */
  static final int BLOCK = 256;
  private static final long MAX_BLOCKS = 1L << 20;

  private final CudaContext ctx;
  private final DeviceCollectives tp;
  private final Plan plan;
  private final boolean ownsStream;
  private final CudaStream stream;
  private final DeviceBuffer workspace;
  private final Cublas blas;
  private final List<DeviceBuffer> owned = new ArrayList<>();
  private final Map<String, CudaFunction> kernels = new HashMap<>();
  private final Map<Object, DeviceBuffer> hostCopies = new IdentityHashMap<>();
  private PinnedBuffer staging;
  private DeviceBuffer normPartials;
  private DeviceBuffer heads;
  private DeviceBuffer columns;
  private DeviceBuffer ones;
  private boolean closed;

  /**
   * One rank alone (TP = 1): its own stream; the TP all-reduces move nothing.
   *
   * @param ctx the device context (owned by the caller, which closes it after this)
   * @throws dev.taco.kernels.cuda.CublasException if cuBLAS cannot start on this device
   * @throws UnsatisfiedLinkError if libcublas does not load
   */
  public CudaOps(CudaContext ctx) {
    this(ctx, null, null, null);
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
    this(tp.transport().context(), tp, tp.stream(), plan);
  }

  private CudaOps(CudaContext ctx, DeviceCollectives tp, CudaStream shared, Plan plan) {
    this.ctx = ctx;
    ctx.makeCurrent(); // this thread's: a rank's thread builds and drives its backend
    this.tp = tp;
    this.plan = plan;
    this.ownsStream = shared == null;
    this.stream = ownsStream ? ctx.createStream() : shared;
    Cublas handle = null;
    DeviceBuffer ws = null;
    try {
      ws = alloc(Cublas.WORKSPACE_BYTES / 4);
      handle = Cublas.create(ctx, ws, false);
    } catch (RuntimeException | LinkageError e) {
      for (DeviceBuffer b : owned) b.close();
      owned.clear();
      if (ownsStream) stream.close();
      throw e;
    }
    this.workspace = ws;
    this.blas = handle;
  }

  /** The TP world size (1 without collectives). */
  public int worldSize() {
    return tp == null ? 1 : tp.transport().worldSize();
  }

  @Override
  public long bytesSent() {
    return tp == null ? 0 : tp.bytesSent();
  }

  /** The stream every operation is enqueued on. */
  public CudaStream stream() {
    return stream;
  }

  /** The context. */
  public CudaContext context() {
    return ctx;
  }

  /** Waits until every enqueued operation is done (kernel faults surface here as {@link CudaException}). */
  public void synchronize() {
    stream.synchronize();
  }

  /**
   * A zeroed float32 device arena of {@code n} elements, freed by {@link #close}.
   *
   * @throws DeviceOutOfMemoryException if the device has not that much free memory (the message gives the size)
   */
  @Override
  public DeviceBuffer alloc(long n) {
    if (n <= 0) throw new IllegalArgumentException("an arena needs at least one element, got " + n);
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
  public void copyToDevice(float[] values, DeviceBuffer arena) {
    check("arena", new View<>(arena, 0), values.length);
    copyIn(values, arena);
  }

  /** Copies {@code n} elements from {@code v} to a new host array (waits for the stream). */
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
    launch(Encoder.class, "encoderForward", (long) B * T, p("out", out, (long) B * T * C), 0, ids, 0,
        p("wte", wte, (long) V * C), 0, p("wpe", wpe, (long) T * C), 0, B, T, C);
  }

  @Override
  public void encoderBackward(View<DeviceBuffer> dwte, View<DeviceBuffer> dwpe, View<DeviceBuffer> dout, int[] tokens,
      int B, int T, int C, int V) {
    DeviceBuffer ids = uploaded(tokens, "tokens");
    launch(Encoder.class, "encoderBackwardWte", V, p("dwte", dwte, (long) V * C), 0, p("dout", dout, (long) B * T * C),
        0, ids, 0, B, T, C, V);
    launch(Encoder.class, "encoderBackwardWpe", T, p("dwpe", dwpe, (long) T * C), 0, p("dout", dout, (long) B * T * C),
        0, B, T, C);
  }

  @Override
  public void layerNormForward(View<DeviceBuffer> out, View<DeviceBuffer> mean, View<DeviceBuffer> rstd,
      View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> b, int B, int T, int C) {
    long bt = (long) B * T;
    launch(LayerNorm.class, "layernormForward", bt, p("out", out, bt * C), 0, p("mean", mean, bt), 0,
        p("rstd", rstd, bt), 0, p("inp", inp, bt * C), 0, p("weight", w, C), 0, p("bias", b, C), 0, B, T, C);
  }

  @Override
  public void layerNormBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dw, View<DeviceBuffer> db,
      View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w, View<DeviceBuffer> mean,
      View<DeviceBuffer> rstd, int B, int T, int C) {
    long bt = (long) B * T;
    Long pDout = p("dout", dout, bt * C), pInp = p("inp", inp, bt * C), pMean = p("mean", mean, bt);
    Long pRstd = p("rstd", rstd, bt);
    launch(LayerNorm.class, "layernormBackwardRows", bt, p("dinp", dinp, bt * C), 0, pDout, 0, pInp, 0,
        p("weight", w, C), 0, pMean, 0, pRstd, 0, B, T, C);
    DeviceBuffer terms = columnScratch(bt * C);
    launch(LayerNorm.class, "layernormWeightGradTerms", bt * C, terms, 0, pDout, 0, pInp, 0, pMean, 0, pRstd, 0, B, T,
        C);
    columnSums(dw, new View<>(terms, 0), (int) bt, C);
    columnSums(db, dout, (int) bt, C);
  }

  @Override
  public void matmulForward(View<DeviceBuffer> out, View<DeviceBuffer> inp, View<DeviceBuffer> w,
      View<DeviceBuffer> bias, int B, int T, int C, int OC) {
    int n = B * T;
    blas.matmul(stream, DataType.F32, DataType.F32, inp.arena(), inp.offset(), w.arena(), w.offset(), out.arena(),
        out.offset(), n, OC, C, false);
    if (bias != null) addBias(out, bias, n, OC);
  }

  @Override
  public void matmulBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dw, View<DeviceBuffer> dbias,
      View<DeviceBuffer> dout, View<DeviceBuffer> inp, View<DeviceBuffer> w, int B, int T, int C, int OC) {
    int n = B * T;
    blas.matmulTransB(stream, DataType.F32, DataType.F32, dout.arena(), dout.offset(), w.arena(), w.offset(),
        dinp.arena(), dinp.offset(), n, C, OC, true);
    blas.matmulTransA(stream, DataType.F32, DataType.F32, inp.arena(), inp.offset(), dout.arena(), dout.offset(),
        dw.arena(), dw.offset(), C, OC, n, true);
    if (dbias != null) columnSums(dbias, dout, n, OC);
  }

  @Override
  public void headForward(View<DeviceBuffer> logits, View<DeviceBuffer> x, View<DeviceBuffer> wte, int N, int C,
      int V) {
    blas.matmulTransB(stream, DataType.F32, DataType.F32, x.arena(), x.offset(), wte.arena(), wte.offset(),
        logits.arena(), logits.offset(), N, V, C, false);
  }

  @Override
  public void headBackward(View<DeviceBuffer> dx, View<DeviceBuffer> dwte, View<DeviceBuffer> dlogits,
      View<DeviceBuffer> x, View<DeviceBuffer> wte, int N, int C, int V) {
    blas.matmul(stream, DataType.F32, DataType.F32, dlogits.arena(), dlogits.offset(), wte.arena(), wte.offset(),
        dx.arena(), dx.offset(), N, C, V, false);
    blas.matmulTransA(stream, DataType.F32, DataType.F32, dlogits.arena(), dlogits.offset(), x.arena(), x.offset(),
        dwte.arena(), dwte.offset(), V, C, N, true);
  }

  /**
   * As llm.c's cuBLAS attention: q, k, v split per head into (B·NH, T, HS) ({@link Attention#splitHeads}), the scores
   * Q·Kᵀ as one strided-batched GEMM into {@code att}, the causal softmax in place ({@link Attention#softmaxForward}),
   * then P·V batched and the heads merged back into (B,T,NH·HS).
   */
  @Override
  public void attentionForward(View<DeviceBuffer> out, View<DeviceBuffer> att, View<DeviceBuffer> qkv, int B, int T,
      int NH, int HS) {
    int c = NH * HS, n = B * T * c, bh = B * NH;
    long tt = (long) T * T;
    Long pAtt = p("att", att, bh * tt), pQkv = p("qkv", qkv, 3L * n);
    DeviceBuffer s = headScratch(n);
    splitQkv(s, pQkv, B, T, NH, HS);
    blas.gemmStridedBatched(stream, false, true, T, T, HS, DataType.F32, DataType.F32, 1f, s, 0, HS, (long) T * HS, s,
        n, HS, (long) T * HS, 0f, att.arena(), att.offset(), T, tt, bh);
    launch(Attention.class, "softmaxForward", (long) bh * T, pAtt, 0, pAtt, 0, B, NH, T, Attention.scale(HS));
    blas.gemmStridedBatched(stream, false, false, T, HS, T, DataType.F32, DataType.F32, 1f, att.arena(), att.offset(),
        T, tt, s, 2L * n, HS, (long) T * HS, 0f, s, 3L * n, HS, (long) T * HS, bh);
    launch(Attention.class, "mergeHeads", n, p("out", out, n), 0, s.pointer() + 4L * 3 * n, 0, B, T, NH, HS, c, false);
  }

  /**
   * The backward of {@link #attentionForward} (llm.c's {@code attention_backward}): with dY the per-head split of
   * {@code dout}, dP = dY·Vᵀ into {@code scratch}, dV = Pᵀ·dY, dS = softmax backward in place (scale included), dQ =
   * dS·K, dK = dSᵀ·Q, each a strided-batched GEMM; dQ, dK, dV merged into {@code dqkv} (added).
   */
  @Override
  public void attentionBackward(View<DeviceBuffer> dqkv, View<DeviceBuffer> scratch, View<DeviceBuffer> dout,
      View<DeviceBuffer> qkv, View<DeviceBuffer> att, int B, int T, int NH, int HS) {
    int c = NH * HS, n = B * T * c, bh = B * NH;
    long tt = (long) T * T, th = (long) T * HS;
    Long pDqkv = p("dqkv", dqkv, 3L * n), pScratch = p("scratch", scratch, bh * tt);
    Long pQkv = p("qkv", qkv, 3L * n), pAtt = p("att", att, bh * tt);
    DeviceBuffer s = headScratch(n); // q, k, v, dY, dQ, dK, dV
    splitQkv(s, pQkv, B, T, NH, HS);
    launch(Attention.class, "splitHeads", n, s.pointer() + 4L * 3 * n, 0, p("dout", dout, n), 0, B, T, NH, HS, c);
    DeviceBuffer sa = scratch.arena(), aa = att.arena();
    long so = scratch.offset(), ao = att.offset();
    blas.gemmStridedBatched(stream, false, true, T, T, HS, DataType.F32, DataType.F32, 1f, s, 3L * n, HS, th, s,
        2L * n, HS, th, 0f, sa, so, T, tt, bh);
    blas.gemmStridedBatched(stream, true, false, T, HS, T, DataType.F32, DataType.F32, 1f, aa, ao, T, tt, s, 3L * n,
        HS, th, 0f, s, 6L * n, HS, th, bh);
    launch(Attention.class, "softmaxBackward", (long) bh * T, pScratch, 0, pScratch, 0, pAtt, 0, B, NH, T,
        Attention.scale(HS));
    blas.gemmStridedBatched(stream, false, false, T, HS, T, DataType.F32, DataType.F32, 1f, sa, so, T, tt, s, n, HS,
        th, 0f, s, 4L * n, HS, th, bh);
    blas.gemmStridedBatched(stream, true, false, T, HS, T, DataType.F32, DataType.F32, 1f, sa, so, T, tt, s, 0, HS,
        th, 0f, s, 5L * n, HS, th, bh);
    for (int part = 0; part < 3; part++) {
      launch(Attention.class, "mergeHeads", n, pDqkv + 4L * part * c, 0, s.pointer() + 4L * (4 + part) * n, 0, B, T,
          NH, HS, 3 * c, true);
    }
  }

  /**
   * sums(C) += the column sums of x(rows, C), as the GEMM ones(1,rows)·x (the column-sum kernels of the CPU give one
   * thread per 16 columns, too few for a GPU).
   */
  private void columnSums(View<DeviceBuffer> sums, View<DeviceBuffer> x, int rows, int C) {
    check("column sums", sums, C);
    check("column-sum input", x, (long) rows * C);
    if (ones == null || ones.bytes() < 4L * rows) {
      float[] host = new float[rows];
      java.util.Arrays.fill(host, 1f);
      release(ones);
      ones = fromHost(host);
    }
    blas.matmul(stream, DataType.F32, DataType.F32, ones, 0, x.arena(), x.offset(), sums.arena(), sums.offset(), 1, C,
        rows, true);
  }

  /** Frees a work-space arena being replaced by a larger one, once the stream no longer uses it. */
  private void release(DeviceBuffer b) {
    if (b == null) return;
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

  /** q, k, v of {@code qkv} (B,T,3C) split per head into the first three (B·NH,T,HS) blocks of {@code s}. */
  private void splitQkv(DeviceBuffer s, long qkv, int B, int T, int NH, int HS) {
    int c = NH * HS, n = B * T * c;
    for (int part = 0; part < 3; part++) {
      launch(Attention.class, "splitHeads", n, s.pointer() + 4L * part * n, 0, qkv + 4L * part * c, 0, B, T, NH, HS,
          3 * c);
    }
  }

  /** Seven (B,NH,T,HS) blocks of work space for the attention, allocated at first use. */
  private DeviceBuffer headScratch(int n) {
    if (heads == null || heads.bytes() < 4L * 7 * n) {
      release(heads);
      heads = alloc(7L * n);
    }
    return heads;
  }

  @Override
  public void geluForward(View<DeviceBuffer> out, View<DeviceBuffer> inp, int n) {
    launch(Gelu.class, "geluForward", n, p("out", out, n), 0, p("inp", inp, n), 0, n);
  }

  @Override
  public void geluBackward(View<DeviceBuffer> dinp, View<DeviceBuffer> dout, View<DeviceBuffer> inp, int n) {
    launch(Gelu.class, "geluBackward", n, p("dinp", dinp, n), 0, p("dout", dout, n), 0, p("inp", inp, n), 0, n);
  }

  @Override
  public void residualForward(View<DeviceBuffer> out, View<DeviceBuffer> a, View<DeviceBuffer> b, int n) {
    launch(Residual.class, "residualForward", n, p("out", out, n), 0, p("a", a, n), 0, p("b", b, n), 0, n);
  }

  @Override
  public void addBias(View<DeviceBuffer> out, View<DeviceBuffer> bias, int rows, int C) {
    launch(Matmul.class, "matmulForwardBias", rows, p("out", out, (long) rows * C), 0, p("bias", bias, C), 0, rows, C);
  }

  /** Waits for the stream to bring the B·T losses back and sums them in order, as the CPU does. */
  @Override
  public float crossEntropyForward(View<DeviceBuffer> losses, View<DeviceBuffer> probs, View<DeviceBuffer> logits,
      int[] targets, int B, int T, int V) {
    int bt = B * T;
    DeviceBuffer ids = upload(targets, bt, V, "targets");
    launch(CrossEntropy.class, "crossentropyForward", bt, p("losses", losses, bt), 0, p("probs", probs, (long) bt * V),
        0, p("logits", logits, (long) bt * V), 0, ids, 0, B, T, V);
    float[] l = toHost(losses, bt);
    double total = 0.0;
    for (float x : l) total += x;
    return (float) (total / bt);
  }

  @Override
  public void crossEntropyBackward(View<DeviceBuffer> dlogits, View<DeviceBuffer> probs, int[] targets, int B, int T,
      int V, float dloss) {
    int bt = B * T;
    launch(CrossEntropy.class, "crossentropyBackward", bt, p("dlogits", dlogits, (long) bt * V), 0,
        p("probs", probs, (long) bt * V), 0, uploaded(targets, "targets"), 0, B, T, V, dloss);
  }

  /** Through this rank's device collectives with the plan; nothing to do with one rank. */
  @Override
  public void allReduce(String site, View<DeviceBuffer> x, int rows, int cols) {
    check(site, x, (long) rows * cols);
    if (tp == null) return;
    try {
      tp.allReduce(plan, new DeviceTensor(x.arena().slice(4 * x.offset(), 4L * rows * cols), false), rows, cols);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("all-reduce at " + site + ": " + e.getMessage(), e);
    }
  }

  /** {@link GradNorm#gradNormPartials} on the device; the 4096 partial sums come back and are added in order. */
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
    if (normPartials == null) normPartials = alloc(2L * GradNorm.PARTS);
    launch(GradNorm.class, "gradNormPartials", GradNorm.PARTS, normPartials, 0, p("grads", new View<>(grads, 0), n),
        0, skip, 0, !includeReplicated, n, GradNorm.PARTS);
    double[] partial = new double[GradNorm.PARTS];
    stream.synchronize();
    normPartials.copyToHost(partial, 0, partial.length, 0);
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
    blas.close();
    for (DeviceBuffer b : owned) b.close();
    owned.clear();
    if (staging != null) staging.close();
    if (ownsStream) stream.close();
    if (failure != null) throw failure;
  }

  // ------------------------------------------------------------------ helpers

  private void launch(Class<?> owner, String kernel, long iterations, Object... args) {
    CudaFunction f = kernels.computeIfAbsent(owner.getName() + "#" + kernel,
        k -> ctx.kernel(KernelRequest.of(owner, kernel)));
    int blocks = (int) Math.max(1, Math.min((iterations + BLOCK - 1) / BLOCK, MAX_BLOCKS));
    f.launch(Dim3.of(blocks), Dim3.of(BLOCK), 0, stream, args);
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

  /** Checks {@code n} ids against {@code [0, V)} and copies them to the device copy kept for {@code ids}. */
  private DeviceBuffer upload(int[] ids, int n, int V, String name) {
    if (ids.length < n) throw new IllegalArgumentException(name + " has " + ids.length + " ids, needs " + n);
    for (int i = 0; i < n; i++) {
      if (ids[i] < 0 || ids[i] >= V) {
        throw new IllegalArgumentException(name + "[" + i + "] = " + ids[i] + " is outside the vocabulary [0, " + V
            + ")");
      }
    }
    DeviceBuffer d = hostCopies.get(ids);
    if (d == null) {
      d = alloc(ids.length);
      hostCopies.put(ids, d);
    }
    copyIn(ids, d);
    return d;
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
    stream.synchronize();
    if (staging == null || staging.bytes() < bytes) {
      if (staging != null) staging.close();
      staging = ctx.allocPinned(Math.max(bytes, 1 << 16));
    }
    staging.write(0, array);
    d.copyFromAsync(staging, 0, 0, bytes, stream);
  }
}
