package dev.taco.runtime.model;

import dev.taco.collective.Communicator;

/**
 * One tensor-parallel rank of a GPT-2 style decoder, with explicit forward and backward passes (the llm.c way), written
 * once against the {@link Ops} seam: the same flat list of layer calls runs on the CPU ({@link CpuOps}) or a GPU
 * backend.
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
  private final int b;
  private final int t;
  private final ParameterTensors p;
  private final ActivationTensors a;
  private final A params;
  private final A grads;
  private final A acts;
  /** The TP collective sites of each layer, by name (DESIGN §3.1: each has its own plan). */
  private final String[] attnFwd, mlpFwd, mlpBwd, attnBwd;
  private final int[] inputs;
  private final int[] targets;
  private boolean forwarded;
  private A m, v; // AdamW moments, allocated by the first update
  private byte[] decay;

  /**
   * Builds rank {@code rank} of the model on {@code ops} with weights initialised from {@code seed} as GPT-2 does
   * (normal, std 0.02, residual projections scaled by 1/sqrt(2L)); the full weights do not depend on R, so every TP size
   * starts from the same model.
   *
   * @param rank this rank's place in the TP group of {@code cfg.tp()} ranks
   * @param microBatch sequences per step, B
   * @throws IllegalArgumentException for a non-positive micro-batch or a rank outside the group
   */
  public Gpt(GptConfig cfg, Ops<A> ops, int rank, int microBatch, long seed) {
    if (microBatch <= 0) throw new IllegalArgumentException("--micro-batch-size must be positive, got " + microBatch);
    this.cfg = cfg;
    this.ops = ops;
    this.b = microBatch;
    this.t = cfg.seqLength();
    this.p = new ParameterTensors(cfg, rank);
    this.a = new ActivationTensors(cfg, microBatch);
    this.attnFwd = siteNames(cfg.numLayers(), "attn.fwd");
    this.mlpFwd = siteNames(cfg.numLayers(), "mlp.fwd");
    this.mlpBwd = siteNames(cfg.numLayers(), "mlp.bwd");
    this.attnBwd = siteNames(cfg.numLayers(), "attn.bwd");
    this.params = ops.fromHost(p.slice(ParameterTensors.initFull(cfg, seed)));
    this.grads = ops.alloc(p.size());
    this.acts = ops.alloc(a.size());
    this.inputs = new int[b * t];
    this.targets = new int[b * t];
  }

  /** Rank {@code tp.rank()} on the CPU, every TP all-reduce through its site of {@code tp}. */
  public static Gpt<float[]> cpu(GptConfig cfg, CollectiveSites tp, int microBatch, long seed) {
    if (tp.worldSize() != cfg.tp()) {
      throw new IllegalArgumentException("communicator has " + tp.worldSize() + " ranks but --tp is " + cfg.tp());
    }
    return new Gpt<>(cfg, new CpuOps(tp), tp.rank(), microBatch, seed);
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
    double b = microBatch, t = cfg.seqLength(), c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn();
    double nh = cfg.localHeads(), v = cfg.vocabSize(), l = cfg.numLayers(), bt = b * t;
    double perLayer = 6 * bt * c + 4 * bt + 4 * bt * cr + b * nh * t * t + 2 * bt * ff;
    double rest = 5 * bt * c + 3 * bt * v + 4 * bt * cr + b * nh * t * t + 2 * bt * ff + 3 * bt;
    double full = cfg.parameterCount();
    double perRankParams = full / cfg.tp() + (v + t) * c; // shards plus the replicated embeddings
    return 4.0 * (cfg.tp() * (l * perLayer + rest + 4 * perRankParams) + full);
  }

  public GptConfig config() {
    return cfg;
  }

  /** Every parameter tensor's offset, shape and shard. */
  public ParameterTensors layout() {
    return p;
  }

  /** Bytes this rank has put on the TP wire so far. */
  public long bytesSent() {
    return ops.bytesSent();
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
   * Forward pass over a micro-batch; returns the mean cross-entropy loss (nats per token).
   *
   * @param in token ids (B,T), each in [0, vocab)
   * @param tgt next-token ids (B,T)
   */
  public float forward(int[] in, int[] tgt) {
    load(in, tgt);
    return forwardLoaded();
  }

  /**
   * One training step's forward and backward: zero-grad, {@link #forward}, {@link #backward}, as one
   * {@link Ops#replay} (a GPU backend at TP = 1 replays it as a CUDA graph from the second step on); returns the mean
   * loss. The same numbers as the three calls.
   */
  public float trainStep(int[] in, int[] tgt) {
    load(in, tgt);
    ops.replay(this, () -> {
      zeroGrad();
      forwardLoaded();
      backward();
    });
    return ops.meanLoss(av(a.losses), b * t);
  }

  /** Copies a micro-batch into the model's own token arrays (whose identity the backends may rely on). */
  private void load(int[] in, int[] tgt) {
    if (in.length != b * t || tgt.length != b * t) {
      throw new IllegalArgumentException("expected " + b * t + " tokens and targets (B=" + b + ", T=" + t + "), got "
          + in.length + " and " + tgt.length);
    }
    System.arraycopy(in, 0, inputs, 0, in.length);
    System.arraycopy(tgt, 0, targets, 0, tgt.length);
  }

  private float forwardLoaded() {
    int c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads(), hs = cfg.headSize();
    int v = cfg.vocabSize();
    ops.encoderForward(av(a.encoded), inputs, pv(p.wte), pv(p.wpe), b, t, c, v);
    View<A> x = av(a.encoded);
    for (int l = 0; l < cfg.numLayers(); l++) {
      ops.layerNormForward(av(a.ln1[l]), av(a.ln1Mean[l]), av(a.ln1Rstd[l]), x, pv(p.ln1w[l]), pv(p.ln1b[l]), b, t, c);
      ops.matmulForward(av(a.qkv[l]), av(a.ln1[l]), pv(p.qkvw[l]), pv(p.qkvb[l]), b, t, c, 3 * cr);
      ops.attentionForward(av(a.atty[l]), av(a.att[l]), av(a.qkv[l]), b, t, nh, hs);
      ops.matmulForward(av(a.attproj[l]), av(a.atty[l]), pv(p.attprojw[l]), null, b, t, cr, c);
      ops.allReduce(attnFwd[l], av(a.attproj[l]), b * t, c);
      ops.residualForward(av(a.residual2[l]), x, av(a.attproj[l]), pv(p.attprojb[l]), b * t, c);
      ops.layerNormForward(av(a.ln2[l]), av(a.ln2Mean[l]), av(a.ln2Rstd[l]), av(a.residual2[l]), pv(p.ln2w[l]),
          pv(p.ln2b[l]), b, t, c);
      ops.matmulGeluForward(av(a.fchGelu[l]), av(a.fch[l]), av(a.ln2[l]), pv(p.fcw[l]), pv(p.fcb[l]), b, t, c, ff);
      ops.matmulForward(av(a.fcproj[l]), av(a.fchGelu[l]), pv(p.fcprojw[l]), null, b, t, ff, c);
      ops.allReduce(mlpFwd[l], av(a.fcproj[l]), b * t, c);
      ops.residualForward(av(a.residual3[l]), av(a.residual2[l]), av(a.fcproj[l]), pv(p.fcprojb[l]), b * t, c);
      x = av(a.residual3[l]);
    }
    ops.layerNormForward(av(a.lnf), av(a.lnfMean), av(a.lnfRstd), x, pv(p.lnfw), pv(p.lnfb), b, t, c);
    ops.headForward(av(a.logits), av(a.lnf), pv(p.wte), b * t, c, v); // tied LM head: logits = lnf · wte^T
    forwarded = true;
    return ops.crossEntropyForward(av(a.losses), av(a.probs), av(a.logits), targets, b, t, v);
  }

  /** Zeroes the parameter gradients. */
  public void zeroGrad() {
    ops.zero(gv(0), p.size());
  }

  /** Backward pass of the last {@link #forward}, accumulating into {@link #grads()}. */
  public void backward() {
    if (!forwarded) throw new IllegalStateException("backward() before forward()");
    int c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads(), hs = cfg.headSize();
    int v = cfg.vocabSize(), layers = cfg.numLayers(), bt = b * t;
    ops.zero(av(a.dlogits), (long) bt * v);
    ops.crossEntropyBackward(av(a.dlogits), av(a.probs), targets, b, t, v, 1f);
    ops.headBackward(av(a.dlnf), gv(p.wte), av(a.dlogits), av(a.lnf), pv(p.wte), bt, c, v);
    ops.zero(av(a.dres), (long) bt * c);
    View<A> xLast = av(layers > 0 ? a.residual3[layers - 1] : a.encoded);
    ops.layerNormBackward(av(a.dres), gv(p.lnfw), gv(p.lnfb), av(a.dlnf), xLast, pv(p.lnfw), av(a.lnfMean),
        av(a.lnfRstd), b, t, c);
    for (int l = layers - 1; l >= 0; l--) {
      View<A> x = av(l > 0 ? a.residual3[l - 1] : a.encoded);
      // MLP: residual3 = residual2 + fc2(gelu(fc1(ln2(residual2)))); dres is d residual3 and flows on unchanged.
      ops.matmulBackwardGelu(av(a.dfch), av(a.dfchGelu), gv(p.fcprojw[l]), gv(p.fcprojb[l]), av(a.dres),
          av(a.fchGelu[l]), pv(p.fcprojw[l]), av(a.fch[l]), b, t, ff, c);
      ops.matmulBackward(av(a.dln), gv(p.fcw[l]), gv(p.fcb[l]), av(a.dfch), av(a.ln2[l]), pv(p.fcw[l]), b, t, c, ff);
      ops.allReduce(mlpBwd[l], av(a.dln), bt, c);
      ops.layerNormBackward(av(a.dres), gv(p.ln2w[l]), gv(p.ln2b[l]), av(a.dln), av(a.residual2[l]), pv(p.ln2w[l]),
          av(a.ln2Mean[l]), av(a.ln2Rstd[l]), b, t, c);
      // attention: residual2 = x + proj(attn(qkv(ln1(x)))); dres is now d residual2.
      ops.matmulBackward(av(a.datty), gv(p.attprojw[l]), gv(p.attprojb[l]), av(a.dres), av(a.atty[l]),
          pv(p.attprojw[l]), b, t, cr, c);
      ops.attentionBackward(av(a.dqkv), av(a.dattScratch), av(a.datty), av(a.qkv[l]), av(a.att[l]), b, t, nh, hs);
      ops.matmulBackward(av(a.dln), gv(p.qkvw[l]), gv(p.qkvb[l]), av(a.dqkv), av(a.ln1[l]), pv(p.qkvw[l]), b, t, c,
          3 * cr);
      ops.allReduce(attnBwd[l], av(a.dln), bt, c);
      ops.layerNormBackward(av(a.dres), gv(p.ln1w[l]), gv(p.ln1b[l]), av(a.dln), x, pv(p.ln1w[l]), av(a.ln1Mean[l]),
          av(a.ln1Rstd[l]), b, t, c);
    }
    ops.encoderBackward(gv(p.wte), gv(p.wpe), av(a.dres), inputs, b, t, c, v);
  }

  /**
   * One AdamW step of this rank's parameters from its gradients (llm.c's {@code gpt2_update}; {@code train.AdamW}),
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

  /** {@code layer0.<kind>, layer1.<kind>, ...}, e.g. {@code layer3.mlp.fwd}. */
  private static String[] siteNames(int layers, String kind) {
    String[] names = new String[layers];
    for (int l = 0; l < layers; l++) names[l] = "layer" + l + "." + kind;
    return names;
  }

  /**
   * Sum of squared gradients this rank owns: its shards, plus the replicated tensors only when
   * {@code includeReplicated} (so that a sum over ranks counts each replicated gradient once).
   */
  public double gradSquaredNorm(boolean includeReplicated) {
    return ops.squaredNorm(grads, p, includeReplicated);
  }
}
