package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static dev.taco.runtime.layers.LanesAssert.assertSameBits;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link GeluLanes} gives the bits of {@link Gelu}'s kernels (the backward accumulating onto random values), on sizes
 * below, at and past the lane count, with NaN, ±Infinity, ±0 and huge values mixed in; and agrees with float64 GELU and
 * its derivative within a few float roundings of the tanh form (its {@code 1 − 2/(e + 1)} loses relative precision
 * near 0, so the bound is absolute, scaled by |x|).
 */
class GeluLanesTest {
  @ParameterizedTest(name = "N={0}")
  @ValueSource(ints = {1, 3, 7, 8, 15, 16, 17, 31, 33, 100, 1000, 262144})
  void forwardAndBackwardHaveTheKernelsBits(int n) {
    long seed = LanesAssert.seed("gelu lanes N=" + n);
    Random rnd = new Random(seed);
    float[] x = LanesAssert.inputWithSpecials(n, rnd, 3.0, Math.max(1, n / 50));
    float[] dout = Bufs.input(n, rnd, 1.0);
    float[] out = Bufs.output(n), outL = Bufs.output(n);
    Gelu.forward(out, OFF, x, OFF, n);
    GeluLanes.forward(outL, OFF, x, OFF, n);
    assertSameBits("gelu", out, outL);
    Bufs.assertPadsIntact("out", outL, n);

    float[] dinp = Bufs.input(n, rnd, 1.0);
    float[] dinpL = dinp.clone();
    Gelu.backward(dinp, OFF, dout, OFF, x, OFF, n);
    GeluLanes.backward(dinpL, OFF, dout, OFF, x, OFF, n);
    assertSameBits("dinp", dinp, dinpL);
  }

  @ParameterizedTest(name = "N={0}")
  @ValueSource(ints = {5, 16, 999})
  void agreesWithFloat64(int n) {
    long seed = LanesAssert.seed("gelu lanes float64 N=" + n);
    Random rnd = new Random(seed);
    float[] x = Bufs.input(n, rnd, 3.0);
    float[] out = Bufs.output(n), dinp = Bufs.output(n), ones = Bufs.output(n);
    java.util.Arrays.fill(ones, OFF, OFF + n, 1f);
    GeluLanes.forward(out, OFF, x, OFF, n);
    GeluLanes.backward(dinp, OFF, ones, OFF, x, OFF, n);
    double k = Math.sqrt(2 / Math.PI);
    for (int i = 0; i < n; i++) {
      double v = x[OFF + i], u = k * (v + 0.044715 * v * v * v), th = Math.tanh(u);
      double gelu = 0.5 * v * (1 + th);
      double grad = 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * k * (1 + 3 * 0.044715 * v * v);
      assertThat(Math.abs(out[OFF + i] - gelu)).as("gelu(%s)", v).isLessThan(1e-6 * (1 + Math.abs(v)));
      assertThat(Math.abs(dinp[OFF + i] - grad)).as("gelu'(%s)", v).isLessThan(1e-6 * (1 + v * v));
    }
  }
}
