package dev.taco.bench;

import dev.taco.collective.CollectiveKind;

/**
 * A clearly labelled PROJECTION, not a measurement (docs/design.md §7): the time of a collective over a link of a given bus
 * bandwidth, by nccl-tests' definition of bus bandwidth (what one rank puts on the link divided by the time; for a ring
 * all-reduce of S bytes that is {@code 2(R-1)/R * S}, for an all-gather or reduce-scatter of S bytes in all
 * {@code (R-1)/R * S}), so a rank's time on the wire is {@code bytesPerRank / busBandwidth}. NCCL bf16 spends only that;
 * TACO adds its measured per-rank kernel time, serially (no overlap: a bound from above) and fully overlapped with the
 * wire (the chunk pipeline's best case).
 *
 * @param linkGbps the assumed bus bandwidth, GB/s (1e9 bytes per second)
 * @param ncclBf16Ms NCCL's bf16 collective: {@code ncclBytes / link}
 * @param tacoMs TACO serial: kernels + {@code tacoBytes / link}
 * @param tacoOverlappedMs TACO with the kernels hidden behind the wire or vice versa: {@code max(kernels, wire)}
 * @param speedup {@code ncclBf16Ms / tacoMs} (serial, the conservative one)
 */
record LinkProjection(double linkGbps, double ncclBf16Ms, double tacoMs, double tacoOverlappedMs, double speedup) {

  /**
   * @param ncclBytesPerRank bytes one rank sends in NCCL's bf16 collective
   * @param tacoBytesPerRank bytes one rank sends in TACO's (compressed payloads)
   * @param tacoKernelMs TACO's measured per-rank kernel time
   */
  static LinkProjection of(double linkGbps, long ncclBytesPerRank, long tacoBytesPerRank, double tacoKernelMs) {
    double nccl = ncclBytesPerRank / (linkGbps * 1e6);
    double wire = tacoBytesPerRank / (linkGbps * 1e6);
    double taco = tacoKernelMs + wire;
    return new LinkProjection(linkGbps, nccl, taco, Math.max(tacoKernelMs, wire), nccl / taco);
  }

  /**
   * Bytes one rank sends in NCCL's bf16 {@code kind} of a tensor of {@code tensorBytes} bf16 bytes per rank's input
   * (an all-gather's input is one rank's shard): the message's bytes times the kind's bus-bandwidth factor.
   */
  static long ncclBytesPerRank(CollectiveKind kind, int ranks, long tensorBytes) {
    long message = kind.messageBytes(tensorBytes, ranks);
    return Math.round(kind.busBandwidthFactor(ranks) * message);
  }
}
