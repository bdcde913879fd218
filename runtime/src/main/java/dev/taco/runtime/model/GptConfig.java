package dev.taco.runtime.model;

/**
 * Shape of a GPT-2 style decoder and of its tensor-parallel split (Megatron-LM names in brackets).
 *
 * @param vocabSize tokens in the vocabulary (256 for byte-level text)
 * @param seqLength maximum context T [--seq-length]
 * @param numLayers transformer blocks L [--num-layers]
 * @param numHeads attention heads NH [--num-attention-heads]
 * @param hiddenSize channels C [--hidden-size]; the MLP is 4C wide
 * @param tp tensor-parallel size R [--tensor-model-parallel-size]: heads and the MLP width are split over R ranks
 * @param sequenceParallel [--sequence-parallel] the LayerNorm, residual and embedding regions hold 1/R of the tokens
 *     on each rank, with an all-gather before each column-parallel linear and a reduce-scatter after each row-parallel
 *     one instead of the all-reduces (Korthikanti et al. 2022, §4.2.2); needs T divisible by R; no effect at R = 1
 */
public record GptConfig(int vocabSize, int seqLength, int numLayers, int numHeads, int hiddenSize, int tp,
    boolean sequenceParallel) {

  /** Without sequence parallelism. */
  public GptConfig(int vocabSize, int seqLength, int numLayers, int numHeads, int hiddenSize, int tp) {
    this(vocabSize, seqLength, numLayers, numHeads, hiddenSize, tp, false);
  }

  /**
   * Validates the shape.
   *
   * @throws IllegalArgumentException naming the flag when a size is not positive or {@code tp} does not divide the
   *     heads (or heads the hidden size)
   */
  public GptConfig {
    positive("--seq-length", seqLength);
    positive("--num-layers", numLayers);
    positive("--num-attention-heads", numHeads);
    positive("--hidden-size", hiddenSize);
    positive("--tensor-model-parallel-size", tp);
    positive("vocab size", vocabSize);
    if (hiddenSize % numHeads != 0) {
      throw new IllegalArgumentException(
          "--num-attention-heads " + numHeads + " does not divide --hidden-size " + hiddenSize);
    }
    if (numHeads % tp != 0) {
      throw new IllegalArgumentException("--tp " + tp + " does not divide --num-attention-heads " + numHeads
          + " (each rank must hold whole heads)");
    }
    if (sequenceParallel && seqLength % tp != 0) {
      throw new IllegalArgumentException("--sequence-parallel needs --seq-length divisible by --tp: " + seqLength
          + " tokens do not split over " + tp + " ranks");
    }
  }

  private static void positive(String what, int v) {
    if (v <= 0) throw new IllegalArgumentException(what + " must be positive, got " + v);
  }

  /** Channels per head, C / NH. */
  public int headSize() {
    return hiddenSize / numHeads;
  }

  /** Heads held by one rank, NH / R. */
  public int localHeads() {
    return numHeads / tp;
  }

  /** Attention width held by one rank, C / R. */
  public int localHidden() {
    return localHeads() * headSize();
  }

  /** MLP width held by one rank, 4C / R. */
  public int localFfn() {
    return 4 * hiddenSize / tp;
  }

  /** The same model at another tensor-parallel size (and the same sequence-parallel setting). */
  public GptConfig withTp(int r) {
    return new GptConfig(vocabSize, seqLength, numLayers, numHeads, hiddenSize, r, sequenceParallel);
  }

  /** Whether the model runs sequence-parallel: asked for, and more than one rank. */
  public boolean sequenceSharded() {
    return sequenceParallel && tp > 1;
  }

  /** Parameters of the whole (unsplit) model. */
  public long parameterCount() {
    long c = hiddenSize;
    return (long) vocabSize * c + (long) seqLength * c + numLayers * (12 * c * c + 13 * c) + 2 * c;
  }
}
