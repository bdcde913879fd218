package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

/** {@link AdamW}: the update against the formula in float64, the kernel's offsets, the wrapper's checks. */
class AdamWTest {
  static final float LR = 1e-2f, B1 = 0.9f, B2 = 0.95f, EPS = 1e-8f, WD = 0.1f, SCALE = 0.5f;

  @Test
  void updateFollowsTheFormula() {
    float[] p = {1f, -2f, 0.5f};
    float[] g = {0.3f, -0.1f, 2f};
    float[] m = {0.01f, 0f, -0.2f};
    float[] v = {0.001f, 0f, 0.3f};
    byte[] decay = {1, 0, 1};
    float[] p0 = p.clone(), m0 = m.clone(), v0 = v.clone();
    int step = 3;
    AdamW.update(p, g, m, v, decay, 3, LR, B1, B2, EPS, WD, SCALE, step);
    for (int i = 0; i < 3; i++) {
      double gi = (double) g[i] * SCALE;
      double mi = B1 * m0[i] + (1 - B1) * gi;
      double vi = B2 * v0[i] + (1 - B2) * gi * gi;
      double mhat = mi / (1 - Math.pow(B1, step));
      double vhat = vi / (1 - Math.pow(B2, step));
      double pi = p0[i] - LR * (mhat / (Math.sqrt(vhat) + EPS) + WD * decay[i] * p0[i]);
      assertThat((double) m[i]).isCloseTo(mi, within(1e-6 * (1 + Math.abs(mi))));
      assertThat((double) v[i]).isCloseTo(vi, within(1e-6 * (1 + Math.abs(vi))));
      assertThat((double) p[i]).isCloseTo(pi, within(1e-6 * (1 + Math.abs(pi))));
    }
  }

  @Test
  void kernelOffsetsAddressEachArray() {
    float[] p = {1f, -2f};
    float[] g = {0.3f, -0.1f};
    float[] m = new float[2], v = new float[2];
    byte[] decay = {1, 1};
    AdamW.update(p, g, m, v, decay, 2, LR, B1, B2, EPS, WD, SCALE, 1);
    float[] p2 = {9f, 1f, -2f}, g2 = {9f, 9f, 0.3f, -0.1f}, m2 = new float[3], v2 = new float[4];
    byte[] d2 = {0, 1, 1};
    AdamW.adamwUpdate(p2, 1, g2, 2, m2, 1, v2, 2, d2, 1, 2, LR, B1, B2, EPS, WD, SCALE, 1f - B1, 1f - B2);
    assertThat(new float[] {p2[1], p2[2]}).containsExactly(p);
    assertThat(new float[] {m2[1], m2[2]}).containsExactly(m);
    assertThat(new float[] {v2[2], v2[3]}).containsExactly(v);
    assertThat(p2[0]).isEqualTo(9f);
  }

  @Test
  void rejectsBadArguments() {
    float[] a = new float[2];
    assertThatThrownBy(() -> AdamW.update(a, a, a, new float[1], new byte[2], 2, LR, B1, B2, EPS, WD, 1f, 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("v 1");
    assertThatThrownBy(() -> AdamW.update(a, a, a, a, new byte[2], 2, LR, B1, B2, EPS, WD, 1f, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("step");
  }
}
