package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static dev.taco.runtime.layers.LanesAssert.assertSameBits;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * {@link EncoderLanes} gives the bits of {@link Encoder}'s kernels: out; dwte and dwpe accumulated onto random values
 * with repeated tokens (the order of a row's additions counts), channel counts below, at and past the lane count, NaN
 * in the gradient. (Each is one float add of the inputs, so the float64 sum within half an ulp per add.)
 */
class EncoderLanesTest {
  @ParameterizedTest(name = "B={0} T={1} C={2} V={3}")
  @CsvSource({"1,1,1,1", "2,3,5,4", "2,7,16,3", "3,9,17,256", "8,128,128,256"})
  void forwardAndBackwardHaveTheKernelsBits(int B, int T, int C, int V) {
    long seed = LanesAssert.seed("encoder lanes B=" + B + " T=" + T + " C=" + C + " V=" + V);
    Random rnd = new Random(seed);
    int[] ids = Bufs.tokens(B * T, rnd, V);
    float[] wte = Bufs.input(V * C, rnd, 1.0), wpe = Bufs.input(T * C, rnd, 1.0);
    float[] out = Bufs.output(B * T * C), outL = Bufs.output(B * T * C);
    Encoder.forward(out, OFF, ids, OFF, wte, OFF, wpe, OFF, B, T, C, V);
    EncoderLanes.forward(outL, OFF, ids, OFF, wte, OFF, wpe, OFF, B, T, C, V);
    assertSameBits("out", out, outL);
    Bufs.assertPadsIntact("out", outL, B * T * C);

    float[] dout = LanesAssert.inputWithSpecials(B * T * C, rnd, 1.0, 1);
    float[] dwte = Bufs.input(V * C, rnd, 1.0), dwpe = Bufs.input(T * C, rnd, 1.0);
    float[] dwteL = dwte.clone(), dwpeL = dwpe.clone();
    Encoder.backward(dwte, OFF, dwpe, OFF, dout, OFF, ids, OFF, B, T, C, V);
    EncoderLanes.backward(dwteL, OFF, dwpeL, OFF, dout, OFF, ids, OFF, B, T, C, V);
    assertSameBits("dwte", dwte, dwteL);
    assertSameBits("dwpe", dwpe, dwpeL);
  }

  @Test
  void checksIdsLikeTheScalarWrapper() {
    float[] x = new float[64];
    int[] bad = {0, 7};
    assertThatThrownBy(() -> EncoderLanes.forward(x, 0, bad, 0, x, 0, x, 0, 1, 2, 4, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp");
    assertThatThrownBy(() -> EncoderLanes.backward(x, 0, x, 0, x, 0, bad, 0, 1, 2, 4, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("inp");
  }
}
