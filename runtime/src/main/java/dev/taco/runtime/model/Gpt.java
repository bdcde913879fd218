package dev.taco.runtime.model;

import dev.taco.collective.CollectiveSites;
import dev.taco.collective.Communicator;
import dev.taco.collective.Site;
import dev.taco.collective.Site.Block;
import dev.taco.collective.Site.Direction;
import dev.taco.kernels.cuda.DeviceBuffer;

/**
 * One tensor-parallel rank of a GPT-2 style decoder, with explicit forward and backward passes (the llm.c way), written
 * once against two seams: its layer operations ({@link Ops}) and its TP collectives ({@link TensorParallel}), so the
 * same flat list of calls runs on the CPU ({@link CpuOps}, {@link CpuTensorParallel}) or a GPU ({@link CudaOps},
 * {@link CudaTensorParallel}).
 *
 * <p>Megatron-LM's split (Shoeybi et al. 2019, §3): per block, the QKV projection and fc1 are column-parallel (this rank
 * holds the columns of its {@code NH/R} heads and {@code 4C/R} MLP channels), the attention output projection and fc2
 * are row-parallel, so each block ends its attention and its MLP with a partial sum that the TP collective all-reduces
 * (the "g" operator: all-reduce forward, identity backward). The gradient of each column-parallel input is all-reduced
 * in the backward pass (the "f" operator: identity forward, all-reduce backward). That is four TP all-reduces per block
 * and step, each at its own named collective site. Embeddings, LayerNorms, the row-parallel biases and the tied LM head
 * are replicated: every rank computes identical values and gradients for them, since the all-reduces give every rank
 * the same bits.
 *
 * <p>Parameters and their gradients live in one arena each ({@link ParameterTensors} gives every tensor's offset and
 * shard), activations and the backward's scratch in one more ({@link ActivationTensors}), sized once for the
 * micro-batch B and sequence length T.
 *
 * @param <A> the backend's arena type
 */
public final class Gpt<A> {
  private final GptConfig cfg;
  private final Ops<A> ops;
  private final TensorParallel<A> tp;
  private final int b;
  private final int t;
  private final ParameterTensors p;
  private final ActivationTensors a;
  private final A params;
  private final A grads;
  private final A acts;
  /** The TP collective sites of each layer (docs/design.md §3.1: each has its own plan). */
  private final Site[] attnFwd, mlpFwd, mlpBwd, attnBwd;
  /** With sequence parallelism, the all-gather sites before the column-parallel linears (forward and backward). */
  private final Site[] attnGatherFwd, mlpGatherFwd, mlpGatherBwd, attnGatherBwd;
  private final int[] inputs;
  private final int[] targets;
  /** Token rows of this rank's LayerNorm/residual regions: B·T, or B·T/R with sequence parallelism. */
  private final int rows;
  /** Where this rank's token rows start, in elements of a (B,T,C) tensor (0 without sequence parallelism). */
  private final long rowStart;
  /** The targets of this rank's token rows (sequence parallelism), else {@link #targets} itself. */
  private final int[] rowTargets;
  /** {offset, length} ranges of the replicated gradients sequence parallelism leaves partial, merged. */
  private final int[][] partialGrads;
  private boolean forwarded;
  /** The factor on the loss whose gradient {@link #backward} adds (gradient accumulation), 1 outside trainStep. */
  private float lossScale = 1f;
  /** The replay key of the micro-batches that accumulate (do not zero the gradients first). */
  private final Object accumulating = new Object();
  private A m, v; // AdamW moments, allocated by the first update
  private byte[] decay;

  /**
   * Builds rank {@code rank} of the model on {@code ops} and {@code tp} with weights initialised from {@code seed} as GPT-2 does
   * (normal, std 0.02, residual projections scaled by 1/sqrt(2L)); the full weights do not depend on R, so every TP size
   * starts from the same model.
   *
   * @param rank this rank's place in the TP group of {@code cfg.tp()} ranks
   * @param microBatch sequences per step, B
   * @throws IllegalArgumentException for a non-positive micro-batch or a rank outside the group
   */
  public Gpt(GptConfig cfg, Ops<A> ops, TensorParallel<A> tp, int rank, int microBatch, long seed) {
    if (microBatch <= 0) throw new IllegalArgumentException("--micro-batch-size must be positive, got " + microBatch);
    this.cfg = cfg;
    this.ops = ops;
    this.tp = java.util.Objects.requireNonNull(tp, "tp");
    this.b = microBatch;
    this.t = cfg.seqLength();
    this.p = new ParameterTensors(cfg, rank);
    this.a = new ActivationTensors(cfg, microBatch,
        ops.attentionStateSize(microBatch, cfg.localHeads(), cfg.seqLength(), cfg.headSize()));
    this.attnFwd = sites(cfg.numLayers(), Block.ATTENTION, false, Direction.FORWARD);
    this.mlpFwd = sites(cfg.numLayers(), Block.MLP, false, Direction.FORWARD);
    this.mlpBwd = sites(cfg.numLayers(), Block.MLP, false, Direction.BACKWARD);
    this.attnBwd = sites(cfg.numLayers(), Block.ATTENTION, false, Direction.BACKWARD);
    this.attnGatherFwd = sites(cfg.numLayers(), Block.ATTENTION, true, Direction.FORWARD);
    this.mlpGatherFwd = sites(cfg.numLayers(), Block.MLP, true, Direction.FORWARD);
    this.mlpGatherBwd = sites(cfg.numLayers(), Block.MLP, true, Direction.BACKWARD);
    this.attnGatherBwd = sites(cfg.numLayers(), Block.ATTENTION, true, Direction.BACKWARD);
    this.params = ops.fromHost(p.slice(ParameterTensors.initFull(cfg, seed)));
    this.grads = ops.alloc(p.size());
    this.acts = ops.alloc(a.size());
    this.inputs = new int[b * t];
    this.targets = new int[b * t];
    boolean sp = cfg.sequenceSharded();
    this.rows = sp ? b * t / cfg.tp() : b * t;
    this.rowStart = sp ? (long) rank * rows * cfg.hiddenSize() : 0;
    this.rowTargets = sp ? new int[rows] : targets;
    this.partialGrads = sp ? partialReplicatedRanges(p) : new int[0][];
  }

  /**
   * The replicated tensors whose gradients a rank computes from its own token rows under sequence parallelism
   * (embeddings, LayerNorms: every replicated tensor but the row-parallel biases, whose gradients come from the
   * all-gathered output gradient), as merged {offset, length} ranges of the arena.
   */
  private static int[][] partialReplicatedRanges(ParameterTensors p) {
    java.util.List<int[]> out = new java.util.ArrayList<>();
    for (ParameterTensors.Tensor x : p.tensors()) {
      if (x.split() != ParameterTensors.Split.REPLICATED || x.name().endsWith("c_proj.bias")) continue;
      int n = x.size(1);
      int[] lastRange = out.isEmpty() ? null : out.get(out.size() - 1);
      if (lastRange != null && lastRange[0] + lastRange[1] == x.offset()) lastRange[1] += n;
      else out.add(new int[] {x.offset(), n});
    }
    return out.toArray(int[][]::new);
  }

  /** Rank {@code tp.rank()} on the CPU, every TP collective through its site of {@code tp}. */
  public static Gpt<float[]> cpu(GptConfig cfg, CollectiveSites tp, int microBatch, long seed) {
    if (tp.worldSize() != cfg.tp()) {
      throw new IllegalArgumentException("communicator has " + tp.worldSize() + " ranks but --tp is " + cfg.tp());
    }
    return new Gpt<>(cfg, new CpuOps(), new CpuTensorParallel(tp), tp.rank(), microBatch, seed);
  }

  /** One GPU rank alone (TP = 1) on {@code ops}. */
  public static Gpt<DeviceBuffer> gpu(GptConfig cfg, CudaOps ops, int microBatch, long seed) {
    return new Gpt<>(cfg, ops, CudaTensorParallel.alone(ops), 0, microBatch, seed);
  }

  /** Rank {@code tp.rank()} on the CPU with exact TP all-reduces over {@code tp}. */
  public static Gpt<float[]> cpu(GptConfig cfg, Communicator tp, int microBatch, long seed) {
    return cpu(cfg, CollectiveSites.fixed(tp), microBatch, seed);
  }

  /**
   * Bytes that R ranks of this model need for a micro-batch of B sequences: parameters, gradients and the two AdamW
   * moments, the activations kept for backward, and the gradient scratch; computed in double precision so that absurd
   * sizes give a large number instead of an overflowed one.
   */
  public static double estimateBytes(GptConfig cfg, int microBatch) {
    return estimateBytes(cfg, microBatch, (double) microBatch * cfg.localHeads() * cfg.seqLength() * cfg.seqLength());
  }

  /**
   * {@link #estimateBytes(GptConfig, int)} for a backend whose attention keeps {@code attentionState} elements per layer
   * ({@link Ops#attentionStateSize}).
   */
  public static double estimateBytes(GptConfig cfg, int microBatch, double attentionState) {
    double b = microBatch, t = cfg.seqLength(), c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn();
    double v = cfg.vocabSize(), l = cfg.numLayers(), bt = b * t;
    double perLayer = 6 * bt * c + 4 * bt + 4 * bt * cr + attentionState + 2 * bt * ff;
    double rest = 5 * bt * c + 3 * bt * v + 4 * bt * cr + attentionState + 2 * bt * ff + 3 * bt;
    double full = cfg.parameterCount();
    double perRankParams = full / cfg.tp() + (v + t) * c; // shards plus the replicated embeddings
    return 4.0 * (cfg.tp() * (l * perLayer + rest + 4 * perRankParams) + full);
  }

  /** The model's shape and parallel layout. */
  public GptConfig config() {
    return cfg;
  }

  /** Every parameter tensor's offset, shape and shard. */
  public ParameterTensors layout() {
    return p;
  }

  /** Bytes this rank has put on the TP wire so far. */
  public long bytesSent() {
    return tp.bytesSent();
  }

  /** This rank's parameters (see {@link ParameterTensors}). */
  public A params() {
    return params;
  }

  /** This rank's parameter gradients, aligned with {@link #params()}. */
  public A grads() {
    return grads;
  }

  private View<A> pv(int offset) {
    return new View<>(params, offset);
  }

  private View<A> gv(int offset) {
    return new View<>(grads, offset);
  }

  private View<A> av(long offset) {
    return new View<>(acts, offset);
  }

  /**
   * Forward pass over a micro-batch; returns the mean cross-entropy loss (nats per token) over this rank's token rows:
   * all B·T, or with sequence parallelism its B·T/R (the mean over the ranks is the micro-batch's).
   *
   * @param in token ids (B,T), each in [0, vocab)
   * @param tgt next-token ids (B,T), each in [0, vocab)
   * @throws IllegalArgumentException for arrays not of B·T ids, or an id outside [0, vocab)
   */
  public float forward(int[] in, int[] tgt) {
    load(in, tgt);
    return forwardLoaded();
  }

  /**
   * One training step's forward and backward: zero-grad, {@link #forward}, {@link #backward}, as one
   * {@link Ops#replay} (a GPU backend at TP = 1 replays it as a CUDA graph from the second step on); returns the mean
   * loss. The same numbers as the three calls.
   *
   * @param in token ids (B,T), each in [0, vocab)
   * @param tgt next-token ids (B,T), each in [0, vocab)
   * @throws IllegalArgumentException for arrays not of B·T ids, or an id outside [0, vocab)
   */
  public float trainStep(int[] in, int[] tgt) {
    return trainStep(in, tgt, 1f, true);
  }

  /**
   * One micro-batch of a step with gradient accumulation: (zero-grad when {@code zeroGrad}), forward, and a backward
   * that adds the gradient of {@code lossScale} × the mean loss to {@link #grads()} (1/A for A micro-batches per
   * step), as one {@link Ops#replay} (the first and the later micro-batches are two graphs; a run keeps its scale).
   * Returns the mean loss over this rank's tokens.
   *
   * @param in token ids (B,T), each in [0, vocab)
   * @param tgt next-token ids (B,T), each in [0, vocab)
   * @param lossScale the factor on this micro-batch's loss gradient (1/A for A micro-batches)
   * @param zeroGrad whether to zero the gradients first (the step's first micro-batch)
   * @throws IllegalArgumentException for arrays not of B·T ids, or an id outside [0, vocab)
   */
  public float trainStep(int[] in, int[] tgt, float lossScale, boolean zeroGrad) {
    load(in, tgt);
    this.lossScale = lossScale;
    try {
      ops.replay(zeroGrad ? this : accumulating, () -> {
        if (zeroGrad) zeroGrad();
        forwardLoaded();
        backward();
      });
    } finally {
      this.lossScale = 1f;
    }
    return ops.meanLoss(av(a.losses), rows);
  }

  /** Copies a micro-batch into the model's own token arrays (whose identity the backends may rely on). */
  private void load(int[] in, int[] tgt) {
    if (in.length != b * t || tgt.length != b * t) {
      throw new IllegalArgumentException("expected " + b * t + " tokens and targets (B=" + b + ", T=" + t + "), got "
          + in.length + " and " + tgt.length);
    }
    System.arraycopy(in, 0, inputs, 0, in.length);
    System.arraycopy(tgt, 0, targets, 0, tgt.length);
    if (rowTargets != targets) System.arraycopy(tgt, (int) (rowStart / cfg.hiddenSize()), rowTargets, 0, rows);
  }

  /**
   * The LayerNorm in front of a column-parallel linear, into {@code out} (B,T,C): over this rank's token rows
   * {@code x}; with sequence parallelism into {@code lnShard}, then all-gathered at {@code site}.
   */
  private void normAll(View<A> out, View<A> mean, View<A> rstd, View<A> x, View<A> w, View<A> bias, Site site) {
    int c = cfg.hiddenSize();
    if (!cfg.sequenceSharded()) {
      ops.layerNormForward(out, mean, rstd, x, w, bias, b, t, c);
      return;
    }
    ops.layerNormForward(av(a.lnShard), mean, rstd, x, w, bias, 1, rows, c);
    tp.allGather(site, out, av(a.lnShard), rows, c);
  }

  /**
   * The partial sums {@code partial} (B,T,C) of a row-parallel linear (or of a column-parallel one's input gradient)
   * summed over the ranks at {@code site}, for this rank's token rows: all-reduced in place, or with sequence
   * parallelism reduce-scattered into {@code shardScratch}.
   */
  private View<A> reduceRows(Site site, View<A> partial) {
    int c = cfg.hiddenSize();
    if (!cfg.sequenceSharded()) {
      tp.allReduce(site, partial, b * t, c);
      return partial;
    }
    tp.reduceScatter(site, av(a.shardScratch), partial, b * t, c);
    return av(a.shardScratch);
  }

  /** This rank's token-row gradient {@code d} as the whole (B,T,C) gradient: itself, or all-gathered at site. */
  private View<A> gatherRows(Site site, View<A> d) {
    if (!cfg.sequenceSharded()) return d;
    tp.allGather(site, av(a.dfull), d, rows, cfg.hiddenSize());
    return av(a.dfull);
  }

  private float forwardLoaded() {
    int c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads(), hs = cfg.headSize();
    int v = cfg.vocabSize(), nb = cfg.sequenceSharded() ? 1 : b, nt = rows / nb; // this rank's token rows: (nb, nt)
    ops.encoderForward(av(a.encoded), inputs, pv(p.wte), pv(p.wpe), b, t, c, v);
    View<A> x = av(a.encoded + rowStart);
    for (int l = 0; l < cfg.numLayers(); l++) {
      normAll(av(a.ln1[l]), av(a.ln1Mean[l]), av(a.ln1Rstd[l]), x, pv(p.ln1w[l]), pv(p.ln1b[l]), attnGatherFwd[l]);
      ops.matmulAttentionForward(av(a.atty[l]), av(a.att[l]), av(a.qkv[l]), av(a.ln1[l]), pv(p.qkvw[l]),
          pv(p.qkvb[l]), b, t, c, nh, hs);
      ops.matmulForward(av(a.attproj[l]), av(a.atty[l]), pv(p.attprojw[l]), null, b, t, cr, c);
      View<A> y = reduceRows(attnFwd[l], av(a.attproj[l]));
      ops.residualForward(av(a.residual2[l]), x, y, pv(p.attprojb[l]), rows, c);
      normAll(av(a.ln2[l]), av(a.ln2Mean[l]), av(a.ln2Rstd[l]), av(a.residual2[l]), pv(p.ln2w[l]), pv(p.ln2b[l]),
          mlpGatherFwd[l]);
      ops.matmulGeluForward(av(a.fchGelu[l]), av(a.fch[l]), av(a.ln2[l]), pv(p.fcw[l]), pv(p.fcb[l]), b, t, c, ff);
      ops.matmulForward(av(a.fcproj[l]), av(a.fchGelu[l]), pv(p.fcprojw[l]), null, b, t, ff, c);
      y = reduceRows(mlpFwd[l], av(a.fcproj[l]));
      ops.residualForward(av(a.residual3[l]), av(a.residual2[l]), y, pv(p.fcprojb[l]), rows, c);
      x = av(a.residual3[l]);
    }
    ops.layerNormForward(av(a.lnf), av(a.lnfMean), av(a.lnfRstd), x, pv(p.lnfw), pv(p.lnfb), nb, nt, c);
    ops.headForward(av(a.logits), av(a.lnf), pv(p.wte), rows, c, v); // tied LM head: logits = lnf · wte^T
    forwarded = true;
    return ops.crossEntropyForward(av(a.losses), av(a.probs), av(a.logits), rowTargets, nb, nt, v);
  }

  /** Zeroes the parameter gradients. */
  public void zeroGrad() {
    ops.zero(gv(0), p.size());
  }

  /**
   * Backward pass of the last {@link #forward}, accumulating into {@link #grads()}. With sequence parallelism the
   * replicated gradients each rank computed from its own token rows are summed over the ranks (exactly) at the end.
   */
  public void backward() {
    if (!forwarded) throw new IllegalStateException("backward() before forward()");
    int c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads(), hs = cfg.headSize();
    int v = cfg.vocabSize(), layers = cfg.numLayers(), bt = b * t;
    boolean sp = cfg.sequenceSharded();
    int nb = sp ? 1 : b, nt = rows / nb;
    ops.zero(av(a.dlogits), (long) rows * v);
    // the mean over all B·T tokens: with sequence parallelism each rank's rows are 1/R of them
    ops.crossEntropyBackward(av(a.dlogits), av(a.probs), rowTargets, nb, nt, v, (sp ? 1f / cfg.tp() : 1f) * lossScale);
    ops.headBackward(av(a.dlnf), gv(p.wte), av(a.dlogits), av(a.lnf), pv(p.wte), rows, c, v);
    ops.zero(av(a.dres), (long) bt * c); // whole: rows outside this rank's stay 0 for the embedding's backward
    View<A> dres = av(a.dres + rowStart);
    View<A> xLast = layers > 0 ? av(a.residual3[layers - 1]) : av(a.encoded + rowStart);
    ops.layerNormBackward(dres, gv(p.lnfw), gv(p.lnfb), av(a.dlnf), xLast, pv(p.lnfw), av(a.lnfMean),
        av(a.lnfRstd), nb, nt, c);
    for (int l = layers - 1; l >= 0; l--) {
      View<A> x = l > 0 ? av(a.residual3[l - 1]) : av(a.encoded + rowStart);
      // MLP: residual3 = residual2 + fc2(gelu(fc1(ln2(residual2)))); dres is d residual3 and flows on unchanged.
      View<A> dy = gatherRows(mlpGatherBwd[l], dres);
      ops.matmulBackwardGelu(av(a.dfch), av(a.dfchGelu), gv(p.fcprojw[l]), gv(p.fcprojb[l]), dy, av(a.fchGelu[l]),
          pv(p.fcprojw[l]), av(a.fch[l]), b, t, ff, c);
      ops.matmulBackward(av(a.dln), gv(p.fcw[l]), gv(p.fcb[l]), av(a.dfch), av(a.ln2[l]), pv(p.fcw[l]), b, t, c, ff);
      View<A> dx = reduceRows(mlpBwd[l], av(a.dln));
      ops.layerNormBackward(dres, gv(p.ln2w[l]), gv(p.ln2b[l]), dx, av(a.residual2[l]), pv(p.ln2w[l]),
          av(a.ln2Mean[l]), av(a.ln2Rstd[l]), nb, nt, c);
      // attention: residual2 = x + proj(attn(qkv(ln1(x)))); dres is now d residual2.
      dy = gatherRows(attnGatherBwd[l], dres);
      ops.matmulBackward(av(a.datty), gv(p.attprojw[l]), gv(p.attprojb[l]), dy, av(a.atty[l]), pv(p.attprojw[l]), b,
          t, cr, c);
      ops.attentionBackward(av(a.dqkv), av(a.dattScratch), av(a.datty), av(a.qkv[l]), av(a.atty[l]), av(a.att[l]), b,
          t, nh, hs);
      ops.matmulBackward(av(a.dln), gv(p.qkvw[l]), gv(p.qkvb[l]), av(a.dqkv), av(a.ln1[l]), pv(p.qkvw[l]), b, t, c,
          3 * cr);
      dx = reduceRows(attnBwd[l], av(a.dln));
      ops.layerNormBackward(dres, gv(p.ln1w[l]), gv(p.ln1b[l]), dx, x, pv(p.ln1w[l]), av(a.ln1Mean[l]),
          av(a.ln1Rstd[l]), nb, nt, c);
    }
    ops.encoderBackward(gv(p.wte), gv(p.wpe), av(a.dres), inputs, b, t, c, v);
    for (int[] r : partialGrads) tp.allReduceExact(gv(r[0]), r[1]);
  }

  /**
   * One AdamW step of this rank's parameters from its gradients (llm.c's {@code gpt2_update}; {@code layers.AdamW}),
   * with weight decay on the matrices only ({@link ParameterTensors#decayMask}); the moments live in this backend's
   * memory and start at zero.
   *
   * @param gradScale factor applied to every gradient first (global-norm clipping)
   * @param step 1-based step count, for the bias corrections
   * @throws IllegalArgumentException if {@code step < 1}
   */
  public void update(float lr, float beta1, float beta2, float eps, float weightDecay, float gradScale, int step) {
    if (m == null) {
      m = ops.alloc(p.size());
      v = ops.alloc(p.size());
      decay = p.decayMask();
    }
    ops.adamw(params, grads, m, v, decay, p.size(), lr, beta1, beta2, eps, weightDecay, gradScale, step);
  }

  /**
   * This rank's parameters and AdamW moments as host arrays in arena order ({@link #layout()}): {@code {params, m,
   * v}}; the moments are zeros before the first {@link #update}.
   */
  public float[][] stateToHost() {
    int n = p.size();
    float[] params = ops.toHost(pv(0), n);
    if (m == null) return new float[][] {params, new float[n], new float[n]};
    return new float[][] {params, ops.toHost(new View<>(m, 0), n), ops.toHost(new View<>(v, 0), n)};
  }

  /**
   * Replaces this rank's parameters and AdamW moments (arena order, {@link #layout()}), as a resumed run does.
   *
   * @throws IllegalArgumentException if an array's length is not this rank's parameter count
   */
  public void restore(float[] params, float[] m, float[] v) {
    int n = p.size();
    if (params.length != n || m.length != n || v.length != n) {
      throw new IllegalArgumentException("expected " + n + " parameters and moments for rank " + p.rank() + ", got "
          + params.length + ", " + m.length + " and " + v.length);
    }
    if (this.m == null) {
      this.m = ops.alloc(n);
      this.v = ops.alloc(n);
      decay = p.decayMask();
    }
    ops.copyToDevice(params, this.params);
    ops.copyToDevice(m, this.m);
    ops.copyToDevice(v, this.v);
  }

  /** The site of {@code block}'s collective in each layer, e.g. {@code layer3.mlp.fwd}. */
  private static Site[] sites(int layers, Block block, boolean gather, Direction direction) {
    Site[] s = new Site[layers];
    for (int l = 0; l < layers; l++) s[l] = new Site.Layer(l, block, gather, direction);
    return s;
  }

  /**
   * Sum of squared gradients this rank owns: its shards, plus the replicated tensors only when
   * {@code includeReplicated} (so that a sum over ranks counts each replicated gradient once).
   */
  public double gradSquaredNorm(boolean includeReplicated) {
    return ops.squaredNorm(grads, p, includeReplicated);
  }
}
