package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.Random;
import org.junit.jupiter.api.Test;

class LayerNormTest {
  static final int B = 2, T = 5, C = 8, N = B * T * C, BT = B * T;

  final long seed = LanesAssert.seed(getClass().getSimpleName());
  final Random rnd = new Random(seed);
  final float[] inp = Bufs.input(N, rnd, 1.0);
  final float[] weight = Bufs.input(C, rnd, 1.0);
  final float[] bias = Bufs.input(C, rnd, 1.0);
  final float[] out = Bufs.output(N);
  final float[] mean = Bufs.output(BT);
  final float[] rstd = Bufs.output(BT);

  void forward() {
    LayerNorm.forward(out, OFF, mean, OFF, rstd, OFF, inp, OFF, weight, OFF, bias, OFF, B, T, C);
  }

  @Test
  void forwardMatchesDoubleReference() {
    for (int i = 0; i < N; i++) {
      inp[OFF + i] += 50f; // a large common offset: a one-pass E[x^2]-E[x]^2 variance would lose digits here
    }
    forward();
    for (int bt = 0; bt < BT; bt++) {
      double m = 0;
      for (int c = 0; c < C; c++) {
        m += inp[OFF + bt * C + c];
      }
      m /= C;
      double v = 0;
      for (int c = 0; c < C; c++) {
        double d = inp[OFF + bt * C + c] - m;
        v += d * d;
      }
      double r = 1 / Math.sqrt(v / C + 1e-5);
      assertThat((double) mean[OFF + bt]).isCloseTo(m, within(1e-5 * Math.abs(m)));
      assertThat((double) rstd[OFF + bt]).isCloseTo(r, within(1e-4 * r));
      for (int c = 0; c < C; c++) {
        double x = inp[OFF + bt * C + c], w = weight[OFF + c], b = bias[OFF + c];
        // float32 x - mean cancels: its error scales with |x| + |mean| (about 50 here), not with the result
        double mag = (Math.abs(x) + Math.abs(m)) * r * Math.abs(w) + Math.abs(b);
        Bufs.assertNear("out[" + bt + "," + c + "], seed " + seed, out[OFF + bt * C + c], (x - m) * r * w + b, mag,
            1e-6);
      }
    }
    Bufs.assertPadsIntact("out", out, N);
    Bufs.assertPadsIntact("mean", mean, BT);
    Bufs.assertPadsIntact("rstd", rstd, BT);
  }

  /** Grads for L = sum(out * r). Returns {dinp, dweight, dbias}. */
  float[][] backward(double[] r) {
    float[] dout = Bufs.asDout(r);
    float[] dinp = Bufs.output(N);
    float[] dweight = Bufs.output(C);
    float[] dbias = Bufs.output(C);
    forward();
    LayerNorm.backward(dinp, OFF, dweight, OFF, dbias, OFF, dout, OFF, inp, OFF, weight, OFF, mean, OFF, rstd, OFF,
        B, T, C);
    return new float[][] {dinp, dweight, dbias};
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    double[] r = Bufs.weights(N, rnd);
    float[][] g = backward(r);
    Bufs.assertPadsIntact("dinp", g[0], N);
    java.util.function.DoubleSupplier loss = () -> {
      forward();
      return Bufs.dot(out, r);
    };
    GradCheck.check("dinp", inp, g[0], N, loss);
    GradCheck.check("dweight", weight, g[1], C, loss);
    GradCheck.check("dbias", bias, g[2], C, loss);
  }

  @Test
  void backwardAccumulates() {
    float[] dout = Bufs.asDout(Bufs.weights(N, rnd));
    float[] dinp = Bufs.output(N);
    float[] dweight = Bufs.output(C);
    float[] dbias = Bufs.output(C);
    forward();
    GradCheck.assertAccumulates(() -> LayerNorm.backward(dinp, OFF, dweight, OFF, dbias, OFF, dout, OFF, inp, OFF,
        weight, OFF, mean, OFF, rstd, OFF, B, T, C), new float[][] {dinp, dweight, dbias}, new int[] {N, C, C});
  }

  @Test
  void columnReductionCoversChannelsBeyondOneBlock() {
    // C = 37 spans three 16-channel blocks, the last one partial.
    int c = 37;
    Random r = new Random(3);
    float[] x = Bufs.input(c, r, 1), w = Bufs.input(c, r, 1), bb = Bufs.input(c, r, 1);
    float[] o = Bufs.output(c), m = Bufs.output(1), s = Bufs.output(1);
    LayerNorm.forward(o, OFF, m, OFF, s, OFF, x, OFF, w, OFF, bb, OFF, 1, 1, c);
    float[] dout = Bufs.input(c, r, 1);
    float[] dx = Bufs.output(c), dw = Bufs.output(c), db = Bufs.output(c);
    LayerNorm.backward(dx, OFF, dw, OFF, db, OFF, dout, OFF, x, OFF, w, OFF, m, OFF, s, OFF, 1, 1, c);
    for (int i = 0; i < c; i++) {
      assertThat(db[OFF + i]).isEqualTo(dout[OFF + i]);
      assertThat((double) dw[OFF + i]).isCloseTo((x[OFF + i] - m[OFF]) * s[OFF] * dout[OFF + i], within(1e-5));
    }
    Bufs.assertPadsIntact("dw", dw, c);
    Bufs.assertPadsIntact("db", db, c);
  }

  @Test
  void paramPartialsSumToTheWeightAndBiasGradients() {
    // the GPU's form: partial sums over blocks of rows (then summed by a GEMM); against a float64 reference, and with
    // a part count that does not divide B·T (the last block short) and one larger than needed (empty parts are zero)
    forward();
    float[] dout = Bufs.input(N, rnd, 1.0);
    for (int parts : new int[] {1, 5, BT + 3}) {
      float[] partials = Bufs.output(2 * parts * C);
      LayerNorm.layernormParamPartials(partials, OFF, dout, OFF, inp, OFF, mean, OFF, rstd, OFF, BT, C, parts);
      Bufs.assertPadsIntact("partials", partials, 2 * parts * C);
      for (int c = 0; c < C; c++) {
        double dw = 0, db = 0, gotW = 0, gotB = 0;
        for (int bt = 0; bt < BT; bt++) {
          double d = dout[OFF + bt * C + c];
          dw += d * (inp[OFF + bt * C + c] - (double) mean[OFF + bt]) * rstd[OFF + bt];
          db += d;
        }
        for (int p = 0; p < parts; p++) {
          gotW += partials[OFF + p * C + c];
          gotB += partials[OFF + parts * C + p * C + c];
        }
        assertThat(gotW).as("dweight channel %d, %d parts", c, parts)
            .isCloseTo(dw, within(1e-5 * Math.max(1, Math.abs(dw))));
        assertThat(gotB).as("dbias channel %d, %d parts", c, parts)
            .isCloseTo(db, within(1e-5 * Math.max(1, Math.abs(db))));
        assertThat(Double.isFinite(gotW) && Double.isFinite(gotB)).isTrue();
      }
    }
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(
        () -> LayerNorm.forward(out, OFF, mean, OFF, rstd, OFF, inp, OFF, weight, OFF, bias, OFF, -1, T, C))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("B");
    assertThatThrownBy(
        () -> LayerNorm.forward(out, OFF, mean, OFF, rstd, OFF, inp, OFF, new float[C - 1], 0, bias, OFF, B, T, C))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("weight");
    assertThatThrownBy(() -> LayerNorm.forward(out, OFF, mean, OFF, null, 0, inp, OFF, weight, OFF, bias, OFF, B, T, C))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rstd");
  }
}
