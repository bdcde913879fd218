package dev.taco.runtime.model;

import dev.taco.collective.Communicator;
import dev.taco.kernels.Gemm;
import dev.taco.runtime.layers.Attention;
import dev.taco.runtime.layers.CrossEntropy;
import dev.taco.runtime.layers.Encoder;
import dev.taco.runtime.layers.Gelu;
import dev.taco.runtime.layers.GradNorm;
import dev.taco.runtime.layers.LayerNorm;
import dev.taco.runtime.layers.Matmul;
import dev.taco.runtime.layers.Residual;
import java.util.Arrays;
import java.util.Random;

/**
 * One tensor-parallel rank of a GPT-2 style decoder, with explicit forward and backward passes (the llm.c way).
 *
 * <p>Megatron-LM's split (Shoeybi et al. 2019, §3): per block, the QKV projection and fc1 are column-parallel (this
 * rank holds the columns of its {@code NH/R} heads and {@code 4C/R} MLP channels), the attention output projection and
 * fc2 are row-parallel, so each block ends its attention and its MLP with a partial sum that the
 * {@link Communicator} all-reduces (the "g" operator: all-reduce forward, identity backward). The gradient of each
 * column-parallel input is all-reduced in the backward pass (the "f" operator: identity forward, all-reduce
 * backward). That is four TP all-reduces per block and step, all through the one communicator, which may compress.
 * Embeddings, LayerNorms, the row-parallel biases and the tied LM head are replicated: every rank computes identical
 * values and gradients for them, since the all-reduces give every rank the same bits.
 *
 * <p>Parameters live in one flat float32 array per rank (shapes in {@link Layout}); activations are (B,T,·) arrays
 * sized once for the micro-batch B and sequence length T.
 */
public final class Gpt {
  private final GptConfig cfg;
  private final CollectiveSites tp;
  /** The TP collective sites of each layer, by name (DESIGN §3.1: each has its own plan). */
  private final String[] attnFwd, mlpFwd, mlpBwd, attnBwd;
  private final int b;
  private final int t;
  private final Layout layout;
  private final float[] params;
  private final float[] grads;

  // activations, (B,T,...) per layer where indexed by layer
  private final int[] inputs;
  private final int[] targets;
  private final float[] encoded;
  private final float[][] ln1, ln1Mean, ln1Rstd, qkv, atty, att, attproj, residual2, ln2, ln2Mean, ln2Rstd, fch,
      fchGelu, fcproj, residual3;
  private final float[] lnf, lnfMean, lnfRstd, logits, probs, losses;
  // gradient scratch
  private final float[] dres, dln, dqkv, datty, dattScratch, dfch, dfchGelu, dlogits, dlnf;
  private boolean forwarded;

  /**
   * Builds rank {@code tp.rank()} of the model with weights initialised from {@code seed} as GPT-2 does (normal,
   * std 0.02, residual projections scaled by 1/sqrt(2L)); the full weights do not depend on R, so every TP size
   * starts from the same model.
   *
   * @param microBatch sequences per step, B
   * @throws IllegalArgumentException if {@code cfg.tp()} differs from the communicator's world size
   */
  public Gpt(GptConfig cfg, Communicator tp, int microBatch, long seed) {
    this(cfg, CollectiveSites.fixed(tp), microBatch, seed);
  }

  /**
   * As {@link #Gpt(GptConfig, Communicator, int, long)}, with every TP all-reduce through its site of {@code tp}
   * (per-site codec plans, DESIGN §3.1).
   */
  public Gpt(GptConfig cfg, CollectiveSites tp, int microBatch, long seed) {
    if (tp.worldSize() != cfg.tp()) {
      throw new IllegalArgumentException("communicator has " + tp.worldSize() + " ranks but --tp is " + cfg.tp());
    }
    if (microBatch <= 0) throw new IllegalArgumentException("--micro-batch-size must be positive, got " + microBatch);
    this.cfg = cfg;
    this.tp = tp;
    this.b = microBatch;
    this.t = cfg.seqLength();
    this.layout = new Layout(cfg, tp.rank());
    this.attnFwd = siteNames(cfg.numLayers(), "attn.fwd");
    this.mlpFwd = siteNames(cfg.numLayers(), "mlp.fwd");
    this.mlpBwd = siteNames(cfg.numLayers(), "mlp.bwd");
    this.attnBwd = siteNames(cfg.numLayers(), "attn.bwd");
    float[] full = Layout.initFull(cfg.withTp(1), seed);
    this.params = layout.slice(full);
    this.grads = new float[params.length];

    int bt = b * t, c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads();
    int layers = cfg.numLayers(), v = cfg.vocabSize();
    inputs = new int[bt];
    targets = new int[bt];
    encoded = new float[bt * c];
    ln1 = alloc(layers, bt * c);
    ln1Mean = alloc(layers, bt);
    ln1Rstd = alloc(layers, bt);
    qkv = alloc(layers, bt * 3 * cr);
    atty = alloc(layers, bt * cr);
    att = alloc(layers, b * nh * t * t);
    attproj = alloc(layers, bt * c);
    residual2 = alloc(layers, bt * c);
    ln2 = alloc(layers, bt * c);
    ln2Mean = alloc(layers, bt);
    ln2Rstd = alloc(layers, bt);
    fch = alloc(layers, bt * ff);
    fchGelu = alloc(layers, bt * ff);
    fcproj = alloc(layers, bt * c);
    residual3 = alloc(layers, bt * c);
    lnf = new float[bt * c];
    lnfMean = new float[bt];
    lnfRstd = new float[bt];
    logits = new float[bt * v];
    probs = new float[bt * v];
    losses = new float[bt];
    dres = new float[bt * c];
    dln = new float[bt * c];
    dqkv = new float[bt * 3 * cr];
    datty = new float[bt * cr];
    dattScratch = new float[b * nh * t * t];
    dfch = new float[bt * ff];
    dfchGelu = new float[bt * ff];
    dlogits = new float[bt * v];
    dlnf = new float[bt * c];
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

  private static float[][] alloc(int layers, int n) {
    float[][] a = new float[layers][];
    for (int l = 0; l < layers; l++) a[l] = new float[n];
    return a;
  }

  public GptConfig config() {
    return cfg;
  }

  public Layout layout() {
    return layout;
  }

  /** This rank's parameters, flat (see {@link Layout}). */
  public float[] params() {
    return params;
  }

  /** This rank's parameter gradients, flat, aligned with {@link #params()}. */
  public float[] grads() {
    return grads;
  }

  /**
   * Forward pass over a micro-batch; returns the mean cross-entropy loss (nats per token).
   *
   * @param in token ids (B,T), each in [0, vocab)
   * @param tgt next-token ids (B,T)
   */
  public float forward(int[] in, int[] tgt) {
    if (in.length != b * t || tgt.length != b * t) {
      throw new IllegalArgumentException("expected " + b * t + " tokens (B=" + b + ", T=" + t + "), got " + in.length);
    }
    System.arraycopy(in, 0, inputs, 0, in.length);
    System.arraycopy(tgt, 0, targets, 0, tgt.length);
    int c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads(), hs = cfg.headSize();
    int v = cfg.vocabSize(), n = b * t * c;
    Layout p = layout;
    Encoder.forward(encoded, 0, inputs, 0, params, p.wte, params, p.wpe, b, t, c, v);
    float[] x = encoded;
    for (int l = 0; l < cfg.numLayers(); l++) {
      LayerNorm.forward(ln1[l], 0, ln1Mean[l], 0, ln1Rstd[l], 0, x, 0, params, p.ln1w[l], params, p.ln1b[l], b, t, c);
      Matmul.forward(qkv[l], 0, ln1[l], 0, params, p.qkvw[l], params, p.qkvb[l], b, t, c, 3 * cr);
      Attention.forward(atty[l], 0, att[l], 0, qkv[l], 0, b, t, nh, hs);
      Matmul.forward(attproj[l], 0, atty[l], 0, params, p.attprojw[l], null, 0, b, t, cr, c);
      allReduce(attnFwd[l], attproj[l]);
      Matmul.addBias(attproj[l], 0, params, p.attprojb[l], b * t, c);
      Residual.forward(residual2[l], 0, x, 0, attproj[l], 0, n);
      LayerNorm.forward(ln2[l], 0, ln2Mean[l], 0, ln2Rstd[l], 0, residual2[l], 0, params, p.ln2w[l], params, p.ln2b[l], b, t, c);
      Matmul.forward(fch[l], 0, ln2[l], 0, params, p.fcw[l], params, p.fcb[l], b, t, c, ff);
      Gelu.forward(fchGelu[l], 0, fch[l], 0, b * t * ff);
      Matmul.forward(fcproj[l], 0, fchGelu[l], 0, params, p.fcprojw[l], null, 0, b, t, ff, c);
      allReduce(mlpFwd[l], fcproj[l]);
      Matmul.addBias(fcproj[l], 0, params, p.fcprojb[l], b * t, c);
      Residual.forward(residual3[l], 0, residual2[l], 0, fcproj[l], 0, n);
      x = residual3[l];
    }
    LayerNorm.forward(lnf, 0, lnfMean, 0, lnfRstd, 0, x, 0, params, p.lnfw, params, p.lnfb, b, t, c);
    // tied LM head: logits(BT,V) = lnf(BT,C) · wte(V,C)^T
    Gemm.matmulTransB(lnf, 0, params, p.wte, logits, 0, b * t, v, c, false);
    forwarded = true;
    return CrossEntropy.forward(losses, 0, probs, 0, logits, 0, targets, 0, b, t, v);
  }

  /** Zeroes the parameter gradients. */
  public void zeroGrad() {
    Arrays.fill(grads, 0f);
  }

  /** Backward pass of the last {@link #forward}, accumulating into {@link #grads()}. */
  public void backward() {
    if (!forwarded) throw new IllegalStateException("backward() before forward()");
    int c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), nh = cfg.localHeads(), hs = cfg.headSize();
    int v = cfg.vocabSize(), layers = cfg.numLayers();
    Layout p = layout;
    Arrays.fill(dlogits, 0f);
    CrossEntropy.backward(dlogits, 0, probs, 0, targets, 0, b, t, v, 1f);
    Arrays.fill(dlnf, 0f);
    Gemm.matmul(dlogits, 0, params, p.wte, dlnf, 0, b * t, c, v, false);
    Gemm.matmulTransA(dlogits, 0, lnf, 0, grads, p.wte, v, c, b * t, true);
    Arrays.fill(dres, 0f);
    float[] xLast = layers > 0 ? residual3[layers - 1] : encoded;
    LayerNorm.backward(dres, 0, grads, p.lnfw, grads, p.lnfb, dlnf, 0, xLast, 0, params, p.lnfw, lnfMean, 0, lnfRstd, 0, b, t, c);
    for (int l = layers - 1; l >= 0; l--) {
      float[] x = l > 0 ? residual3[l - 1] : encoded;
      // MLP: residual3 = residual2 + fc2(gelu(fc1(ln2(residual2)))); dres is d residual3 and flows on unchanged.
      Arrays.fill(dfchGelu, 0f);
      Matmul.backward(dfchGelu, 0, grads, p.fcprojw[l], grads, p.fcprojb[l], dres, 0, fchGelu[l], 0, params, p.fcprojw[l], b, t, ff, c);
      Arrays.fill(dfch, 0f);
      Gelu.backward(dfch, 0, dfchGelu, 0, fch[l], 0, b * t * ff);
      Arrays.fill(dln, 0f);
      Matmul.backward(dln, 0, grads, p.fcw[l], grads, p.fcb[l], dfch, 0, ln2[l], 0, params, p.fcw[l], b, t, c, ff);
      allReduce(mlpBwd[l], dln);
      LayerNorm.backward(dres, 0, grads, p.ln2w[l], grads, p.ln2b[l], dln, 0, residual2[l], 0, params, p.ln2w[l], ln2Mean[l], 0, ln2Rstd[l], 0, b, t, c);
      // attention: residual2 = x + proj(attn(qkv(ln1(x)))); dres is now d residual2.
      Arrays.fill(datty, 0f);
      Matmul.backward(datty, 0, grads, p.attprojw[l], grads, p.attprojb[l], dres, 0, atty[l], 0, params, p.attprojw[l], b, t, cr, c);
      Arrays.fill(dqkv, 0f);
      Attention.backward(dqkv, 0, dattScratch, 0, datty, 0, qkv[l], 0, att[l], 0, b, t, nh, hs);
      Arrays.fill(dln, 0f);
      Matmul.backward(dln, 0, grads, p.qkvw[l], grads, p.qkvb[l], dqkv, 0, ln1[l], 0, params, p.qkvw[l], b, t, c, 3 * cr);
      allReduce(attnBwd[l], dln);
      LayerNorm.backward(dres, 0, grads, p.ln1w[l], grads, p.ln1b[l], dln, 0, x, 0, params, p.ln1w[l], ln1Mean[l], 0, ln1Rstd[l], 0, b, t, c);
    }
    Encoder.backward(grads, p.wte, grads, p.wpe, dres, 0, inputs, 0, b, t, c, v);
  }

  /** The TP all-reduce of a (B·T, C) tensor at site {@code site} (see {@link CollectiveSites}). */
  private void allReduce(String site, float[] buf) {
    tp.allReduce(site, buf, b * t, cfg.hiddenSize());
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
    return GradNorm.squaredNorm(grads, 0, layout.replicatedFlag, 0, !includeReplicated, grads.length);
  }

  /**
   * Offsets of the parameter tensors in a flat array: embeddings, per-layer tensors (indexed by layer), final
   * LayerNorm. Subclasses assign each offset once, in their constructor.
   */
  public abstract static class Offsets {
    public int wte, wpe, lnfw, lnfb;
    public final int[] ln1w, ln1b, qkvw, qkvb, attprojw, attprojb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;

    Offsets(int layers) {
      ln1w = new int[layers];
      ln1b = new int[layers];
      qkvw = new int[layers];
      qkvb = new int[layers];
      attprojw = new int[layers];
      attprojb = new int[layers];
      ln2w = new int[layers];
      ln2b = new int[layers];
      fcw = new int[layers];
      fcb = new int[layers];
      fcprojw = new int[layers];
      fcprojb = new int[layers];
    }
  }

  /**
   * Offsets of every parameter tensor of one rank in the flat parameter array, and the map from a rank's elements to
   * the full (TP=1) model's, which defines the Megatron split.
   */
  public static final class Layout extends Offsets {
    private final int size;
    private final int[] fullIndex;
    private final boolean[] replicatedFlag;
    private final byte[] decay;

    /** The layout of rank {@code rank} of {@code cfg.tp()}. */
    public Layout(GptConfig cfg, int rank) {
      super(cfg.numLayers());
      int layers = cfg.numLayers(), c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn(), r = cfg.tp();
      int v = cfg.vocabSize(), tmax = cfg.seqLength(), ffFull = 4 * c;
      // rank elements in order; full offsets come from the TP=1 layout built alongside
      Builder bld = new Builder(cfg.withTp(1), layers);
      int o = 0;
      wte = o; o = bld.replicated(o, bld.wte, v * c, false);
      wpe = o; o = bld.replicated(o, bld.wpe, tmax * c, false);
      for (int l = 0; l < layers; l++) {
        ln1w[l] = o; o = bld.replicated(o, bld.ln1w[l], c, false);
        ln1b[l] = o; o = bld.replicated(o, bld.ln1b[l], c, false);
        qkvw[l] = o;
        for (int row = 0; row < c; row++) {
          for (int part = 0; part < 3; part++) o = bld.sharded(o, bld.qkvw[l] + row * 3 * c + part * c + rank * cr, cr, true);
        }
        qkvb[l] = o;
        for (int part = 0; part < 3; part++) o = bld.sharded(o, bld.qkvb[l] + part * c + rank * cr, cr, false);
        attprojw[l] = o; o = bld.sharded(o, bld.attprojw[l] + rank * cr * c, cr * c, true);
        attprojb[l] = o; o = bld.replicated(o, bld.attprojb[l], c, false);
        ln2w[l] = o; o = bld.replicated(o, bld.ln2w[l], c, false);
        ln2b[l] = o; o = bld.replicated(o, bld.ln2b[l], c, false);
        fcw[l] = o;
        for (int row = 0; row < c; row++) o = bld.sharded(o, bld.fcw[l] + row * ffFull + rank * ff, ff, true);
        fcb[l] = o; o = bld.sharded(o, bld.fcb[l] + rank * ff, ff, false);
        fcprojw[l] = o; o = bld.sharded(o, bld.fcprojw[l] + rank * ff * c, ff * c, true);
        fcprojb[l] = o; o = bld.replicated(o, bld.fcprojb[l], c, false);
      }
      lnfw = o; o = bld.replicated(o, bld.lnfw, c, false);
      lnfb = o; o = bld.replicated(o, bld.lnfb, c, false);
      size = o;
      fullIndex = Arrays.copyOf(bld.index, o);
      replicatedFlag = Arrays.copyOf(bld.repl, o);
      decay = Arrays.copyOf(bld.decay, o);
      // the embedding matrix (also the tied head) is decayed as in GPT-2 training recipes
      Arrays.fill(decay, wte, wte + v * c, (byte) 1);
      if (r == 1 && o != bld.fullSize) throw new AssertionError("layout size " + o + " != " + bld.fullSize);
    }

    /** Number of parameters this rank holds. */
    public int size() {
      return size;
    }

    /** Index in the full (TP=1) parameter array of this rank's element {@code i}. */
    public int fullIndex(int i) {
      return fullIndex[i];
    }

    /** True if element {@code i} is replicated on every rank (embeddings, LayerNorms, row-parallel biases). */
    public boolean replicated(int i) {
      return replicatedFlag[i];
    }

    /** Weight-decay switch per element (1 for matrices, 0 for gains and biases). */
    public byte[] decayMask() {
      return decay.clone();
    }

    /** This rank's elements of a full (TP=1) parameter array. */
    public float[] slice(float[] full) {
      float[] out = new float[size];
      for (int i = 0; i < size; i++) out[i] = full[fullIndex[i]];
      return out;
    }

    /**
     * The full model's parameters from {@code seed}: normal(0, 0.02) matrices, normal(0, 0.01) position embeddings,
     * residual projections scaled by 1/sqrt(2L) (GPT-2), LayerNorm gains 1, biases 0.
     */
    static float[] initFull(GptConfig full, long seed) {
      Builder f = new Builder(full, full.numLayers());
      float[] w = new float[f.fullSize];
      int c = full.hiddenSize(), layers = full.numLayers();
      float resid = (float) (0.02 / Math.sqrt(2.0 * layers));
      Random rng = new Random(seed);
      gaussian(w, f.wte, full.vocabSize() * c, 0.02f, rng);
      gaussian(w, f.wpe, full.seqLength() * c, 0.01f, rng);
      for (int l = 0; l < layers; l++) {
        Arrays.fill(w, f.ln1w[l], f.ln1w[l] + c, 1f);
        gaussian(w, f.qkvw[l], 3 * c * c, 0.02f, rng);
        gaussian(w, f.attprojw[l], c * c, resid, rng);
        Arrays.fill(w, f.ln2w[l], f.ln2w[l] + c, 1f);
        gaussian(w, f.fcw[l], 4 * c * c, 0.02f, rng);
        gaussian(w, f.fcprojw[l], 4 * c * c, resid, rng);
      }
      Arrays.fill(w, f.lnfw, f.lnfw + c, 1f);
      return w;
    }

    private static void gaussian(float[] w, int off, int n, float std, Random rng) {
      for (int i = 0; i < n; i++) w[off + i] = (float) (rng.nextGaussian() * std);
    }

    /** Full (TP=1) offsets, and the per-element bookkeeping of a rank's layout while it is built. */
    private static final class Builder extends Offsets {
      final int fullSize;
      int[] index = new int[16];
      boolean[] repl = new boolean[16];
      byte[] decay = new byte[16];

      Builder(GptConfig full, int layers) {
        super(layers);
        int c = full.hiddenSize();
        int o = 0;
        wte = o; o += full.vocabSize() * c;
        wpe = o; o += full.seqLength() * c;
        for (int l = 0; l < layers; l++) {
          ln1w[l] = o; o += c;
          ln1b[l] = o; o += c;
          qkvw[l] = o; o += 3 * c * c;
          qkvb[l] = o; o += 3 * c;
          attprojw[l] = o; o += c * c;
          attprojb[l] = o; o += c;
          ln2w[l] = o; o += c;
          ln2b[l] = o; o += c;
          fcw[l] = o; o += 4 * c * c;
          fcb[l] = o; o += 4 * c;
          fcprojw[l] = o; o += 4 * c * c;
          fcprojb[l] = o; o += c;
        }
        lnfw = o; o += c;
        lnfb = o; o += c;
        fullSize = o;
      }

      int replicated(int o, int fullOff, int n, boolean decayed) {
        return add(o, fullOff, n, true, decayed);
      }

      int sharded(int o, int fullOff, int n, boolean decayed) {
        return add(o, fullOff, n, false, decayed);
      }

      private int add(int o, int fullOff, int n, boolean replicated, boolean decayed) {
        if (o + n > index.length) {
          int cap = Math.max(o + n, index.length * 2);
          index = Arrays.copyOf(index, cap);
          repl = Arrays.copyOf(repl, cap);
          decay = Arrays.copyOf(decay, cap);
        }
        for (int i = 0; i < n; i++) {
          index[o + i] = fullOff + i;
          repl[o + i] = replicated;
          decay[o + i] = (byte) (decayed ? 1 : 0);
        }
        return o + n;
      }
    }
  }
}
