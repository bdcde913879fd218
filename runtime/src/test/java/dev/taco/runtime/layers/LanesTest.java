package dev.taco.runtime.layers;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;
import jdk.incubator.vector.FloatVector;
import org.junit.jupiter.api.Test;

/**
 * {@link Lanes#exp} gives the bits of {@code (float) Math.exp} and {@link Lanes#inverseSqrt} those of
 * {@code (float) (1.0 / Math.sqrt)}, on random floats from the whole range (random bit patterns), a dense sample of the
 * range where exp is neither 0 nor Infinity, and the special values. (An exhaustive run over every float in [-104, 89],
 * 2.2·10⁹ of them, found no difference for exp; too slow for the suite.)
 */
class LanesTest {
  static final float[] SPECIALS = {Float.NaN, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, 0f, -0f,
      Float.MIN_VALUE, -Float.MIN_VALUE, Float.MIN_NORMAL, Float.MAX_VALUE, -Float.MAX_VALUE, 88.72284f, 88.72285f,
      -87.33655f, -103.97208f, -103.972084f, 1f, -1f};

  @Test
  void expHasTheBitsOfMathExp() {
    long seed = LanesAssert.seed("lanes exp");
    SplittableRandom rnd = new SplittableRandom(seed);
    float[] x = new float[Lanes.L], y = new float[Lanes.L];
    int checked = 0;
    for (int round = 0; round < 200_000; round++) {
      for (int k = 0; k < Lanes.L; k++) {
        x[k] = switch (round % 3) {
          case 0 -> Float.intBitsToFloat(rnd.nextInt()); // anywhere, NaNs included
          case 1 -> (float) rnd.nextDouble(-104, 89); // where exp is a normal or subnormal float
          default -> SPECIALS[rnd.nextInt(SPECIALS.length)];
        };
      }
      Lanes.exp(FloatVector.fromArray(Lanes.S, x, 0)).intoArray(y, 0);
      for (int k = 0; k < Lanes.L; k++) {
        float want = (float) Math.exp(x[k]);
        assertThat(Float.floatToIntBits(y[k])).as("exp(%s) = %s, lanes %s", x[k], want, y[k])
            .isEqualTo(Float.floatToIntBits(want));
        checked++;
      }
    }
    assertThat(checked).isEqualTo(200_000 * Lanes.L);
  }

  @Test
  void inverseSqrtHasTheBitsOfTheDoubleFormula() {
    long seed = LanesAssert.seed("lanes inverseSqrt");
    SplittableRandom rnd = new SplittableRandom(seed);
    float[] x = new float[Lanes.L], y = new float[Lanes.L];
    for (int round = 0; round < 100_000; round++) {
      for (int k = 0; k < Lanes.L; k++) {
        x[k] = round % 2 == 0 ? Float.intBitsToFloat(rnd.nextInt()) : SPECIALS[rnd.nextInt(SPECIALS.length)];
      }
      Lanes.inverseSqrt(FloatVector.fromArray(Lanes.S, x, 0)).intoArray(y, 0);
      for (int k = 0; k < Lanes.L; k++) {
        float want = (float) (1.0 / Math.sqrt(x[k]));
        assertThat(Float.floatToIntBits(y[k])).as("1/sqrt(%s)", x[k]).isEqualTo(Float.floatToIntBits(want));
      }
    }
  }

  @Test
  void roundUpGivesTheNextMultipleOfTheLanes() {
    assertThat(Lanes.roundUp(1)).isEqualTo(Lanes.L);
    assertThat(Lanes.roundUp(Lanes.L)).isEqualTo(Lanes.L);
    assertThat(Lanes.roundUp(Lanes.L + 1)).isEqualTo(2 * Lanes.L);
  }
}
