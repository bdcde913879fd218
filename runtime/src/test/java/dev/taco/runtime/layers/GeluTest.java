package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import dev.taco.kernels.Bf16;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

class GeluTest {
  static final int N = 2 * 5 * 32;

  final Random rnd = new Random(19);
  final float[] inp = Bufs.input(N, rnd, 2.0);
  final float[] out = Bufs.output(N);

  @Test
  void forwardMatchesDoubleFormula() {
    Gelu.forward(out, OFF, inp, OFF, N);
    for (int i = 0; i < N; i++) {
      double x = inp[OFF + i];
      double g = 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x * x * x)));
      assertThat((double) out[OFF + i]).isCloseTo(g, within(1e-6 * (1 + Math.abs(g))));
    }
    Bufs.assertPadsIntact("out", out, N);
  }

  @Test
  void theLiteralConstantIsSqrtTwoOverPiInFloat() {
    assertThat(Float.floatToRawIntBits(Gelu.SQRT_2_OVER_PI))
        .isEqualTo(Float.floatToRawIntBits((float) Math.sqrt(2.0 / Math.PI)));
  }

  @Test
  void knownValues() {
    float[] x = {0f, 1f, -1f, 10f, -10f};
    float[] y = new float[5];
    Gelu.forward(y, 0, x, 0, 5);
    assertThat(y[0]).isZero();
    assertThat((double) y[1]).isCloseTo(0.8411920, within(1e-6)); // tanh-approx GELU(1)
    assertThat((double) y[2]).isCloseTo(-0.1588080, within(1e-6));
    assertThat(y[3]).isEqualTo(10f);
    assertThat((double) y[4]).isCloseTo(0.0, within(1e-6));
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    double[] r = Bufs.weights(N, rnd);
    float[] dinp = Bufs.output(N);
    Gelu.backward(dinp, OFF, Bufs.asDout(r), OFF, inp, OFF, N);
    Bufs.assertPadsIntact("dinp", dinp, N);
    GradCheck.check("dinp", inp, dinp, N, () -> {
      Gelu.forward(out, OFF, inp, OFF, N);
      return Bufs.dot(out, r);
    });
  }

  @Test
  void backwardAccumulates() {
    float[] dout = Bufs.asDout(Bufs.weights(N, rnd));
    float[] dinp = Bufs.output(N);
    GradCheck.assertAccumulates(() -> Gelu.backward(dinp, OFF, dout, OFF, inp, OFF, N), new float[][] {dinp},
        new int[] {N});
  }

  @Test
  void theOverwritingGpuFormEqualsTheBackwardIntoZeros() {
    // geluBackwardInto (CudaOps) overwrites whatever dinp held; the CPU zeroes and accumulates: the same floats
    float[] dout = Bufs.asDout(Bufs.weights(N, rnd));
    float[] viaZeros = Bufs.output(N);
    Gelu.backward(viaZeros, OFF, dout, OFF, inp, OFF, N);
    float[] into = Bufs.input(N, rnd, 5.0); // stale values that must not survive
    Gelu.geluBackwardInto(into, OFF, dout, OFF, inp, OFF, N);
    for (int i = 0; i < N; i++) {
      assertThat(into[OFF + i]).as("element %d", i).isEqualTo(viaZeros[OFF + i]);
      assertThat(Float.isFinite(into[OFF + i])).isTrue();
    }
    assertThat(into[OFF - 1]).as("pad before").isNaN(); // the input's NaN pads: nothing written outside
    assertThat(into[OFF + N]).as("pad after").isNaN();
    assertThat(viaZeros[OFF] != 0 || viaZeros[OFF + N - 1] != 0).as("a non-trivial gradient").isTrue();
  }

  @Test
  void theBf16FormsComputeTheFp32FormulasOnBf16ValuesAndRoundOnce() {
    // CudaOps' bf16 mode: pre, out, dout and dinp all in bf16 (16-byte groups: the arrays here start their N elements
    // at 8, sentinels around them); each result is the fp32 kernel's value on the decoded inputs, rounded once, and
    // within bf16's half-ulp (2^-9 relative) of the float64 formula on those inputs
    int at = 8;
    float[] dout = Arrays.copyOfRange(Bufs.asDout(Bufs.weights(N, rnd)), OFF, OFF + N);
    short[] pre = bf16Padded(Arrays.copyOfRange(inp, OFF, OFF + N), at);
    short[] dh = bf16Padded(dout, at);
    float[] x = new float[N];
    float[] d = new float[N];
    for (int i = 0; i < N; i++) {
      x[i] = Bf16.decode(pre[at + i]);
      d[i] = Bf16.decode(dh[at + i]);
    }
    float[] fwd = new float[N];
    Gelu.geluForward(fwd, 0, x, 0, N);
    float[] bwd = new float[N];
    Gelu.geluBackwardInto(bwd, 0, d, 0, x, 0, N);
    short[] out = sentinels(N + 2 * at);
    short[] din = sentinels(N + 2 * at);
    Gelu.geluForwardBf16(out, at, pre, at, N / 8);
    Gelu.geluBackwardBf16(din, at, dh, at, pre, at, N / 8);
    int nonZero = 0;
    for (int i = 0; i < N; i++) {
      assertThat(out[at + i]).as("out %d", i).isEqualTo(Bf16.encode(fwd[i]));
      assertThat(din[at + i]).as("dinp %d", i).isEqualTo(Bf16.encode(bwd[i]));
      double xi = x[i];
      double u = Math.sqrt(2 / Math.PI) * (xi + 0.044715 * xi * xi * xi);
      double g = 0.5 * xi * (1 + Math.tanh(u));
      double dg = (0.5 * (1 + Math.tanh(u)) + 0.5 * xi * (1 - Math.tanh(u) * Math.tanh(u)) * Math.sqrt(2 / Math.PI)
          * (1 + 3 * 0.044715 * xi * xi)) * d[i];
      assertThat((double) Bf16.decode(out[at + i])).as("out %d", i).isCloseTo(g, within(1e-5 + Math.abs(g) / 256));
      assertThat((double) Bf16.decode(din[at + i])).as("dinp %d", i).isCloseTo(dg, within(1e-5 + Math.abs(dg) / 256));
      nonZero += g != 0 && dg != 0 ? 1 : 0;
    }
    assertThat(nonZero).as("non-trivial values").isGreaterThan(N / 2);
    for (short[] a : new short[][] {out, din}) { // nothing written outside the groups
      assertThat(a[at - 1]).isEqualTo((short) 0x7fc1);
      assertThat(a[at + N]).isEqualTo((short) 0x7fc1);
    }
  }

  /** {@code v} rounded to bf16 at offset {@code at} of an array with {@code at} sentinels on either side. */
  private static short[] bf16Padded(float[] v, int at) {
    short[] a = sentinels(v.length + 2 * at);
    for (int i = 0; i < v.length; i++) {
      a[at + i] = Bf16.encode(v[i]);
    }
    return a;
  }

  private static short[] sentinels(int n) {
    short[] a = new short[n];
    Arrays.fill(a, (short) 0x7fc1);
    return a;
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(() -> Gelu.forward(out, OFF, inp, OFF, 0)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("N");
    assertThatThrownBy(() -> Gelu.backward(out, OFF, new float[N - 1], 0, inp, OFF, N))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dout");
  }
}
