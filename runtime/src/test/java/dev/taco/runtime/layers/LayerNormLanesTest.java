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
 * {@link LayerNormLanes} gives the bits of {@link LayerNorm}'s kernels: out, mean, rstd; dinp, dweight, dbias
 * accumulated onto random values; for position counts below, at and past a whole block of lanes (the rest through the
 * scalar kernel), channel counts below, at and past the lane count, a large mean against a small spread, and NaN /
 * Infinity in a few positions; and agrees with a float64 LayerNorm and its gradient.
 */
class LayerNormLanesTest {
  @ParameterizedTest(name = "B={0} T={1} C={2}")
  @CsvSource({"1,1,1", "1,3,5", "1,16,16", "2,9,17", "3,17,40", "2,20,3", "8,128,128"})
  void forwardAndBackwardHaveTheKernelsBits(int B, int T, int C) {
    long seed = LanesAssert.seed("layernorm lanes B=" + B + " T=" + T + " C=" + C);
    compare(seed, B, T, C, 0, 0.0, true);
  }

  @ParameterizedTest(name = "specials, B={0} T={1} C={2}")
  @CsvSource({"2,16,8", "1,40,33"})
  void nanAndInfinityGiveTheKernelsBitsToo(int B, int T, int C) {
    compare(LanesAssert.seed("layernorm lanes specials"), B, T, C, 3, 0.0, false);
  }

  @Test
  void largeMeanAgainstSmallSpreadGivesTheKernelsBits() {
    compare(LanesAssert.seed("layernorm lanes offset"), 2, 16, 48, 0, 1000.0, true);
  }

  static void compare(long seed, int B, int T, int C, int specials, double offset, boolean reference) {
    Random rnd = new Random(seed);
    int n = B * T * C, bt = B * T;
    float[] inp = LanesAssert.inputWithSpecials(n, rnd, 1.0, specials);
    for (int i = 0; i < n; i++) inp[OFF + i] += (float) offset;
    float[] w = Bufs.input(C, rnd, 1.0), b = Bufs.input(C, rnd, 1.0), dout = Bufs.input(n, rnd, 1.0);
    float[] out = Bufs.output(n), mean = Bufs.output(bt), rstd = Bufs.output(bt);
    float[] outL = Bufs.output(n), meanL = Bufs.output(bt), rstdL = Bufs.output(bt);
    LayerNorm.forward(out, OFF, mean, OFF, rstd, OFF, inp, OFF, w, OFF, b, OFF, B, T, C);
    LayerNormLanes.forward(outL, OFF, meanL, OFF, rstdL, OFF, inp, OFF, w, OFF, b, OFF, B, T, C);
    assertSameBits("out", out, outL);
    assertSameBits("mean", mean, meanL);
    assertSameBits("rstd", rstd, rstdL);
    Bufs.assertPadsIntact("out", outL, n);

    float[] dinp = Bufs.input(n, rnd, 1.0), dw = Bufs.input(C, rnd, 1.0), db = Bufs.input(C, rnd, 1.0);
    float[] dinp0 = dinp.clone(), dw0 = dw.clone(), db0 = db.clone();
    float[] dinpL = dinp.clone(), dwL = dw.clone(), dbL = db.clone();
    LayerNorm.backward(dinp, OFF, dw, OFF, db, OFF, dout, OFF, inp, OFF, w, OFF, mean, OFF, rstd, OFF, B, T, C);
    LayerNormLanes.backward(dinpL, OFF, dwL, OFF, dbL, OFF, dout, OFF, inp, OFF, w, OFF, meanL, OFF, rstdL, OFF,
        B, T, C);
    assertSameBits("dinp", dinp, dinpL);
    assertSameBits("dweight", dw, dwL);
    assertSameBits("dbias", db, dbL);
    if (!reference) return;

    // float64: out = (x - mean)·rstd·w + b; dinp = rstd·(g - mean(g) - norm·mean(g·norm)), g = w·dout
    double maxOut = 0, errOut = 0, maxD = 0, errD = 0;
    double[] dwRef = new double[C], dbRef = new double[C];
    for (int r = 0; r < bt; r++) {
      double m = 0, v = 0;
      for (int c = 0; c < C; c++) m += inp[OFF + r * C + c];
      m /= C;
      for (int c = 0; c < C; c++) v += Math.pow(inp[OFF + r * C + c] - m, 2);
      double rs = 1 / Math.sqrt(v / C + LayerNorm.EPS), gm = 0, gnm = 0;
      for (int c = 0; c < C; c++) {
        double norm = (inp[OFF + r * C + c] - m) * rs, g = w[OFF + c] * (double) dout[OFF + r * C + c];
        double o = norm * w[OFF + c] + b[OFF + c];
        maxOut = Math.max(maxOut, Math.abs(o));
        errOut = Math.max(errOut, Math.abs(o - outL[OFF + r * C + c]));
        gm += g / C;
        gnm += g * norm / C;
        dwRef[c] += dout[OFF + r * C + c] * norm;
        dbRef[c] += dout[OFF + r * C + c];
      }
      for (int c = 0; c < C; c++) {
        double norm = (inp[OFF + r * C + c] - m) * rs, g = w[OFF + c] * (double) dout[OFF + r * C + c];
        double d = rs * (g - gm - norm * gnm);
        maxD = Math.max(maxD, Math.abs(d));
        errD = Math.max(errD, Math.abs(d - ((double) dinpL[OFF + r * C + c] - dinp0[OFF + r * C + c])));
      }
    }
    // a large mean loses log2(1000) ≈ 10 bits of the inputs' 24 in float: the bound scales with it
    double rel = offset > 0 ? 1e-3 : 1e-5;
    assertThat(errOut).as("out against float64").isLessThanOrEqualTo(rel * maxOut);
    assertThat(errD).as("dinp against float64").isLessThanOrEqualTo(rel * maxD + 1e-6);
    for (int c = 0; c < C; c++) {
      assertThat(Math.abs(dwL[OFF + c] - dw0[OFF + c] - dwRef[c])).as("dweight[%d]", c)
          .isLessThanOrEqualTo(rel * Math.sqrt(bt) + 1e-5 * bt);
      assertThat(Math.abs(dbL[OFF + c] - db0[OFF + c] - dbRef[c])).as("dbias[%d]", c).isLessThanOrEqualTo(1e-5 * bt);
    }
  }

  @Test
  void checksItsArgumentsLikeTheScalarWrapper() {
    float[] x = new float[16], s = new float[2];
    assertThatThrownBy(() -> LayerNormLanes.forward(x, 0, s, 0, s, 0, x, 0, x, 0, x, 0, 1, 2, 9))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out");
    assertThatThrownBy(() -> LayerNormLanes.backward(x, 0, x, 0, x, 0, x, 0, x, 0, x, 0, s, 0, s, 0, 1, 2, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("C");
  }
}
