package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import java.util.function.DoubleSupplier;
import org.junit.jupiter.api.Test;

class ResidualTest {
  static final int N = 2 * 5 * 8;

  final Random rnd = new Random(23);
  final float[] a = Bufs.input(N, rnd, 1.0);
  final float[] b = Bufs.input(N, rnd, 1.0);
  final float[] out = Bufs.output(N);

  @Test
  void forwardAdds() {
    Residual.forward(out, OFF, a, OFF, b, OFF, N);
    for (int i = 0; i < N; i++) {
      assertThat(out[OFF + i]).isEqualTo(a[OFF + i] + b[OFF + i]);
    }
    Bufs.assertPadsIntact("out", out, N);
  }

  @Test
  void theFourWideGpuFormGivesTheSameBits() {
    // residualBiasForward4 (CudaOps when C and the offsets are multiples of 4): bias column 4g % C, same operations
    int rows = 7, c = 12, n = rows * c, at = 8; // offsets multiples of 4, NaN around the spans
    float[] av = frame(n, at), bv = frame(n, at), bias = frame(c, 4);
    for (int i = 0; i < n; i++) {
      av[at + i] = (float) rnd.nextGaussian();
      bv[at + i] = (float) rnd.nextGaussian();
    }
    for (int i = 0; i < c; i++) bias[4 + i] = (float) rnd.nextGaussian();
    float[] want = frame(n, at), got = frame(n, at);
    Residual.residualBiasForward(want, at, av, at, bv, at, bias, 4, rows, c);
    Residual.residualBiasForward4(got, at, av, at, bv, at, bias, 4, c, n / 4);
    assertThat(got).isEqualTo(want); // NaN frames equal too: nothing written outside
    assertThat(want[at] != 0 && Float.isFinite(want[at + n - 1])).isTrue();
  }

  /** {@code n} zeros at {@code at} of an array framed by {@code at} NaNs on either side. */
  private static float[] frame(int n, int at) {
    float[] f = new float[n + 2 * at];
    java.util.Arrays.fill(f, Float.NaN);
    java.util.Arrays.fill(f, at, at + n, 0f);
    return f;
  }

  @Test
  void forwardBiasIsAddBiasThenForwardBitForBitAndLeavesBUnchanged() {
    int rows = 2 * 5, c = N / rows;
    float[] bias = Bufs.input(c, rnd, 1.0), b0 = b.clone();
    float[] fused = Bufs.output(N);
    Residual.forwardBias(fused, OFF, a, OFF, b, OFF, bias, OFF, rows, c);
    assertThat(b).as("b unchanged").isEqualTo(b0);
    float[] biased = b.clone();
    Matmul.addBias(biased, OFF, bias, OFF, rows, c);
    Residual.forward(out, OFF, a, OFF, biased, OFF, N);
    for (int i = 0; i < N; i++) {
      assertThat(Float.floatToRawIntBits(fused[OFF + i])).as("element %d", i)
          .isEqualTo(Float.floatToRawIntBits(out[OFF + i]));
      assertThat((double) fused[OFF + i]).isCloseTo((double) a[OFF + i] + b[OFF + i] + bias[OFF + i % c],
          org.assertj.core.api.Assertions.within(1e-5 * (1 + Math.abs(fused[OFF + i]))));
    }
    Bufs.assertPadsIntact("out", fused, N);
    org.assertj.core.api.Assertions.assertThatThrownBy(
        () -> Residual.forwardBias(fused, OFF, a, OFF, b, OFF, new float[c - 1], 0, rows, c))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("bias");
    org.assertj.core.api.Assertions.assertThatThrownBy(
        () -> Residual.forwardBias(fused, OFF, a, OFF, b, OFF, bias, OFF, 0, c))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("rows");
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    double[] r = Bufs.weights(N, rnd);
    float[] da = Bufs.output(N), db = Bufs.output(N);
    Residual.backward(da, OFF, db, OFF, Bufs.asDout(r), OFF, N);
    DoubleSupplier loss = () -> {
      Residual.forward(out, OFF, a, OFF, b, OFF, N);
      return Bufs.dot(out, r);
    };
    GradCheck.check("da", a, da, N, loss);
    GradCheck.check("db", b, db, N, loss);
  }

  @Test
  void backwardAccumulates() {
    float[] dout = Bufs.asDout(Bufs.weights(N, rnd));
    float[] da = Bufs.output(N), db = Bufs.output(N);
    GradCheck.assertAccumulates(() -> Residual.backward(da, OFF, db, OFF, dout, OFF, N), new float[][] {da, db},
        new int[] {N, N});
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(() -> Residual.forward(out, OFF, a, OFF, new float[3], 0, N))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("b needs");
    assertThatThrownBy(() -> Residual.backward(a, OFF, null, 0, out, OFF, N))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("db");
  }
}
