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
 * {@link ResidualLanes#forwardBias} gives the bits of {@link Residual#forwardBias} (one rounding per add, so the
 * float64 sum within an ulp of the inner sum and of the result), channel counts below, at and past the lane count, NaN and ±Infinity mixed in.
 */
class ResidualLanesTest {
  @ParameterizedTest(name = "rows={0} C={1}")
  @CsvSource({"1,1", "3,5", "2,16", "4,17", "7,40", "1024,128"})
  void hasTheKernelsBits(int rows, int C) {
    long seed = LanesAssert.seed("residual lanes rows=" + rows + " C=" + C);
    Random rnd = new Random(seed);
    int n = rows * C;
    float[] a = LanesAssert.inputWithSpecials(n, rnd, 1.0, 2), b = LanesAssert.inputWithSpecials(n, rnd, 1.0, 2);
    float[] bias = Bufs.input(C, rnd, 1.0);
    float[] out = Bufs.output(n), outL = Bufs.output(n);
    Residual.forwardBias(out, OFF, a, OFF, b, OFF, bias, OFF, rows, C);
    ResidualLanes.forwardBias(outL, OFF, a, OFF, b, OFF, bias, OFF, rows, C);
    assertSameBits("out", out, outL);
    Bufs.assertPadsIntact("out", outL, n);
    for (int i = 0; i < n; i++) {
      // out = a + (b + bias), one rounding per add: within half an ulp of the inner sum plus half an ulp of the
      // result of the float64 sum (the inner rounding is what remains when a cancels the inner sum, e.g. MAX_VALUE
      // against -MAX_VALUE + bias: 0, not bias)
      double inner = (double) b[OFF + i] + bias[OFF + i % C], want = a[OFF + i] + inner;
      if (Double.isFinite(want) && Math.abs(inner) <= Float.MAX_VALUE) {
        assertThat(Math.abs(outL[OFF + i] - want)).as("seed %d, element %d", seed, i)
            .isLessThanOrEqualTo(Math.ulp((float) Math.abs(inner)) + 3 * Math.ulp((float) Math.abs(want)) + 1e-6);
      }
    }
  }

  @Test
  void inPlaceOverTheFirstAddendGivesTheSameBits() {
    Random rnd = new Random(LanesAssert.seed("residual lanes in place"));
    float[] a = Bufs.input(3 * 19, rnd, 1.0), b = Bufs.input(3 * 19, rnd, 1.0), bias = Bufs.input(19, rnd, 1.0);
    float[] out = Bufs.output(3 * 19), inPlace = a.clone();
    Residual.forwardBias(out, OFF, a, OFF, b, OFF, bias, OFF, 3, 19);
    ResidualLanes.forwardBias(inPlace, OFF, inPlace, OFF, b, OFF, bias, OFF, 3, 19);
    for (int i = 0; i < 3 * 19; i++) assertThat(inPlace[OFF + i]).isEqualTo(out[OFF + i]);
  }

  @Test
  void checksItsArguments() {
    float[] x = new float[8];
    assertThatThrownBy(() -> ResidualLanes.forwardBias(x, 0, x, 0, x, 0, x, 0, 3, 3))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out");
  }
}
