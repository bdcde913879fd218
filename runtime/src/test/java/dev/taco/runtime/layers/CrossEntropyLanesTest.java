package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static dev.taco.runtime.layers.LanesAssert.assertSameBits;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link CrossEntropyLanes} gives the bits of {@link CrossEntropy}'s kernels (probs, losses, the mean; dlogits
 * accumulated onto random values), vocabulary sizes below, at and past the lane count, with NaN / Infinity in a few
 * logits; and agrees with a float64 softmax cross-entropy.
 */
class CrossEntropyLanesTest {
  @ParameterizedTest(name = "B={0} T={1} V={2}")
  @CsvSource({"1,1,1", "1,2,3", "2,3,16", "2,5,17", "3,7,37", "8,128,256"})
  void forwardAndBackwardHaveTheKernelsBits(int B, int T, int V) {
    compare(LanesAssert.seed("cross-entropy lanes B=" + B + " T=" + T + " V=" + V), B, T, V, 0);
  }

  @ParameterizedTest(name = "specials, V={0}")
  @CsvSource({"16", "37"})
  void nanAndInfinityGiveTheKernelsBitsToo(int V) {
    compare(LanesAssert.seed("cross-entropy lanes specials"), 2, 9, V, 4);
  }

  static void compare(long seed, int B, int T, int V, int specials) {
    Random rnd = new Random(seed);
    int bt = B * T, n = bt * V;
    float[] logits = LanesAssert.inputWithSpecials(n, rnd, 3.0, specials);
    int[] targets = Bufs.tokens(bt, rnd, V);
    float[] probs = Bufs.output(n), losses = Bufs.output(bt), probsL = Bufs.output(n), lossesL = Bufs.output(bt);
    float mean = CrossEntropy.forward(losses, OFF, probs, OFF, logits, OFF, targets, OFF, B, T, V);
    float meanL = CrossEntropyLanes.forward(lossesL, OFF, probsL, OFF, logits, OFF, targets, OFF, B, T, V);
    assertThat(Float.floatToIntBits(meanL)).as("mean loss %s vs %s", meanL, mean).isEqualTo(Float.floatToIntBits(mean));
    assertSameBits("probs", probs, probsL);
    assertSameBits("losses", losses, lossesL);
    Bufs.assertPadsIntact("probs", probsL, n);

    float[] dl = Bufs.input(n, rnd, 1.0);
    float[] dl0 = dl.clone(), dlL = dl.clone();
    CrossEntropy.backward(dl, OFF, probs, OFF, targets, OFF, B, T, V, 0.7f);
    CrossEntropyLanes.backward(dlL, OFF, probsL, OFF, targets, OFF, B, T, V, 0.7f);
    assertSameBits("dlogits", dl, dlL);
    if (specials > 0) return;

    for (int r = 0; r < bt; r++) {
      double max = Double.NEGATIVE_INFINITY, sum = 0;
      for (int v = 0; v < V; v++) max = Math.max(max, logits[OFF + r * V + v]);
      for (int v = 0; v < V; v++) sum += Math.exp(logits[OFF + r * V + v] - max);
      int tgt = targets[OFF + r];
      double loss = Math.log(sum) + max - logits[OFF + r * V + tgt];
      assertThat(Math.abs(lossesL[OFF + r] - loss)).as("loss of row %d", r).isLessThan(1e-5 * (1 + loss));
      for (int v = 0; v < V; v++) {
        double p = Math.exp(logits[OFF + r * V + v] - max) / sum;
        assertThat(Math.abs(probsL[OFF + r * V + v] - p)).isLessThan(1e-6 * (1 + p));
        double d = 0.7 / bt * (p - (v == tgt ? 1 : 0));
        assertThat(Math.abs(dlL[OFF + r * V + v] - dl0[OFF + r * V + v] - d)).isLessThan(1e-6);
      }
    }
  }

  @Test
  void checksTargetsLikeTheScalarWrapper() {
    float[] x = new float[8];
    int[] bad = {0, 9};
    assertThatThrownBy(() -> CrossEntropyLanes.forward(x, 0, x, 0, x, 0, bad, 0, 1, 2, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("targets");
    assertThatThrownBy(() -> CrossEntropyLanes.backward(x, 0, x, 0, bad, 0, 1, 2, 4, 1f))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("targets");
  }
}
