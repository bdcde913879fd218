package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.collective.Communicator;
import dev.taco.collective.LocalGroup;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.Test;

/**
 * With exact (float32) collectives, the Megatron split must not change the math: the loss and every parameter
 * gradient at TP = 2 and 4 equal those at TP = 1 up to float32 rounding (summation order differs).
 */
class TensorParallelGradientTest {
  static final int B = 2;
  static final GptConfig CFG = new GptConfig(256, 8, 2, 4, 32, 1);

  record Grads(float loss, float[] full, boolean[] written) {}

  static int[][] batch(long seed) {
    SplittableRandom rng = new SplittableRandom(seed);
    int[] in = new int[B * CFG.seqLength()], tgt = new int[B * CFG.seqLength()];
    for (int i = 0; i < in.length; i++) {
      in[i] = rng.nextInt(256);
      tgt[i] = rng.nextInt(256);
    }
    return new int[][] {in, tgt};
  }

  /** Runs forward + backward at TP = r and scatters each rank's gradients into the full model's layout. */
  static Grads gradients(int r, long seed) {
    return gradients(r, seed, false);
  }

  /**
   * As {@link #gradients(int, long)}, with sequence parallelism when {@code sp}: each rank's loss is then over its
   * B·T/R tokens and the micro-batch's loss their mean.
   */
  static Grads gradients(int r, long seed, boolean sp) {
    GptConfig cfg = new GptConfig(CFG.vocabSize(), CFG.seqLength(), CFG.numLayers(), CFG.numHeads(), CFG.hiddenSize(),
        r, sp);
    int[][] data = batch(seed);
    int fullSize = new ParameterTensors(CFG, 0).fullSize();
    float[] full = new float[fullSize];
    boolean[] written = new boolean[fullSize];
    List<Float> losses = LocalGroup.run(r, (Communicator comm) -> {
      Gpt<float[]> model = Gpt.cpu(cfg, comm, B, seed);
      model.zeroGrad();
      float loss = model.forward(data[0], data[1]);
      model.backward();
      synchronized (full) {
        for (ParameterTensors.Tensor t : model.layout().tensors()) {
          for (int i = 0; i < t.size(r); i++) {
            int f = t.fullIndex(i, comm.rank(), r);
            float g = model.grads()[t.offset() + i];
            if (written[f]) {
              // replicated tensor: every rank must hold the same gradient bits
              assertThat(g).as("replicated gradient %d (%s) on rank %d", f, t.name(), comm.rank()).isEqualTo(full[f]);
            }
            full[f] = g;
            written[f] = true;
          }
        }
      }
      return loss;
    });
    if (cfg.sequenceSharded()) {
      double mean = 0;
      for (float l : losses) mean += l / (double) r;
      return new Grads((float) mean, full, written);
    }
    for (float l : losses) assertThat(l).isEqualTo(losses.get(0));
    return new Grads(losses.get(0), full, written);
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 4})
  void gradientsMatchTp1(int r) {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    assertMatches(gradients(1, seed), gradients(r, seed), r, seed);
  }

  /**
   * Sequence parallelism (Korthikanti et al. 2022 §4.2.2) with exact collectives: LayerNorms, residuals and embeddings
   * on 1/R of the tokens, all-gathers and reduce-scatters instead of all-reduces, and the replicated gradients summed
   * over the ranks at the end, give the TP = 1 loss and gradients up to float32 rounding.
   */
  @ParameterizedTest
  @ValueSource(ints = {2, 4})
  void sequenceParallelGradientsMatchTp1(int r) {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    assertMatches(gradients(1, seed), gradients(r, seed, true), r, seed);
  }

  private static void assertMatches(Grads ref, Grads tp, int r, long seed) {
    String where = "TP=" + r + " vs TP=1, seed " + seed + " (-Dtaco.seed replays it)";
    double maxRel = 0;
    for (boolean w : tp.written()) assertThat(w).as(where).isTrue();
    assertThat(Math.abs(tp.loss() - ref.loss())).as(where).isLessThanOrEqualTo(1e-5f * Math.abs(ref.loss()));
    double num = 0, den = 0;
    for (int i = 0; i < ref.full().length; i++) {
      double d = tp.full()[i] - ref.full()[i];
      assertThat(Double.isNaN(tp.full()[i])).as(where).isFalse();
      num += d * d;
      den += (double) ref.full()[i] * ref.full()[i];
    }
    assertThat(den).as(where).isGreaterThan(0);
    double rel = Math.sqrt(num / den);
    assertThat(rel).as("relative L2 difference of all gradients, %s", where).isLessThan(1e-5);
    // per tensor too: the smallest gradients (biases) must not hide behind the large ones
    ParameterTensors lay = new ParameterTensors(CFG, 0);
    int[][] tensors = {{lay.wte, 256 * 32}, {lay.qkvw[0], 32 * 96}, {lay.qkvb[1], 96}, {lay.attprojw[1], 32 * 32},
        {lay.fcb[0], 128}, {lay.fcprojb[0], 32}, {lay.ln1w[0], 32}, {lay.lnfb, 32}};
    for (int[] tns : tensors) {
      double n2 = 0, d2 = 0;
      for (int i = tns[0]; i < tns[0] + tns[1]; i++) {
        double d = tp.full()[i] - ref.full()[i];
        n2 += d * d;
        d2 += (double) ref.full()[i] * ref.full()[i];
      }
      maxRel = Math.max(maxRel, Math.sqrt(n2 / Math.max(d2, 1e-30)));
    }
    assertThat(maxRel).as("worst per-tensor relative difference, %s", where).isLessThan(1e-4);
  }

  @Test
  void tokenIdsOutsideTheVocabularyOrTheWrongCountAreRefusedOnTheCpuToo() {
    try (var comm = LocalGroup.create(1).get(0)) {
      Gpt<float[]> model = Gpt.cpu(CFG, comm, B, 1);
      int[][] data = batch(1);
      int[] in = data[0].clone();
      in[B * CFG.seqLength() - 1] = 256;
      assertThatThrownBy(() -> model.forward(in, data[1])).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("inp[" + (B * CFG.seqLength() - 1) + "] = 256 is outside [0, 256)");
      int[] tgt = data[1].clone();
      tgt[0] = -1;
      assertThatThrownBy(() -> model.trainStep(data[0], tgt)).hasMessageContaining("[0] = -1 is outside [0, 256)");
      assertThatThrownBy(() -> model.forward(new int[3], data[1])).hasMessageContaining("got 3 and");
      assertThat(model.forward(data[0], data[1])).as("the model still works").isFinite();
    }
  }

  @Test
  void tpMustDivideHeads() {
    assertThatThrownBy(() -> new GptConfig(256, 8, 2, 4, 32, 3)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("--tp 3 does not divide --num-attention-heads 4");
    assertThatThrownBy(() -> new GptConfig(256, 8, 2, 0, 32, 1))
        .hasMessageContaining("--num-attention-heads must be positive");
    assertThatThrownBy(() -> new GptConfig(256, -1, 2, 4, 32, 1)).hasMessageContaining("--seq-length must be positive");
    assertThatThrownBy(() -> new GptConfig(256, 6, 2, 4, 32, 4, true))
        .hasMessageContaining("--sequence-parallel needs --seq-length divisible by --tp: 6 tokens do not split over 4");
    assertThat(new GptConfig(256, 6, 2, 4, 32, 1, true).sequenceSharded()).as("no effect at TP = 1").isFalse();
  }
}
