package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import java.util.function.DoubleSupplier;
import org.junit.jupiter.api.Test;

/**
 * Mutation tests for the checker itself: a gradient that is wrong in the ways a hand-written backward
 * pass usually is (a sign, a missing term, a mis-scaled term) must fail it, and the correct one must pass; a NaN
 * gradient or loss never passes.
 */
class GradCheckTest {
  static final int B = 2, T = 5, C = 8, N = B * T * C, BT = B * T;

  final Random rnd = new Random(31);
  final float[] inp = Bufs.input(N, rnd, 1.0);
  final float[] weight = Bufs.input(C, rnd, 1.0);
  final float[] bias = Bufs.input(C, rnd, 1.0);
  final float[] out = Bufs.output(N);
  final float[] mean = Bufs.output(BT);
  final float[] rstd = Bufs.output(BT);
  final double[] r = Bufs.weights(N, rnd);
  final DoubleSupplier loss = () -> {
    LayerNorm.forward(out, OFF, mean, OFF, rstd, OFF, inp, OFF, weight, OFF, bias, OFF, B, T, C);
    return Bufs.dot(out, r);
  };

  /**
   * LayerNorm's dinp written out by hand, with switches for the mutations:
   * dinp = sign · rstd · (g − keepMean·mean(g) − keepVar·norm·mean(g·norm)), g = weight · dout.
   */
  float[] layerNormDinp(float sign, float keepMean, float keepVar) {
    loss.getAsDouble();
    float[] dinp = Bufs.output(N);
    for (int bt = 0; bt < BT; bt++) {
      double gm = 0, gnm = 0;
      for (int c = 0; c < C; c++) {
        double g = weight[OFF + c] * r[bt * C + c];
        double norm = (inp[OFF + bt * C + c] - mean[OFF + bt]) * rstd[OFF + bt];
        gm += g / C;
        gnm += g * norm / C;
      }
      for (int c = 0; c < C; c++) {
        double g = weight[OFF + c] * r[bt * C + c];
        double norm = (inp[OFF + bt * C + c] - mean[OFF + bt]) * rstd[OFF + bt];
        dinp[OFF + bt * C + c] = (float) (sign * rstd[OFF + bt] * (g - keepMean * gm - keepVar * norm * gnm));
      }
    }
    return dinp;
  }

  GradCheck.Result check(float[] dinp) {
    return GradCheck.compare("dinp", inp, dinp, N, loss, Integer.MAX_VALUE, 1);
  }

  @Test
  void correctGradientPasses() {
    assertThat(check(layerNormDinp(1f, 1f, 1f)).maxErr()).isLessThan(GradCheck.TOL);
  }

  @Test
  void flippedSignFails() {
    assertThat(check(layerNormDinp(-1f, 1f, 1f)).maxErr()).isGreaterThan(1.0);
  }

  @Test
  void missingMeanTermFails() {
    assertThat(check(layerNormDinp(1f, 0f, 1f)).maxErr()).isGreaterThan(10 * GradCheck.TOL);
  }

  @Test
  void missingVarianceTermFails() {
    assertThat(check(layerNormDinp(1f, 1f, 0f)).maxErr()).isGreaterThan(10 * GradCheck.TOL);
  }

  @Test
  void slightlyMisScaledTermFails() {
    // Only 5% off in one term: still well outside the checker's noise.
    assertThat(check(layerNormDinp(1f, 1f, 1.05f)).maxErr()).isGreaterThan(GradCheck.TOL);
  }

  @Test
  void aNaNGradientOrLossFails() {
    for (int at : new int[] {0, N / 2, N - 1}) { // first, middle, last: NaN stays the worst error once seen
      float[] dinp = layerNormDinp(1f, 1f, 1f);
      dinp[OFF + at] = Float.NaN;
      assertThat(check(dinp).maxErr()).as("NaN at %d", at).isNaN();
      assertThatThrownBy(() -> GradCheck.check("dinp", inp, dinp, N, loss)).as("NaN at %d", at)
          .isInstanceOf(AssertionError.class);
    }
    float[] dinp = layerNormDinp(1f, 1f, 1f);
    assertThatThrownBy(() -> GradCheck.check("dinp", inp, dinp, N, () -> Double.NaN))
        .isInstanceOf(AssertionError.class);
  }

  @Test
  void attentionWithForgottenDqFails() {
    // The real attention backward passes; the same gradient with its q part left at zero (a forgotten
    // dq accumulation) must not.
    int nh = 2, hs = 4, d = nh * hs, n = B * T * 3 * d;
    float[] qkv = Bufs.input(n, rnd, 1.0);
    float[] o = Bufs.output(B * T * d);
    float[] att = Bufs.output(B * nh * T * T);
    double[] rr = Bufs.weights(B * T * d, rnd);
    float[] dqkv = Bufs.output(n);
    Attention.forward(o, OFF, att, OFF, qkv, OFF, B, T, nh, hs);
    Attention.backward(dqkv, OFF, Bufs.output(B * nh * T * T), OFF, Bufs.asDout(rr), OFF, qkv, OFF, att, OFF,
        B, T, nh, hs);
    DoubleSupplier l = () -> {
      Attention.forward(o, OFF, att, OFF, qkv, OFF, B, T, nh, hs);
      return Bufs.dot(o, rr);
    };
    assertThat(GradCheck.compare("dqkv", qkv, dqkv, n, l, Integer.MAX_VALUE, 1).maxErr()).isLessThan(GradCheck.TOL);
    for (int bt = 0; bt < B * T; bt++) {
      for (int j = 0; j < d; j++) {
        dqkv[OFF + bt * 3 * d + j] = 0f;
      }
    }
    assertThat(GradCheck.compare("dqkv", qkv, dqkv, n, l, Integer.MAX_VALUE, 1).maxErr()).isGreaterThan(0.5);
  }
}
