package dev.taco.collective.link;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The link model of {@link LinkProfile}: a measured table gives back its times, busbw is interpolated between the
 * neighbours, time never falls as the message grows, the {@code (R-1)/R} rank dependence, and the errors.
 */
class LinkProfileTest {
  private static final Logger LOG = LoggerFactory.getLogger(LinkProfileTest.class);
  private static final long MIB = 1 << 20;

  /** Busbw that climbs faster than size between 1 and 4 MiB: a straight line in log2(size) would dip in time. */
  static LinkProfile steep() {
    return LinkProfile.measured("steep", "test", 2, new long[] {MIB, 4 * MIB, 16 * MIB},
        new double[] {50e-6, 50.5e-6, 120e-6}, 2);
  }

  static LinkProfile table(int ranks) {
    return LinkProfile.measured("t", "test", ranks, new long[] {MIB, 4 * MIB, 16 * MIB, 64 * MIB},
        new double[] {90e-6, 190e-6, 640e-6, 2400e-6}, 2);
  }

  static Stream<LinkProfile> all() {
    return Stream.concat(LinkProfiles.BUILT_IN.stream().map(LinkProfiles::byName),
        Stream.of(steep(), table(2), table(8), LinkProfiles.byName("50,12.5")));
  }

  @Test
  void measuredTableGivesBackItsTimesAtItsRankCount() {
    for (int ranks : new int[] {2, 3, 8}) {
      LinkProfile p = table(ranks);
      long[] bytes = {MIB, 4 * MIB, 16 * MIB, 64 * MIB};
      double[] seconds = {90e-6, 190e-6, 640e-6, 2400e-6};
      for (int i = 0; i < bytes.length; i++) {
        assertThat(p.allReduceSeconds(bytes[i], ranks)).as("R=%d, %d bytes", ranks, bytes[i])
            .isCloseTo(seconds[i], within(seconds[i] * 1e-9));
        assertThat(p.busbw(bytes[i])).isEqualTo(2.0 * (ranks - 1) / ranks * bytes[i] / seconds[i]);
      }
    }
  }

  @Test
  void aSizeMeasuredSlowerThanALargerOneCostsTheLargerOnesTime() {
    LinkProfile p = LinkProfile.measured("dip", "test", 2, new long[] {MIB, 4 * MIB, 16 * MIB},
        new double[] {300e-6, 100e-6, 200e-6}, 2);
    assertThat(p.allReduceSeconds(MIB, 2)).isCloseTo(100e-6, within(1e-15));
    assertThat(p.allReduceSeconds(2 * MIB, 2)).isCloseTo(100e-6, within(1e-15));
    assertThat(p.allReduceSeconds(4 * MIB, 2)).isCloseTo(100e-6, within(1e-15));
    assertThat(p.allReduceSeconds(16 * MIB, 2)).isCloseTo(200e-6, within(1e-15));
  }

  @Test
  void busbwBetweenTwoPointsLiesBetweenTheirsAndIsLinearInLog2Size() {
    LinkProfile p = table(2);
    long[] bytes = {MIB, 4 * MIB, 16 * MIB, 64 * MIB};
    for (int i = 0; i + 1 < bytes.length; i++) {
      double lo = p.busbw(bytes[i]);
      double hi = p.busbw(bytes[i + 1]);
      for (long n = bytes[i] + 1; n < bytes[i + 1]; n += (bytes[i + 1] - bytes[i]) / 97) {
        assertThat(p.busbw(n)).as("%d bytes", n).isBetween(Math.min(lo, hi), Math.max(lo, hi));
        assertThat(p.phaseSeconds(n, 2)).isBetween(p.phaseSeconds(bytes[i], 2), p.phaseSeconds(bytes[i + 1], 2));
      }
    }
    // 2 MiB is halfway between 1 and 4 MiB in log2(size); this table climbs slowly enough not to be clamped
    assertThat(p.busbw(2 * MIB)).isCloseTo((p.busbw(MIB) + p.busbw(4 * MIB)) / 2, within(1e-3));
  }

  @Test
  void aboveTheTableBusbwStaysBelowItTheTimeStays() {
    LinkProfile p = table(2);
    assertThat(p.busbw(1L << 40)).isEqualTo(p.busbw(64 * MIB));
    assertThat(p.phaseSeconds(128 * MIB, 2)).isCloseTo(2 * p.phaseSeconds(64 * MIB, 2), within(1e-15));
    for (long n : new long[] {1, 7, 4096, MIB - 1}) {
      assertThat(p.phaseSeconds(n, 4)).as("%d bytes", n).isCloseTo(p.phaseSeconds(MIB, 4), within(1e-15));
    }
  }

  @Test
  void timeNeverFallsAsTheMessageGrows() {
    long seed = System.nanoTime();
    LOG.info("seed {}", seed);
    SplittableRandom rnd = new SplittableRandom(seed);
    List<Long> sizes = new ArrayList<>();
    for (double n = 1; n < 1L << 36; n *= 1.003) sizes.add((long) n);
    for (int k = 0; k <= 36; k++) {
      for (long d = -2; d <= 2; d++) sizes.add((1L << k) + d);
    }
    for (int k = 0; k < 2000; k++) sizes.add(rnd.nextLong(1, 1L << 36));
    List<Long> sorted = sizes.stream().filter(n -> n >= 0).sorted().distinct().toList();
    all().forEach(p -> {
      for (int ranks : new int[] {2, 4, 8}) {
        double before = 0;
        for (long n : sorted) {
          double t = p.phaseSeconds(n, ranks);
          // up to rounding: where the time is flat, n / busbw(n) may wobble by an ulp
          assertThat(t).as("seed %d, %s at R=%d, %d bytes", seed, p.name(), ranks, n)
              .isGreaterThanOrEqualTo(before * (1 - 1e-12));
          before = t;
        }
      }
    });
  }

  @Test
  void thePhaseTimeScalesWithRMinusOneOverR() {
    LinkProfile p = table(2);
    long n = 10 * MIB;
    double two = p.phaseSeconds(n, 2);
    for (int ranks : new int[] {3, 4, 8, 64}) {
      assertThat(p.phaseSeconds(n, ranks)).as("R=%d", ranks)
          .isCloseTo(two * 2 * (ranks - 1) / ranks, within(two * 1e-12));
    }
    assertThat(p.phaseSeconds(n, 1)).isZero();
    assertThat(p.phaseSeconds(0, 8)).isZero();
    assertThat(p.allReduceSeconds(n, 4)).isEqualTo(2 * p.phaseSeconds(n, 4));

    LinkProfile c = LinkProfile.constant("c", "test", 100e9, 5e-6, 2);
    assertThat(c.phaseSeconds(1_000_000_000L, 4)).isCloseTo(0.75 * 1e9 / 100e9 + 5e-6, within(1e-15));
    assertThat(c.phaseSeconds(1_000_000_000L, 1)).isZero();
  }

  @Test
  void badArgumentsAreRefusedNamingTheProblem() {
    long[] two = {MIB, 2 * MIB};
    assertThatThrownBy(() -> LinkProfile.measured("x", "s", 1, two, new double[] {1, 2}, 2))
        .hasMessage("x: measured at 1 rank(s); need >= 2");
    assertThatThrownBy(() -> LinkProfile.measured("x", "s", 2, new long[] {2 * MIB, MIB}, new double[] {1, 2}, 2))
        .hasMessageContaining("strictly increasing, got 1048576 bytes after 2097152");
    assertThatThrownBy(() -> LinkProfile.measured("x", "s", 2, two, new double[] {1}, 2))
        .hasMessageContaining("2 sizes and 1 times");
    assertThatThrownBy(() -> LinkProfile.measured("x", "s", 2, two, new double[] {1, Double.NaN}, 2))
        .hasMessageContaining("time NaN s at 2097152 bytes is not positive");
    assertThatThrownBy(() -> LinkProfile.measured("x", "s", 2, two, new double[] {0, 1}, 2))
        .hasMessageContaining("time 0.0 s at 1048576 bytes");
    assertThatThrownBy(() -> LinkProfile.constant(" ", "s", 1e9, 0, 2)).hasMessage("a link profile needs a name");
    assertThatThrownBy(() -> LinkProfile.constant("x", "s", 0, 0, 2)).hasMessageContaining("busbw 0.0 B/s");
    assertThatThrownBy(() -> LinkProfile.constant("x", "s", 1e9, -1e-6, 2)).hasMessageContaining("latency");
    assertThatThrownBy(() -> LinkProfile.constant("x", "s", 1e9, 0, -1)).hasMessage("x: sms -1 is negative");
    LinkProfile p = table(2);
    assertThatThrownBy(() -> p.busbw(0)).hasMessage("busbw of a 0-byte message");
    assertThatThrownBy(() -> p.phaseSeconds(-1, 2)).hasMessage("a phase of -1 bytes");
    assertThatThrownBy(() -> p.phaseSeconds(1, 0)).hasMessage("a phase over 0 ranks");
  }
}
