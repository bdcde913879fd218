package dev.taco.collective;

import dev.taco.codec.NcclFp8Codec;
import dev.taco.kernels.NcclFp8;

/**
 * The error of an {@code nccl-fp8} all-reduce (docs/design.md §4.1) as {@link CollectiveSites} calibrates it: not of one
 * cast, as for the other codecs, but of the whole sum, which NCCL rounds to FP8 at every hop of its ring, so that the
 * error grows with the world size. Every rank's tensor is cast with the group's scale (the largest magnitude over all
 * of them, {@link NcclFp8Codec#divisor}), the codes of each element are summed in the ring order of the chunk that owns
 * its row ({@link NcclFp8#ringSum}, the rows split over the ranks as {@link TwoShot} splits them), and the cast-back
 * sum is compared with the exact one: the arithmetic of the host collective, on the same inputs the same values.
 */
final class NcclFp8Error {
  private NcclFp8Error() {}

  /**
   * ||allReduce(x) - sum(x)|| / ||sum(x)|| over the ranks' {@code rows x cols} tensors, rank q's at {@code
   * ranks[q * rows * cols]} ({@code world} of them, row-major); 0 for an all-zero sum sent exactly, infinite for a
   * zero sum sent inexactly.
   */
  static double relL2(NcclFp8Codec codec, float[] ranks, int world, int rows, int cols) {
    int n = rows * cols, format = codec.format().code();
    float amax = NcclFp8Codec.finiteAbsMax(ranks, 0, ranks.length);
    float top = NcclFp8.top(codec.divisor(world), format);
    byte[] slots = new byte[world * n];
    for (int i = 0; i < world * n; i++) slots[i] = (byte) NcclFp8.encode(ranks[i], amax, top, format);
    int chunkRows = TwoShot.ceilDiv(rows, world);
    double ee = 0, ss = 0;
    for (int i = 0; i < n; i++) {
      double exact = 0;
      for (int q = 0; q < world; q++) exact += ranks[q * n + i];
      int owner = i / cols / chunkRows;
      double d = NcclFp8.decode(NcclFp8.ringSum(slots, n, i, owner, world, format), amax, top, format) - exact;
      ee += d * d;
      ss += exact * exact;
    }
    return ss == 0 ? (ee == 0 ? 0 : Double.POSITIVE_INFINITY) : Math.sqrt(ee / ss);
  }
}
