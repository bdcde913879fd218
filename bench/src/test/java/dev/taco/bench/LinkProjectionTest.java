package dev.taco.bench;

import dev.taco.collective.CollectiveKind;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import org.junit.jupiter.api.Test;

/** The projection's arithmetic against the figures docs/design.md §7 quotes. */
class LinkProjectionTest {
  @Test
  void ncclAllReduceOf64MiBAtTwoRanksOverNvlinkMatchesTheBusBandwidthDefinition() {
    long s = 64L << 20;
    long bytes = LinkProjection.ncclBytesPerRank(CollectiveKind.ALL_REDUCE, 2, s);
    assertThat(bytes).isEqualTo(s); // 2(R-1)/R * S at R = 2
    // docs/design.md §7 measured 0.301 ms over NVLink: a bus bandwidth of 223 GB/s; at 270 GB/s the projection is 0.249 ms
    LinkProjection p = LinkProjection.of(270, bytes, bytes / 2, 0.1);
    assertThat(p.ncclBf16Ms()).isCloseTo(s / 270e6, within(1e-9));
    assertThat(p.tacoMs()).isCloseTo(0.1 + s / 2 / 270e6, within(1e-9));
    assertThat(p.tacoOverlappedMs()).isCloseTo(Math.max(0.1, s / 2 / 270e6), within(1e-9));
    assertThat(p.speedup()).isCloseTo(p.ncclBf16Ms() / p.tacoMs(), within(1e-12));
  }

  @Test
  void halvingTheBytesPaysOnlyWhereTheWireCostsMoreThanTheKernels() {
    long s = 64L << 20;
    long nccl = LinkProjection.ncclBytesPerRank(CollectiveKind.ALL_REDUCE, 8, s);
    assertThat(nccl).isEqualTo(2L * 7 * s / 8);
    assertThat(LinkProjection.of(29, nccl, nccl / 2, 0.15).speedup()).isGreaterThan(1.5);
    assertThat(LinkProjection.of(1e6, nccl, nccl / 2, 0.15).speedup()).isLessThan(0.01);
    assertThat(LinkProjection.ncclBytesPerRank(CollectiveKind.ALL_GATHER, 4, s)).isEqualTo(3 * s);
    assertThat(LinkProjection.ncclBytesPerRank(CollectiveKind.REDUCE_SCATTER, 4, s)).isEqualTo(3 * s / 4);
  }
}
