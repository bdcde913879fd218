package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@link AdamWLanes#update} gives the bits of {@link AdamW#update} (parameters and both moments, over several steps
 * from random moments, with the decay switch on and off, a clipping scale, NaN / Infinity in a few gradients), for
 * sizes below, at and past the lane count; and one step agrees with the update in float64.
 */
class AdamWLanesTest {
  @ParameterizedTest(name = "n={0}")
  @ValueSource(ints = {0, 1, 7, 15, 16, 17, 33, 1000, 4099})
  void hasTheScalarKernelsBits(int n) {
    long seed = System.nanoTime();
    System.out.println("adamw lanes n=" + n + ": seed " + seed);
    Random rnd = new Random(seed);
    float[] p = gauss(rnd, n, 1), g = gauss(rnd, n, 1), m = gauss(rnd, n, 0.1f), v = gauss(rnd, n, 0.1f);
    byte[] decay = new byte[n];
    for (int i = 0; i < n; i++) {
      v[i] = Math.abs(v[i]);
      decay[i] = (byte) rnd.nextInt(2);
    }
    if (n > 10) {
      g[3] = Float.NaN;
      g[n - 2] = Float.POSITIVE_INFINITY;
    }
    float[] pL = p.clone(), mL = m.clone(), vL = v.clone();
    for (int step = 1; step <= 3; step++) {
      AdamW.update(p, g, m, v, decay, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.37f, step);
      AdamWLanes.update(pL, g, mL, vL, decay, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.37f, step);
    }
    for (int i = 0; i < n; i++) {
      assertThat(Float.floatToIntBits(pL[i])).as("params[%d]", i).isEqualTo(Float.floatToIntBits(p[i]));
      assertThat(Float.floatToIntBits(mL[i])).as("m[%d]", i).isEqualTo(Float.floatToIntBits(m[i]));
      assertThat(Float.floatToIntBits(vL[i])).as("v[%d]", i).isEqualTo(Float.floatToIntBits(v[i]));
    }
  }

  @Test
  void agreesWithFloat64() {
    Random rnd = new Random(11);
    int n = 101;
    float[] p = gauss(rnd, n, 1), g = gauss(rnd, n, 1), m = new float[n], v = new float[n];
    byte[] decay = new byte[n];
    for (int i = 0; i < n; i += 3) decay[i] = 1;
    float[] p0 = p.clone();
    AdamWLanes.update(p, g, m, v, decay, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, 1);
    for (int i = 0; i < n; i++) {
      double gi = g[i], mh = 0.1 * gi / 0.1, vh = 0.05 * gi * gi / 0.05;
      double want = p0[i] - 1e-2 * (mh / (Math.sqrt(vh) + 1e-8) + 0.1 * decay[i] * p0[i]);
      assertThat(Math.abs(p[i] - want)).as("params[%d]", i).isLessThan(1e-6 * (1 + Math.abs(want)));
    }
  }

  @Test
  void checksItsArgumentsLikeTheScalarWrapper() {
    float[] x = new float[4];
    assertThatThrownBy(() -> AdamWLanes.update(x, x, x, x, new byte[4], 4, 1, 0.9f, 0.9f, 0, 0, 1, 0))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("step");
    assertThatThrownBy(() -> AdamWLanes.update(x, x, x, x, new byte[3], 4, 1, 0.9f, 0.9f, 0, 0, 1, 1))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("decay 3");
  }

  static float[] gauss(Random rnd, int n, float scale) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) a[i] = (float) (rnd.nextGaussian() * scale);
    return a;
  }
}
