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
 * {@link MatmulLanes}' bias add and bias gradient give the bits of {@link Matmul#addBias} and
 * {@link Matmul#matmulBackwardBias} (onto random values), channel counts below, at and past the lane count and past
 * its 16-channel blocks, NaN / Infinity mixed in; and the gradient agrees with a float64 column sum.
 */
class MatmulLanesTest {
  @ParameterizedTest(name = "N={0} OC={1}")
  @CsvSource({"1,1", "3,5", "2,16", "5,17", "7,40", "1024,192"})
  void hasTheKernelsBits(int N, int OC) {
    long seed = LanesAssert.seed("matmul bias lanes N=" + N + " OC=" + OC);
    Random rnd = new Random(seed);
    float[] out = LanesAssert.inputWithSpecials(N * OC, rnd, 1.0, 2), bias = Bufs.input(OC, rnd, 1.0);
    float[] outL = out.clone();
    Matmul.addBias(out, OFF, bias, OFF, N, OC);
    MatmulLanes.addBias(outL, OFF, bias, OFF, N, OC);
    assertSameBits("out", out, outL);

    float[] dout = Bufs.input(N * OC, rnd, 1.0), dbias = Bufs.input(OC, rnd, 1.0);
    float[] dbias0 = dbias.clone(), dbiasL = dbias.clone();
    Matmul.matmulBackwardBias(dbias, OFF, dout, OFF, N, OC);
    MatmulLanes.backwardBias(dbiasL, OFF, dout, OFF, N, OC);
    assertSameBits("dbias", dbias, dbiasL);
    for (int c = 0; c < OC; c++) {
      double sum = 0;
      for (int r = 0; r < N; r++) sum += dout[OFF + r * OC + c];
      assertThat(Math.abs(dbiasL[OFF + c] - dbias0[OFF + c] - sum)).as("dbias[%d]", c).isLessThan(1e-6 * N + 1e-6);
    }
  }

  @Test
  void checksItsArguments() {
    float[] x = new float[6];
    assertThatThrownBy(() -> MatmulLanes.addBias(x, 0, x, 0, 2, 4)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("out");
    assertThatThrownBy(() -> MatmulLanes.backwardBias(x, 0, x, 0, 2, 4)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("dout");
  }
}
