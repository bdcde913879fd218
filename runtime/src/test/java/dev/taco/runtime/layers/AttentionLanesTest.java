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
 * {@link AttentionLanes} gives the bits of {@link Attention}'s scalar kernels (forward: out and the probabilities;
 * backward: dqkv accumulated onto random values, and the dpreatt left in the scratch), and both agree with a float64
 * reference; on sizes below, at and past the lane count, odd head sizes (the masked lane tails), the default model's
 * (T = 128, HS = 32), and with NaN / Infinity in the scores.
 */
class AttentionLanesTest {
  record Case(float[] qkv, float[] dout, int B, int T, int NH, int HS) {}

  static Case random(long seed, int B, int T, int NH, int HS, int specials) {
    Random rnd = new Random(seed);
    float[] qkv = LanesAssert.inputWithSpecials(B * T * 3 * NH * HS, rnd, 1.0, specials);
    return new Case(qkv, Bufs.input(B * T * NH * HS, rnd, 1.0), B, T, NH, HS);
  }

  @ParameterizedTest(name = "B={0} T={1} NH={2} HS={3}")
  @CsvSource({"1,1,1,1", "1,2,1,3", "2,7,3,6", "1,16,1,16", "2,17,2,17", "3,33,2,8", "1,40,1,35", "2,128,2,32"})
  void forwardAndBackwardHaveTheScalarKernelsBits(int B, int T, int NH, int HS) {
    long seed = LanesAssert.seed("attention lanes B=" + B + " T=" + T + " NH=" + NH + " HS=" + HS);
    compare(random(seed, B, T, NH, HS, 0), seed, true);
  }

  @ParameterizedTest(name = "specials, T={0} HS={1}")
  @CsvSource({"5,4", "19,16", "40,33"})
  void nanAndInfinityGiveTheScalarKernelsBitsToo(int T, int HS) {
    long seed = LanesAssert.seed("attention lanes specials T=" + T + " HS=" + HS);
    compare(random(seed, 2, T, 2, HS, 3), seed, false);
  }

  /** Lanes against the kernels bit for bit; with {@code reference}, the kernels against float64 too. */
  static void compare(Case c, long seed, boolean reference) {
    int B = c.B, T = c.T, NH = c.NH, HS = c.HS, D = NH * HS;
    int nqkv = B * T * 3 * D, nout = B * T * D, natt = B * NH * T * T;
    float[] out = Bufs.output(nout), att = Bufs.output(natt);
    float[] outL = Bufs.output(nout), attL = Bufs.output(natt);
    Attention.forward(out, OFF, att, OFF, c.qkv, OFF, B, T, NH, HS);
    AttentionLanes lanes = new AttentionLanes();
    lanes.forward(outL, OFF, attL, OFF, c.qkv, OFF, B, T, NH, HS);
    assertSameBits("out", out, outL);
    assertSameBits("att", att, attL);

    Random rnd = new Random(seed + 1);
    float[] dqkv = Bufs.input(nqkv, rnd, 1.0); // random start: the order of the += counts
    for (int i = 0; i < OFF; i++) dqkv[i] = Bufs.SENTINEL;
    float[] dqkvL = dqkv.clone();
    float[] scratch = Bufs.output(natt), scratchL = Bufs.output(natt);
    float[] dqkv0 = dqkv.clone();
    Attention.backward(dqkv, OFF, scratch, OFF, c.dout, OFF, c.qkv, OFF, att, OFF, B, T, NH, HS);
    lanes.backward(dqkvL, OFF, scratchL, OFF, c.dout, OFF, c.qkv, OFF, attL, OFF, B, T, NH, HS);
    assertSameBits("dqkv", dqkv, dqkvL);
    assertSameBits("dpreatt", scratch, scratchL);
    Bufs.assertPadsIntact("att", attL, natt);
    Bufs.assertPadsIntact("dpreatt", scratchL, natt);
    if (!reference) return;

    double[][] ref = reference(c);
    assertClose("out", out, ref[0], nout, 1e-5);
    assertClose("att", att, ref[1], natt, 1e-5);
    double[] grad = new double[nqkv];
    for (int i = 0; i < nqkv; i++) grad[i] = (double) dqkv[OFF + i] - dqkv0[OFF + i];
    double[] r = ref[2];
    double max = 1e-30, err = 0;
    for (int i = 0; i < nqkv; i++) {
      max = Math.max(max, Math.abs(r[i]));
      err = Math.max(err, Math.abs(grad[i] - r[i]));
    }
    // the increments were added to O(1) values in float: ~1e-7 each
    assertThat(err).as("dqkv against float64, max |ref| %s", max).isLessThan(1e-5 * max + 1e-6);
  }

  static void assertClose(String what, float[] actual, double[] ref, int n, double rel) {
    double max = 1e-30, err = 0;
    for (int i = 0; i < n; i++) {
      max = Math.max(max, Math.abs(ref[i]));
      err = Math.max(err, Math.abs(actual[OFF + i] - ref[i]));
    }
    assertThat(err).as("%s against float64, max |ref| %s", what, max).isLessThanOrEqualTo(rel * max);
  }

  /**
   * Float64 attention: {out, att, dqkv}, with dv = Pᵀ·dout, dP = dout·vᵀ, dS = P∘(dP − rowsum(P∘dP)),
   * dq = dS·k/√HS, dk = dSᵀ·q/√HS (the formulas of {@link Attention#backward}).
   */
  static double[][] reference(Case c) {
    int B = c.B, T = c.T, NH = c.NH, HS = c.HS, D = NH * HS, C3 = 3 * D;
    double[] out = new double[B * T * D], att = new double[B * NH * T * T], d = new double[B * T * C3];
    double sc = 1 / Math.sqrt(HS);
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < NH; h++) {
        double[][] p = new double[T][T], ds = new double[T][T];
        for (int t = 0; t < T; t++) {
          double max = Double.NEGATIVE_INFINITY;
          for (int t2 = 0; t2 <= t; t2++) {
            p[t][t2] = sc * dot(c.qkv, q(b, t, h, c), c.qkv, q(b, t2, h, c) + D, HS);
            max = Math.max(max, p[t][t2]);
          }
          double sum = 0;
          for (int t2 = 0; t2 <= t; t2++) sum += p[t][t2] = Math.exp(p[t][t2] - max);
          double rowDot = 0;
          for (int t2 = 0; t2 <= t; t2++) {
            p[t][t2] /= sum;
            att[((b * NH + h) * T + t) * T + t2] = p[t][t2];
            for (int j = 0; j < HS; j++) {
              out[(b * T + t) * D + h * HS + j] += p[t][t2] * c.qkv[q(b, t2, h, c) + 2 * D + j];
            }
            ds[t][t2] = dot(c.dout, OFF + (b * T + t) * D + h * HS, c.qkv, q(b, t2, h, c) + 2 * D, HS);
            rowDot += p[t][t2] * ds[t][t2];
          }
          for (int t2 = 0; t2 <= t; t2++) ds[t][t2] = sc * p[t][t2] * (ds[t][t2] - rowDot);
        }
        for (int t = 0; t < T; t++) {
          for (int t2 = 0; t2 <= t; t2++) {
            for (int j = 0; j < HS; j++) {
              int dq = (b * T + t) * C3 + h * HS + j, dk = (b * T + t2) * C3 + D + h * HS + j;
              d[dq] += ds[t][t2] * c.qkv[q(b, t2, h, c) + D + j];
              d[dk] += ds[t][t2] * c.qkv[q(b, t, h, c) + j];
              d[dk + D] += p[t][t2] * c.dout[OFF + (b * T + t) * D + h * HS + j];
            }
          }
        }
      }
    }
    return new double[][] {out, att, d};
  }

  static int q(int b, int t, int h, Case c) {
    return OFF + (b * c.T + t) * 3 * c.NH * c.HS + h * c.HS;
  }

  static double dot(float[] a, int ao, float[] b, int bo, int n) {
    double s = 0;
    for (int j = 0; j < n; j++) s += (double) a[ao + j] * b[bo + j];
    return s;
  }

  @Test
  void checksItsArgumentsLikeTheScalarWrapper() {
    AttentionLanes lanes = new AttentionLanes();
    float[] small = new float[10];
    assertThatThrownBy(() -> lanes.forward(small, 0, small, 0, small, 0, 1, 2, 1, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("qkv needs 24");
    assertThatThrownBy(() -> lanes.backward(small, 0, small, 0, small, 0, small, 0, small, 0, 1, 0, 1, 4))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("T");
  }
}
