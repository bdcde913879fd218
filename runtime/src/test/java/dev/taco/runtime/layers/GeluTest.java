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
  void theBf16FormsWriteTheFp32KernelsValuesAndTheirRoundedCopies() {
    // CudaOps' bf16 mode: one pass writes the fp32 result and the bf16 copy the next GEMM multiplies (16-byte
    // groups: the arrays here start their N elements at 8, NaN around them)
    int at = 8;
    float[] x = aligned(Arrays.copyOfRange(inp, OFF, OFF + N));
    float[] dout = aligned(Arrays.copyOfRange(Bufs.asDout(Bufs.weights(N, rnd)), OFF, OFF + N));
    float[] fwd = aligned(new float[N]);
    Gelu.geluForward(fwd, at, x, at, N);
    float[] bwd = aligned(new float[N]);
    Gelu.geluBackwardInto(bwd, at, dout, at, x, at, N);
    float[] out8 = aligned(Arrays.copyOf(x, N)); // stale values that must not survive
    float[] din8 = aligned(Arrays.copyOf(x, N));
    short[] outCopy = new short[N + 2 * at];
    short[] dinCopy = new short[N + 2 * at];
    Arrays.fill(outCopy, (short) 0x7fc1);
    Arrays.fill(dinCopy, (short) 0x7fc1);
    Gelu.geluForwardBf16x8(out8, at, outCopy, at, x, at, N / 8);
    Gelu.geluBackwardBf16x8(din8, at, dinCopy, at, dout, at, x, at, N / 8);
    for (int i = at; i < at + N; i++) {
      assertThat(out8[i]).as("out %d", i).isEqualTo(fwd[i]);
      assertThat(din8[i]).as("dinp %d", i).isEqualTo(bwd[i]);
      assertThat(outCopy[i]).as("out's copy %d", i).isEqualTo(Bf16.encode(fwd[i]));
      assertThat(dinCopy[i]).as("dinp's copy %d", i).isEqualTo(Bf16.encode(bwd[i]));
      assertThat(Float.isFinite(out8[i]) && Float.isFinite(din8[i])).isTrue();
    }
    assertThat(outCopy[at - 1]).isEqualTo((short) 0x7fc1); // nothing written outside the groups
    assertThat(dinCopy[at + N]).isEqualTo((short) 0x7fc1);
    assertThat(out8[at + N]).as("pad after").isNaN();
    assertThat(fwd[at] != 0 && bwd[at] != 0).as("non-trivial values").isTrue();
  }

  /** {@code v} at offset 8 of an array with 8 NaNs on either side. */
  private static float[] aligned(float[] v) {
    float[] a = new float[v.length + 16];
    Arrays.fill(a, Float.NaN);
    System.arraycopy(v, 0, a, 8, v.length);
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
