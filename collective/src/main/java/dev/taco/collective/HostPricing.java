package dev.taco.collective;

import dev.taco.collective.link.LinkProfile;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * {@link Pricing} of the host collectives (threads as ranks): a two-shot collective's codec work, timed here on a
 * Gaussian tensor of the shape (the best of the runs in 50 ms, by when the JIT has compiled the codec; at most {@link
 * CollectiveSites#SAMPLE_ROWS} rows, scaled to the shape; cached per codec, layout and shape), plus its payloads' phases
 * on a link model ({@code nccl-fp8} adds the exchange of its group scale, one float per rank, before them). On one
 * machine the link is a memory copy ({@link #memoryLink}), so compression honestly loses there unless a slower link is
 * named. Thread-safe: the ranks of one process share one, and time one codec at a time.
 */
public final class HostPricing implements Pricing {
  private final LinkProfile link;
  private final int ranks;
  private final Map<String, Double> work = new HashMap<>();

  /**
   * @param link the link model of the phases
   * @param ranks R
   */
  public HostPricing(LinkProfile link, int ranks) {
    this.link = java.util.Objects.requireNonNull(link, "link");
    this.ranks = ranks;
  }

  /**
   * This machine's memory as a link: the bandwidth of one large {@code System.arraycopy}, measured now (best of 5 over
   * 64 MiB), as a constant-bandwidth profile.
   */
  public static LinkProfile memoryLink() {
    float[] a = new float[16 << 20], b = new float[a.length];
    double best = Double.POSITIVE_INFINITY;
    for (int i = 0; i < 5; i++) {
      long t0 = System.nanoTime();
      System.arraycopy(a, 0, b, 0, a.length);
      best = Math.min(best, (System.nanoTime() - t0) / 1e9);
    }
    double busbw = 4.0 * a.length / best;
    return LinkProfile.constant("host-memory", String.format(java.util.Locale.ROOT, "this machine's System.arraycopy,"
        + " %.1f GB/s measured at start-up (threads as ranks: no link)", busbw / 1e9), busbw, 0, 0);
  }

  @Override
  public double seconds(Plan plan, CollectiveKind kind, int rows, int cols) {
    long payload = plan.exact() ? 4L * rows * cols : plan.codec().encodedSize(rows, cols);
    long message = kind.messageBytes(payload, ranks);
    int phases = kind == CollectiveKind.ALL_REDUCE ? 2 : 1;
    double scale = plan.groupScaled() ? link.phaseSeconds(4L * ranks, ranks) : 0;
    return phases * link.phaseSeconds(message, ranks) + scale + workSeconds(plan, rows, cols);
  }

  /**
   * The codec work of one two-shot collective at this rank: about two encodes and two decodes of the tensor (compress,
   * decompress-reduce, re-compress, decompress), timed as twice an encode and decode of a sample.
   */
  private synchronized double workSeconds(Plan plan, int rows, int cols) {
    if (plan.exact()) return 0;
    int n = Math.min(rows, CollectiveSites.SAMPLE_ROWS);
    return work.computeIfAbsent(plan.codecAndLayout() + " " + n + "x" + cols, k -> {
      float[] x = new float[n * cols], w = new float[x.length];
      SplittableRandom rnd = new SplittableRandom(n * 31L + cols);
      for (int i = 0; i < x.length; i++) x[i] = (float) rnd.nextGaussian();
      boolean t = plan.layout() == WireLayout.TOKEN_AXIS;
      if (t) HostWire.transpose(x, w, n, cols); // a permutation of i.i.d. values is the same tensor: left out
      else System.arraycopy(x, 0, w, 0, x.length);
      byte[] buf = new byte[plan.codec().encodedSize(t ? cols : n, t ? n : cols)];
      double best = Double.POSITIVE_INFINITY;
      long until = System.nanoTime() + 50_000_000L;
      for (int i = 0; i < 3 || System.nanoTime() < until; i++) { // the best once the JIT has compiled the codec
        long t0 = System.nanoTime();
        int bytes = plan.codec().encode(w, 0, t ? cols : n, t ? n : cols, buf, 0);
        plan.codec().decode(buf, 0, bytes, x, 0, false);
        best = Math.min(best, (System.nanoTime() - t0) / 1e9);
      }
      return best;
    }) * 2 * rows / n;
  }
}
