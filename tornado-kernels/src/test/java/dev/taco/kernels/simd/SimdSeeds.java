package dev.taco.kernels.simd;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.SplittableRandom;

/**
 * The fresh random seed of a SIMD-versus-reference test class, printed, once the SIMD kernels are known active; the
 * system property {@code taco.seed} replays a printed one.
 */
public final class SimdSeeds {
  private SimdSeeds() {}

  /**
   * A new seed, printed with the test's name and the lane count.
   *
   * @throws AssertionError if the SIMD kernels cannot run in this JVM (the comparison would be vacuous)
   */
  public static long fresh(String test) {
    assertThat(Simd.available()).as("the SIMD kernels must be active in the test JVM").isTrue();
    String replay = System.getProperty("taco.seed");
    long seed = replay != null ? Long.parseLong(replay) : new SplittableRandom().nextLong();
    System.out.println(test + " seed " + seed + ", " + Lanes.L + " float lanes");
    return seed;
  }
}
