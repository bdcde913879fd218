package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import java.util.Random;

/** Assertions and inputs shared by the tests of the lane-wise CPU paths ({@code ...LanesTest}). */
final class LanesAssert {
  private LanesAssert() {}

  /**
   * The two arrays hold the same floats bit for bit ({@link Float#floatToIntBits}: every NaN counts as the one NaN,
   * whose payload Java does not define), pads included.
   */
  static void assertSameBits(String what, float[] expected, float[] actual) {
    assertThat(actual).as(what + " length").hasSameSizeAs(expected);
    for (int i = 0; i < expected.length; i++) {
      if (Float.floatToIntBits(expected[i]) != Float.floatToIntBits(actual[i])) {
        fail("%s differs first at [%d]: scalar kernel %s (0x%08x), lanes %s (0x%08x)", what, i, expected[i],
            Float.floatToRawIntBits(expected[i]), actual[i], Float.floatToRawIntBits(actual[i]));
      }
    }
  }

  /** A new seed, printed so that a failure can be replayed. */
  static long seed(String test) {
    long seed = Long.getLong("taco.seed", System.nanoTime()); // -Dtaco.seed=N replays a printed seed
    System.out.println(test + ": seed " + seed);
    return seed;
  }

  /** Like {@link Bufs#input} but with {@code specials} of the values NaN, ±Infinity, ±0, ±Float.MAX_VALUE, tiny. */
  static float[] inputWithSpecials(int n, Random rnd, double scale, int specials) {
    float[] a = Bufs.input(n, rnd, scale);
    float[] pick = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0f, -0f, Float.MAX_VALUE,
        -Float.MAX_VALUE, Float.MIN_VALUE, -Float.MIN_NORMAL};
    for (int k = 0; k < specials; k++) {
      a[Bufs.OFF + rnd.nextInt(n)] = pick[rnd.nextInt(pick.length)];
    }
    return a;
  }
}
