package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import java.util.function.DoubleSupplier;
import org.junit.jupiter.api.Test;

class EncoderTest {
  static final int B = 2, T = 5, C = 8, V = 256, MAXT = 7;

  final Random rnd = new Random(17);
  final int[] tok = Bufs.tokens(B * T, rnd, 6); // few distinct ids, so some repeat (the scatter must add them up)
  final float[] wte = Bufs.input(V * C, rnd, 1.0);
  final float[] wpe = Bufs.input(MAXT * C, rnd, 1.0);
  final float[] out = Bufs.output(B * T * C);

  void forward() {
    Encoder.forward(out, OFF, tok, OFF, wte, OFF, wpe, OFF, B, T, C, V);
  }

  @Test
  void forwardIsTokenPlusPositionRow() {
    forward();
    for (int b = 0; b < B; b++) {
      for (int t = 0; t < T; t++) {
        for (int c = 0; c < C; c++) {
          float expected = wte[OFF + tok[OFF + b * T + t] * C + c] + wpe[OFF + t * C + c];
          assertThat(out[OFF + (b * T + t) * C + c]).isEqualTo(expected);
        }
      }
    }
    Bufs.assertPadsIntact("out", out, B * T * C);
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    double[] r = Bufs.weights(B * T * C, rnd);
    float[] dout = Bufs.asDout(r);
    float[] dwte = Bufs.output(V * C), dwpe = Bufs.output(MAXT * C);
    Encoder.backward(dwte, OFF, dwpe, OFF, dout, OFF, tok, OFF, B, T, C, V);
    Bufs.assertPadsIntact("dwte", dwte, V * C);
    Bufs.assertPadsIntact("dwpe", dwpe, MAXT * C);
    DoubleSupplier loss = () -> {
      forward();
      return Bufs.dot(out, r);
    };
    // All rows of wte that are used (ids < 6), plus a sample of the rest, whose gradient must be 0.
    GradCheck.check("dwte used rows", wte, dwte, 6 * C, loss);
    GradCheck.check("dwte", wte, dwte, V * C, loss, 64, 5);
    GradCheck.check("dwpe", wpe, dwpe, MAXT * C, loss); // rows T..MAXT-1 unused: 0
    for (int i = 6 * C; i < V * C; i++) {
      assertThat(dwte[OFF + i]).isZero();
    }
  }

  @Test
  void oneHotRowsTimesDoutIsTheWteGradient() {
    // the GPU's form: dwte = onehot(ids)^T · dout (a GEMM there, in float64 here) against the CPU's scatter
    float[] hot = Bufs.output(B * T * V);
    Encoder.oneHotRows(hot, OFF, tok, OFF, B * T, V);
    Bufs.assertPadsIntact("one-hot", hot, B * T * V);
    for (int n = 0; n < B * T; n++) {
      for (int v = 0; v < V; v++) {
        assertThat(hot[OFF + n * V + v]).as("row %d, id %d", n, v).isEqualTo(tok[OFF + n] == v ? 1f : 0f);
      }
    }
    float[] dout = Bufs.input(B * T * C, rnd, 1.0);
    float[] dwte = Bufs.output(V * C), dwpe = Bufs.output(MAXT * C);
    Encoder.backward(dwte, OFF, dwpe, OFF, dout, OFF, tok, OFF, B, T, C, V);
    for (int v = 0; v < V; v++) {
      for (int c = 0; c < C; c++) {
        double g = 0;
        for (int n = 0; n < B * T; n++) {
          g += (double) hot[OFF + n * V + v] * dout[OFF + n * C + c];
        }
        assertThat((double) dwte[OFF + v * C + c]).as("dwte[%d,%d]", v, c)
            .isCloseTo(g, org.assertj.core.api.Assertions.within(1e-6 * Math.max(1, Math.abs(g))));
      }
    }
    assertThat(dwte[OFF + tok[OFF] * C]).isNotZero();
  }

  @Test
  void backwardAccumulates() {
    float[] dout = Bufs.asDout(Bufs.weights(B * T * C, rnd));
    float[] dwte = Bufs.output(V * C), dwpe = Bufs.output(MAXT * C);
    GradCheck.assertAccumulates(() -> Encoder.backward(dwte, OFF, dwpe, OFF, dout, OFF, tok, OFF, B, T, C, V),
        new float[][] {dwte, dwpe}, new int[] {V * C, MAXT * C});
  }

  @Test
  void rejectsBadArguments() {
    tok[OFF + 3] = V;
    assertThatThrownBy(this::forward).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp[3]");
    tok[OFF + 3] = 0;
    assertThatThrownBy(() -> Encoder.forward(out, OFF, tok, OFF, wte, OFF, wpe, OFF, B, 8, C, V))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out");
    assertThatThrownBy(() -> Encoder.forward(out, OFF, tok, OFF, wte, OFF, new float[C * (T - 1)], 0, B, T, C, V))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("wpe");
    assertThatThrownBy(() -> Encoder.backward(wte, OFF, wpe, OFF, out, OFF, tok, OFF, B, T, 0, V))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("C");
  }
}
