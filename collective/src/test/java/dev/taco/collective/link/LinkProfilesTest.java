package dev.taco.collective.link;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The built-in link profiles against the figures docs/links.md gives for them, and {@link LinkProfiles#byName}. */
class LinkProfilesTest {
  private static final long MIB = 1 << 20;
  private static final long[] H200_BYTES = {MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB};
  // NCCL bf16 all-reduce on 2xH200, measured 2026-11-30, ms
  private static final double[] NVLINK_MS = {0.0863, 0.0699, 0.1173, 0.3007, 0.9967};
  private static final double[] NOPEER_MS = {0.0905, 0.1885, 0.6402, 2.4175, 9.3791};

  /** {@code name}'s all-reduce at 2 ranks takes {@code ms[i]} at {@code H200_BYTES[i]}, from {@code first} on. */
  static void givesBack(String name, double[] ms, int first) {
    LinkProfile p = LinkProfiles.byName(name);
    for (int i = first; i < H200_BYTES.length; i++) {
      double t = ms[i] * 1e-3;
      assertThat(p.allReduceSeconds(H200_BYTES[i], 2)).as("%s, %d bytes", name, H200_BYTES[i])
          .isCloseTo(t, within(t * 1e-9));
    }
  }

  @Test
  void h200NoPeerGivesBackEveryMeasuredTimeAtTwoRanks() {
    givesBack("h200-nopeer-2", NOPEER_MS, 0);
  }

  @Test
  void h200NvlinkGivesBackItsTimesSaveOneMibWhichCostsTheFasterFourMib() {
    givesBack("h200-nvlink-2", NVLINK_MS, 1);
    // 1 MiB was measured slower (0.0863 ms) than 4 MiB: it can always go as 4 MiB, so it costs 4 MiB's time
    double t = LinkProfiles.byName("h200-nvlink-2").allReduceSeconds(MIB, 2);
    assertThat(t).isCloseTo(0.0699e-3, within(0.0699e-3 * 1e-9));
  }

  @Test
  void constantBuiltInsHaveTheirBusbwAndNcclsRingLlLatency() {
    // baseLat 6.6 us + (R-1) hops of hwLat (Ring, LL): NVLink 0.6, PCI 1.0, NET 2.7 us
    record Expected(String name, double busbw, double latencyUs, int sms) {}
    for (Expected e : new Expected[] {new Expected("h100-nvlink-8", 370e9, 6.6 + 7 * 0.6, 32),
        new Expected("pcie5-8", 40e9, 6.6 + 7 * 1.0, 2), new Expected("ib-ndr", 50e9, 6.6 + 2.7, 2)}) {
      LinkProfile p = LinkProfiles.byName(e.name);
      assertThat(p.latencySeconds()).as(e.name).isCloseTo(e.latencyUs * 1e-6, within(1e-15));
      assertThat(p.sms()).as(e.name).isEqualTo(e.sms);
      for (long n : new long[] {1, 4096, 3 * MIB + 5, 1L << 34}) {
        assertThat(p.busbw(n)).isEqualTo(e.busbw);
      }
      assertThat(p.phaseSeconds(1L << 30, 8)).isCloseTo(7.0 / 8 * (1L << 30) / e.busbw + e.latencyUs * 1e-6,
          within(1e-15));
    }
  }

  @Test
  void measuredBuiltInsOccupyNvlinksOrPcisSms() {
    assertThat(LinkProfiles.byName("h200-nvlink-2").sms()).isEqualTo(32);
    assertThat(LinkProfiles.byName("h200-nopeer-2").sms()).isEqualTo(2);
    assertThat(LinkProfiles.byName("h200-nopeer-2").latencySeconds()).isZero();
  }

  @Test
  void infCostsNothingAndOccupiesNoSm() {
    LinkProfile p = LinkProfiles.byName("inf");
    for (long n : new long[] {0, 1, 12345, 1L << 40}) {
      for (int ranks : new int[] {1, 2, 8}) {
        assertThat(p.phaseSeconds(n, ranks)).isZero();
        assertThat(p.allReduceSeconds(n, ranks)).isZero();
      }
    }
    assertThat(p.sms()).isZero();
  }

  @Test
  void gbpsFormIsABusbwInGigabytesPerSecondAndALatencyPerPhaseInMicroseconds() {
    LinkProfile p = LinkProfiles.byName("50");
    assertThat(p.busbw(777)).isEqualTo(50e9);
    assertThat(p.phaseSeconds(1_000_000_000L, 2)).isCloseTo(0.01, within(1e-15));
    assertThat(p.name()).isEqualTo("50");
    assertThat(p.sms()).isEqualTo(2);
    LinkProfile q = LinkProfiles.byName("50,12.5");
    assertThat(q.latencySeconds()).isCloseTo(12.5e-6, within(1e-18));
    assertThat(q.phaseSeconds(1_000_000_000L, 2)).isCloseTo(0.01 + 12.5e-6, within(1e-15));
    assertThat(q.emulated()).isEqualTo("emulated link 50,12.5 (given: 50 GB/s busbw, 12.5 us a phase)");
    // beyond one PCIe Gen5 x16 slot only NVLink carries it
    assertThat(LinkProfiles.byName("370").sms()).isEqualTo(32);
    assertThat(LinkProfiles.byName(".5").busbw(1)).isEqualTo(0.5e9);
  }

  @Test
  void namesIgnoreCaseAndSurroundingBlanks() {
    assertThat(LinkProfiles.byName(" H200-NVLink-2 ").name()).isEqualTo("h200-nvlink-2");
  }

  @Test
  void theLabelNamesTheProfileAndItsSource() {
    assertThat(LinkProfiles.byName("h200-nopeer-2").emulated()).isEqualTo(
        "emulated link h200-nopeer-2 (NCCL bf16 all-reduce, 2xH200, NCCL_P2P_DISABLE=1, measured 2026-11-30)");
    assertThat(LinkProfiles.byName("h100-nvlink-8").emulated()).contains("NVIDIA/nccl-tests#212")
        .contains("10.8 us a phase");
  }

  @ParameterizedTest
  @ValueSource(strings = {"h200", "nvlink", "", "50,", "50,-1", "-5", "50 GB/s", "1e3", "Infinity", "NaN"})
  void anUnknownNameListsTheBuiltInsAndTheGbpsForm(String spec) {
    assertThatThrownBy(() -> LinkProfiles.byName(spec)).isInstanceOf(IllegalArgumentException.class)
        .hasMessage("unknown link profile '" + spec.trim() + "': known are h200-nvlink-2, h200-nopeer-2, "
            + "h100-nvlink-8, pcie5-8, ib-ndr, inf, or GBPS[,LATENCY_US] (busbw in GB/s, latency per phase in us), "
            + "e.g. 50 or 50,12.5");
  }

  @Test
  void aZeroBusbwIsRefused() {
    assertThatThrownBy(() -> LinkProfiles.byName("0,5")).hasMessage("link profile '0,5': busbw must be > 0 GB/s");
  }
}
