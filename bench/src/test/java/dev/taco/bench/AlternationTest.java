package dev.taco.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Path;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The shared parts of the alternated benchmarks: arguments, the baseline's class loader, quartiles. */
class AlternationTest {

  @Test
  void argumentsOverrideDefaultsAndNeedABaseline() {
    Map<String, String> a = Alternation.arguments(new String[] {"baseline=x.jar", "rounds=7"},
        Map.of("rounds", "40", "slice", "20"));
    assertThat(a).containsEntry("rounds", "7").containsEntry("slice", "20").containsEntry("baseline", "x.jar");
    assertThatThrownBy(() -> Alternation.arguments(new String[] {"rounds=7"}, Map.of("rounds", "40")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("baseline=CLASSPATH");
    assertThatThrownBy(() -> Alternation.arguments(new String[] {"baseline=x", "round=7"}, Map.of("rounds", "40")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'round=7'");
    assertThatThrownBy(() -> Alternation.arguments(new String[] {"baseline"}, Map.of("rounds", "40")))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("'baseline'");
  }

  /** The baseline's loader sees its own class path and none of this build's classes. */
  @Test
  void theBaselineLoaderIsIsolatedAndNamesAMissingEntry(@TempDir Path dir) throws Exception {
    ClassLoader l = Alternation.baseline(dir.toString());
    assertThatThrownBy(() -> l.loadClass(Alternation.class.getName())).isInstanceOf(ClassNotFoundException.class);
    assertThat(l.loadClass("java.lang.String")).isSameAs(String.class);
    Path missing = dir.resolve("nothing.jar");
    assertThatThrownBy(() -> Alternation.baseline(dir + java.io.File.pathSeparator + missing))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining(missing.toString());
  }

  /** Quartiles against sorting by hand, on fresh random values of odd and even counts. */
  @Test
  void quartilesAreTheSortedRanks() {
    long seed = Long.getLong("taco.seed", new SplittableRandom().nextLong());
    SplittableRandom r = new SplittableRandom(seed);
    for (int n : new int[] {1, 2, 5, 40, 41}) {
      double[] v = r.doubles(n, -5, 5).toArray();
      double[] s = v.clone();
      java.util.Arrays.sort(s);
      assertThat(Alternation.quartiles(v)).as("n %d, seed %d (-Dtaco.seed)", n, seed).containsExactly(s[(n - 1) / 4],
          s[(n - 1) / 2], s[3 * (n - 1) / 4]);
    }
  }
}
