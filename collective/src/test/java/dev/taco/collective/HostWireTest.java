package dev.taco.collective;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.taco.codec.Codecs;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** The host wire's layouts and plan validation. */
class HostWireTest {
  static final int ROWS = 12, COLS = 256;

  static float[] random(long seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    float[] x = new float[ROWS * COLS];
    for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
    return x;
  }

  @Test
  void everyWireLayoutRoundTripsAndMovesWhatItSays() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    float[] x = random(seed);
    int[] perm = new int[COLS];
    for (int j = 0; j < COLS; j++) perm[j] = (j * 7919) % COLS;
    Plan base = Plan.of(Codecs.byName("taco"));
    try (LocalCommunicator comm = LocalGroup.create(1).get(0)) {
      HostWire w = new HostWire(comm);
      for (Plan plan : new Plan[] {base.permuted(perm), base.tokenAxis()}) {
        float[] wire = new float[x.length], back = new float[x.length];
        w.toWire(plan, x, ROWS, COLS, wire);
        assertThat(wire).as(plan.describe() + " seed " + seed).isNotEqualTo(x);
        w.fromWire(plan, wire, ROWS, COLS, back);
        assertThat(back).as(plan.describe() + " seed " + seed).isEqualTo(x);
      }
      float[] t = new float[x.length];
      w.toWire(base.tokenAxis(), x, ROWS, COLS, t);
      assertThat(t[5 * ROWS + 3]).isEqualTo(x[3 * COLS + 5]);
      float[] p = new float[x.length];
      w.toWire(base.permuted(perm), x, ROWS, COLS, p);
      assertThat(p[2 * COLS + 9]).isEqualTo(x[2 * COLS + perm[9]]);
    }
  }

  @Test
  void plansValidateTheirPermutation() {
    Plan taco = Plan.of(Codecs.byName("taco"));
    assertThatThrownBy(() -> taco.permuted(new int[] {0, 2, 2})).hasMessageContaining("not a permutation");
    assertThatThrownBy(() -> new Plan(null, WireLayout.PERMUTED, null)).hasMessageContaining("permuted layout only");
    assertThat(taco.permuted(new int[] {1, 0})).isEqualTo(taco.permuted(new int[] {1, 0}));
    assertThat(Plan.EXACT.describe()).isEqualTo("fp32 in-order");
  }
}
