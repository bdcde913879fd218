package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.Random;
import java.util.function.DoubleSupplier;
import org.junit.jupiter.api.Test;

class CrossEntropyTest {
  static final int B = 2, T = 5, V = 16, BT = B * T, N = BT * V;

  final long seed = LanesAssert.seed(getClass().getSimpleName());
  final Random rnd = new Random(seed);
  final float[] logits = Bufs.input(N, rnd, 2.0);
  final int[] targets = Bufs.tokens(BT, rnd, V);
  final float[] probs = Bufs.output(N);
  final float[] losses = Bufs.output(BT);

  float forward() {
    return CrossEntropy.forward(losses, OFF, probs, OFF, logits, OFF, targets, OFF, B, T, V);
  }

  @Test
  void forwardMatchesDoubleReference() {
    float mean = forward();
    double total = 0, totalMag = 0;
    for (int bt = 0; bt < BT; bt++) {
      double max = Double.NEGATIVE_INFINITY;
      for (int v = 0; v < V; v++) {
        max = Math.max(max, logits[OFF + bt * V + v]);
      }
      double sum = 0;
      for (int v = 0; v < V; v++) {
        sum += Math.exp(logits[OFF + bt * V + v] - max);
      }
      double psum = 0;
      for (int v = 0; v < V; v++) {
        double p = Math.exp(logits[OFF + bt * V + v] - max) / sum;
        assertThat((double) probs[OFF + bt * V + v]).isCloseTo(p, within(1e-6));
        psum += probs[OFF + bt * V + v];
      }
      assertThat(psum).isCloseTo(1.0, within(1e-5));
      double target = logits[OFF + bt * V + targets[OFF + bt]];
      double loss = Math.log(sum) + max - target, mag = Math.abs(Math.log(sum)) + Math.abs(max) + Math.abs(target);
      Bufs.assertNear("loss[" + bt + "], seed " + seed, losses[OFF + bt], loss, mag, 1e-6);
      total += loss;
      totalMag += mag;
    }
    Bufs.assertNear("mean loss, seed " + seed, mean, total / BT, totalMag / BT, 1e-6);
    Bufs.assertPadsIntact("probs", probs, N);
    Bufs.assertPadsIntact("losses", losses, BT);
  }

  @Test
  void extremeLogitsGiveFiniteLoss() {
    for (int i = 0; i < N; i++) {
      logits[OFF + i] = (i % 2 == 0) ? 1000f : -1000f;
    }
    float mean = forward();
    assertThat(Float.isFinite(mean)).isTrue();
    for (int bt = 0; bt < BT; bt++) {
      assertThat(Float.isFinite(losses[OFF + bt])).isTrue(); // even where the target's probability underflows to 0
    }
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    forward();
    float[] dlogits = Bufs.output(N);
    float dloss = 1.5f;
    CrossEntropy.backward(dlogits, OFF, probs, OFF, targets, OFF, B, T, V, dloss);
    Bufs.assertPadsIntact("dlogits", dlogits, N);
    DoubleSupplier loss = () -> {
      forward();
      double s = 0; // the mean loss in double, from the per-position losses
      for (int bt = 0; bt < BT; bt++) {
        s += losses[OFF + bt];
      }
      return dloss * s / BT;
    };
    GradCheck.check("dlogits", logits, dlogits, N, loss);
  }

  @Test
  void backwardAccumulates() {
    forward();
    float[] dlogits = Bufs.output(N);
    GradCheck.assertAccumulates(() -> CrossEntropy.backward(dlogits, OFF, probs, OFF, targets, OFF, B, T, V, 1f),
        new float[][] {dlogits}, new int[] {N});
  }

  @Test
  void rejectsBadArguments() {
    targets[OFF + 4] = -2;
    assertThatThrownBy(this::forward).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("targets[4]");
    targets[OFF + 4] = 0;
    assertThatThrownBy(() -> CrossEntropy.forward(losses, OFF, probs, OFF, logits, OFF, targets, OFF, B, T, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("V");
    assertThatThrownBy(() -> CrossEntropy.backward(new float[N - 1], 0, probs, OFF, targets, OFF, B, T, V, 1f))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dlogits");
  }
}
