package dev.taco.runtime.layers;

import static dev.taco.runtime.layers.Bufs.OFF;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.Random;
import org.junit.jupiter.api.Test;

class AttentionTest {
  static final int B = 2, T = 5, NH = 2, HS = 4, D = NH * HS, C3 = 3 * D;
  static final int NQKV = B * T * C3, NOUT = B * T * D, NATT = B * NH * T * T;

  final long seed = LanesAssert.seed(getClass().getSimpleName());
  final Random rnd = new Random(seed);
  final float[] qkv = Bufs.input(NQKV, rnd, 1.0);
  final float[] out = Bufs.output(NOUT);
  final float[] att = Bufs.output(NATT);

  void forward() {
    Attention.forward(out, OFF, att, OFF, qkv, OFF, B, T, NH, HS);
  }

  /**
   * Naive double-precision reference: out[b,t,h] = sum_t2 softmax_t2(q·k/sqrt(HS)) v[t2]; the probabilities into
   * {@code attRef}, and sum_t2 p·|v[t2]| (the magnitude the float32 sum's error scales with) into {@code mag}.
   */
  static double[] reference(float[] qkv, double[] attRef, double[] mag) {
    double[] o = new double[NOUT];
    for (int b = 0; b < B; b++) {
      for (int h = 0; h < NH; h++) {
        for (int t = 0; t < T; t++) {
          double[] s = new double[t + 1];
          double max = Double.NEGATIVE_INFINITY;
          for (int t2 = 0; t2 <= t; t2++) {
            double dot = 0;
            for (int j = 0; j < HS; j++) {
              dot += (double) qkv[OFF + (b * T + t) * C3 + h * HS + j] * qkv[OFF + (b * T + t2) * C3 + D + h * HS + j];
            }
            s[t2] = dot / Math.sqrt(HS);
            max = Math.max(max, s[t2]);
          }
          double sum = 0;
          for (int t2 = 0; t2 <= t; t2++) {
            s[t2] = Math.exp(s[t2] - max);
            sum += s[t2];
          }
          for (int t2 = 0; t2 <= t; t2++) {
            double p = s[t2] / sum;
            attRef[((b * NH + h) * T + t) * T + t2] = p;
            for (int j = 0; j < HS; j++) {
              double v = qkv[OFF + (b * T + t2) * C3 + 2 * D + h * HS + j];
              o[(b * T + t) * D + h * HS + j] += p * v;
              mag[(b * T + t) * D + h * HS + j] += p * Math.abs(v);
            }
          }
        }
      }
    }
    return o;
  }

  @Test
  void forwardMatchesDoubleReference() {
    forward();
    double[] attRef = new double[NATT];
    double[] mag = new double[NOUT];
    double[] ref = reference(qkv, attRef, mag);
    // float32 scores of HS products, exp and normalisation: each probability within a few 1e-7 of itself, so the
    // output within 1e-5 of sum p·|v| (tens of float32 roundings); each probability within 1e-6 of its row's sum, 1
    for (int i = 0; i < NOUT; i++) Bufs.assertNear("out[" + i + "], seed " + seed, out[OFF + i], ref[i], mag[i], 1e-5);
    for (int i = 0; i < NATT; i++) Bufs.assertNear("att[" + i + "], seed " + seed, att[OFF + i], attRef[i], 1, 1e-6);
    Bufs.assertPadsIntact("out", out, NOUT);
    Bufs.assertPadsIntact("att", att, NATT);
  }

  @Test
  void softmaxRowsSumToOneAndAreCausal() {
    forward();
    for (int row = 0; row < B * NH * T; row++) {
      int t = row % T;
      double sum = 0;
      for (int t2 = 0; t2 < T; t2++) {
        float p = att[OFF + row * T + t2];
        if (t2 > t) {
          assertThat(p).as("masked att row %d col %d", row, t2).isZero();
        } else {
          assertThat(p).isBetween(0f, 1f);
        }
        sum += p;
      }
      assertThat(sum).as("row %d", row).isCloseTo(1.0, within(1e-6));
    }
  }

  @Test
  void outputAtTDoesNotDependOnLaterPositions() {
    forward();
    float[] before = out.clone();
    int t0 = 2;
    for (int b = 0; b < B; b++) {
      for (int t = t0 + 1; t < T; t++) {
        for (int c = 0; c < C3; c++) {
          qkv[OFF + (b * T + t) * C3 + c] += 3.0f; // change q, k and v of every later position
        }
      }
    }
    forward();
    for (int b = 0; b < B; b++) {
      for (int t = 0; t <= t0; t++) {
        for (int c = 0; c < D; c++) {
          int i = OFF + (b * T + t) * D + c;
          assertThat(out[i]).as("b=%d t=%d c=%d", b, t, c).isEqualTo(before[i]);
        }
      }
      int tLater = OFF + (b * T + t0 + 1) * D;
      assertThat(out[tLater]).isNotEqualTo(before[tLater]);
    }
  }

  @Test
  void largeScoresStayFinite() {
    for (int i = 0; i < NQKV; i++) {
      qkv[OFF + i] *= 100f; // scores up to ~1e4: exp would overflow without the max subtraction
    }
    forward();
    for (int i = 0; i < NOUT; i++) {
      assertThat(Float.isFinite(out[OFF + i])).as("out[%d] = %s", i, out[OFF + i]).isTrue();
    }
  }

  @Test
  void backwardMatchesFiniteDifferences() {
    double[] r = Bufs.weights(NOUT, rnd);
    float[] dout = Bufs.asDout(r);
    float[] dqkv = Bufs.output(NQKV);
    float[] scratch = Bufs.output(NATT);
    forward();
    Attention.backward(dqkv, OFF, scratch, OFF, dout, OFF, qkv, OFF, att, OFF, B, T, NH, HS);
    Bufs.assertPadsIntact("dqkv", dqkv, NQKV);
    Bufs.assertPadsIntact("scratch", scratch, NATT);
    GradCheck.check("dqkv", qkv, dqkv, NQKV, () -> {
      forward();
      return Bufs.dot(out, r);
    });
  }

  @Test
  void backwardAccumulates() {
    float[] dout = Bufs.asDout(Bufs.weights(NOUT, rnd));
    float[] dqkv = Bufs.output(NQKV);
    float[] scratch = Bufs.output(NATT);
    forward();
    GradCheck.assertAccumulates(
        () -> Attention.backward(dqkv, OFF, scratch, OFF, dout, OFF, qkv, OFF, att, OFF, B, T, NH, HS),
        new float[][] {dqkv}, new int[] {NQKV});
  }

  @Test
  void rejectsBadArguments() {
    assertThatThrownBy(() -> Attention.forward(out, OFF, att, OFF, qkv, OFF, B, T, 0, HS))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("NH");
    assertThatThrownBy(() -> Attention.forward(out, OFF, new float[NATT - 1], 0, qkv, OFF, B, T, NH, HS))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("att");
    assertThatThrownBy(() -> Attention.forward(out, OFF, att, OFF, qkv, OFF, B, T + 1, NH, HS))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("out");
    float[] dqkv = Bufs.output(NQKV);
    assertThatThrownBy(() -> Attention.backward(dqkv, OFF, new float[4], 0, out, OFF, qkv, OFF, att, OFF, B, T, NH, HS))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("scratch");
    assertThatThrownBy(() -> Attention.backward(dqkv, -1, att, OFF, out, OFF, qkv, OFF, att, OFF, B, T, NH, HS))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("dqkv");
  }
}
