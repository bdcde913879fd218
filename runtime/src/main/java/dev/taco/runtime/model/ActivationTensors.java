package dev.taco.runtime.model;

/**
 * One rank's activations for a micro-batch of {@code B} sequences of {@code T} tokens, and the gradient scratch of the
 * backward pass, as offsets into one arena (llm.c's {@code ActivationTensors}). Per layer: {@code ln1, ln1Mean,
 * ln1Rstd, qkv, atty, att, attproj, residual2, ln2, ln2Mean, ln2Rstd, fch, fchGelu, fcproj, residual3}; then
 * {@code lnf, lnfMean, lnfRstd, logits, probs, losses}; then the scratch {@code dres, dln, dqkv, datty, dattScratch,
 * dfch, dfchGelu, dlogits, dlnf}. Shapes (C channels, Cr = C/R and Ff = 4C/R this rank's, NH/R heads, V vocabulary):
 * (B,T,C) for {@code encoded, ln*, attproj, residual*, fcproj, lnf, dres, dln, dlnf}; (B,T) for means, rstds and
 * losses; (B,T,3Cr) {@code qkv, dqkv}; (B,T,Cr) {@code atty, datty}; (B,NH/R,T,T) {@code att, dattScratch} (or what the backend's
 * {@link Ops#attentionStateSize} says: (B,NH/R,T) for flash attention); (B,T,Ff)
 * {@code fch, fchGelu, dfch, dfchGelu}; (B,T,V) {@code logits, probs, dlogits}.
 *
 * <p>With sequence parallelism ({@link GptConfig#sequenceSharded}) the same tensors serve, each rank using the first
 * B·T/R rows of its token-sharded ones (means, rstds, residual2/3 in the blocks, lnf, logits, probs, losses, dlnf),
 * {@code encoded} and {@code dres} whole (the rank's shard at row rank·B·T/R), and three more: {@code lnShard} and
 * {@code shardScratch} (B·T/R, C), a LayerNorm's output before its all-gather and a reduce-scatter's result, and
 * {@code dfull} (B,T,C), an all-gathered gradient.
 */
public final class ActivationTensors {
  public final long encoded;
  public final long[] ln1, ln1Mean, ln1Rstd, qkv, atty, att, attproj, residual2, ln2, ln2Mean, ln2Rstd, fch, fchGelu,
      fcproj, residual3;
  public final long lnf, lnfMean, lnfRstd, logits, probs, losses;
  public final long dres, dln, dqkv, datty, dattScratch, dfch, dfchGelu, dlogits, dlnf;
  public final long lnShard, shardScratch, dfull;
  private final long size;
  private long next;

  /**
   * The offsets for {@code cfg} (this rank's TP share) and micro-batch {@code b}, with {@code attentionState} elements for each {@code att} and
   * for {@code dattScratch} (the backend's {@link Ops#attentionStateSize}).
   */
  public ActivationTensors(GptConfig cfg, int b, long attentionState) {
    long bt = (long) b * cfg.seqLength(), c = cfg.hiddenSize(), cr = cfg.localHidden(), ff = cfg.localFfn();
    long att4 = attentionState, v = cfg.vocabSize();
    int layers = cfg.numLayers();
    encoded = take(bt * c);
    ln1 = new long[layers];
    ln1Mean = new long[layers];
    ln1Rstd = new long[layers];
    qkv = new long[layers];
    atty = new long[layers];
    att = new long[layers];
    attproj = new long[layers];
    residual2 = new long[layers];
    ln2 = new long[layers];
    ln2Mean = new long[layers];
    ln2Rstd = new long[layers];
    fch = new long[layers];
    fchGelu = new long[layers];
    fcproj = new long[layers];
    residual3 = new long[layers];
    for (int l = 0; l < layers; l++) {
      ln1[l] = take(bt * c);
      ln1Mean[l] = take(bt);
      ln1Rstd[l] = take(bt);
      qkv[l] = take(bt * 3 * cr);
      atty[l] = take(bt * cr);
      att[l] = take(att4);
      attproj[l] = take(bt * c);
      residual2[l] = take(bt * c);
      ln2[l] = take(bt * c);
      ln2Mean[l] = take(bt);
      ln2Rstd[l] = take(bt);
      fch[l] = take(bt * ff);
      fchGelu[l] = take(bt * ff);
      fcproj[l] = take(bt * c);
      residual3[l] = take(bt * c);
    }
    lnf = take(bt * c);
    lnfMean = take(bt);
    lnfRstd = take(bt);
    logits = take(bt * v);
    probs = take(bt * v);
    losses = take(bt);
    dres = take(bt * c);
    dln = take(bt * c);
    dqkv = take(bt * 3 * cr);
    datty = take(bt * cr);
    dattScratch = take(att4);
    dfch = take(bt * ff);
    dfchGelu = take(bt * ff);
    dlogits = take(bt * v);
    dlnf = take(bt * c);
    boolean sp = cfg.sequenceSharded();
    lnShard = take(sp ? bt / cfg.tp() * c : 0);
    shardScratch = take(sp ? bt / cfg.tp() * c : 0);
    dfull = take(sp ? bt * c : 0);
    size = next;
  }

  private long take(long n) {
    long o = next;
    next += n;
    return o;
  }

  /** Elements of the arena. */
  public long size() {
    return size;
  }
}
