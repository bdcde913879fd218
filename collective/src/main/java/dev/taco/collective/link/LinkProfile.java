package dev.taco.collective.link;

import java.util.Arrays;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * How long one wire phase of a collective takes on one kind of link (docs/design.md §9, docs/links.md): the link model
 * the single-GPU emulation holds the communication stream for, and that {@code --compression auto} prices codecs with.
 *
 * <p>A <i>phase</i> is one reduce-scatter or one all-gather over {@code R} ranks of a message of {@code n} bytes
 * ({@code n} is the whole tensor at each rank, nccl-tests' "size"; each rank puts {@code (R-1)/R * n} bytes on the
 * wire). It costs
 *
 * <pre>  t(n) = (R-1)/R * n / busbw(n) + latency      (0 for R = 1 or n = 0)</pre>
 *
 * <p>with {@code busbw} nccl-tests' bus bandwidth. nccl-tests defines an all-reduce's busbw as
 * {@code algbw * 2(R-1)/R} with {@code algbw = S / time}, so an all-reduce of {@code S} bytes is two phases of
 * {@code S} bytes and {@link #allReduceSeconds} at the measured rank count gives back the measured time. A compressed
 * two-shot all-reduce is two phases priced at its own compressed sizes; an all-gather or a reduce-scatter is one.
 *
 * <p>busbw is the link's property, not the rank count's (that is what nccl-tests defines it for), so a table measured
 * at 2 ranks prices phases at any {@code R}: only the {@code (R-1)/R} factor changes.
 *
 * <p><b>Interpolation.</b> The table holds (message bytes, busbw) points. Between two points busbw is linear in
 * {@code log2(size)}, except that a message never costs less than the table point below it (the time stays
 * non-decreasing in {@code n}). Above the largest point busbw stays at the last value. Below the smallest point the
 * time stays at the smallest point's (busbw falls in proportion to size): small messages are latency-bound, and a
 * table says nothing about how much faster they might be. A measured table in which a message took longer than a
 * larger one is priced at the larger one's time (a message can always be sent padded to the larger size); the
 * built-in {@code h200-nvlink-2} has one such point (see docs/links.md).
 *
 * <p>Immutable and thread-safe.
 */
public final class LinkProfile {
  private static final Logger LOG = LoggerFactory.getLogger(LinkProfile.class);

  private final String name;
  private final String source;
  private final long[] bytes;
  private final double[] busbw;
  private final double latencySeconds;
  private final int sms;

  private LinkProfile(String name, String source, long[] bytes, double[] busbw, double latencySeconds, int sms) {
    this.name = name;
    this.source = source;
    this.bytes = bytes;
    this.busbw = busbw;
    this.latencySeconds = latencySeconds;
    this.sms = sms;
  }

  /**
   * A profile from measured all-reduce times (latency 0: the times already include it).
   *
   * @param name the profile's name, e.g. {@code h200-nvlink-2}, not blank
   * @param source where the figures come from, one line (date, machine, command or publication)
   * @param ranks the rank count the times were measured at, &ge; 2
   * @param bytes all-reduce message sizes in bytes, &ge; 1, strictly increasing, at least one
   * @param allReduceSeconds the time of an all-reduce of each size, seconds, positive and finite
   * @param sms how many SMs the link's NCCL kernels occupy, &ge; 0
   * @return the profile; a size measured slower than a larger one is priced at the larger one's time (logged)
   * @throws IllegalArgumentException naming the first value that breaks these rules
   */
  public static LinkProfile measured(String name, String source, int ranks, long[] bytes, double[] allReduceSeconds,
      int sms) {
    check(name, source, sms);
    if (ranks < 2) throw new IllegalArgumentException(name + ": measured at " + ranks + " rank(s); need >= 2");
    if (bytes.length == 0 || bytes.length != allReduceSeconds.length) {
      throw new IllegalArgumentException(name + ": " + bytes.length + " sizes and " + allReduceSeconds.length
          + " times; need the same number, at least one");
    }
    double[] t = allReduceSeconds.clone();
    for (int i = 0; i < bytes.length; i++) {
      if (bytes[i] < 1 || (i > 0 && bytes[i] <= bytes[i - 1])) {
        throw new IllegalArgumentException(name + ": sizes must be >= 1 and strictly increasing, got " + bytes[i]
            + " bytes after " + (i > 0 ? bytes[i - 1] : 0));
      }
      if (!(t[i] > 0) || !Double.isFinite(t[i])) {
        throw new IllegalArgumentException(name + ": time " + t[i] + " s at " + bytes[i] + " bytes is not positive");
      }
    }
    for (int i = t.length - 2; i >= 0; i--) {
      if (t[i] > t[i + 1]) {
        LOG.info("link profile {}: {} bytes took {} us, longer than {} bytes; priced at {} us", name, bytes[i],
            "%.1f".formatted(t[i] * 1e6), bytes[i + 1], "%.1f".formatted(t[i + 1] * 1e6));
        t[i] = t[i + 1];
      }
    }
    double[] b = new double[t.length];
    for (int i = 0; i < t.length; i++) b[i] = 2.0 * (ranks - 1) / ranks * bytes[i] / t[i];
    return new LinkProfile(name, source, bytes.clone(), b, 0, sms);
  }

  /**
   * A profile with one busbw for every size and a fixed latency per phase.
   *
   * @param name the profile's name, not blank
   * @param source where the figures come from, one line
   * @param busbw bus bandwidth in bytes/s, &gt; 0; {@link Double#POSITIVE_INFINITY} for a link that costs only its
   *     latency
   * @param latencySeconds added to every phase, seconds, &ge; 0 and finite
   * @param sms how many SMs the link's NCCL kernels occupy, &ge; 0
   * @return the profile
   * @throws IllegalArgumentException if a value is out of range
   */
  public static LinkProfile constant(String name, String source, double busbw, double latencySeconds, int sms) {
    check(name, source, sms);
    if (!(busbw > 0)) throw new IllegalArgumentException(name + ": busbw " + busbw + " B/s is not positive");
    if (!(latencySeconds >= 0) || !Double.isFinite(latencySeconds)) {
      throw new IllegalArgumentException(name + ": latency " + latencySeconds + " s is not >= 0 and finite");
    }
    return new LinkProfile(name, source, new long[] {1}, new double[] {busbw}, latencySeconds, sms);
  }

  private static void check(String name, String source, int sms) {
    Objects.requireNonNull(name, "name");
    Objects.requireNonNull(source, "source");
    if (name.isBlank()) throw new IllegalArgumentException("a link profile needs a name");
    if (sms < 0) throw new IllegalArgumentException(name + ": sms " + sms + " is negative");
  }

  /** The profile's name, e.g. {@code h200-nopeer-2}. */
  public String name() {
    return name;
  }

  /** Where the figures come from, one line, e.g. {@code NCCL bf16 all-reduce, 2xH200, ... measured 2026-11-30}. */
  public String source() {
    return source;
  }

  /** Latency added to every phase, seconds (0 for measured tables, whose times include it). */
  public double latencySeconds() {
    return latencySeconds;
  }

  /** How many SMs NCCL's kernels occupy on this link (one block per channel): what the emulation keeps busy. */
  public int sms() {
    return sms;
  }

  /**
   * Bus bandwidth for a message of {@code bytes}, bytes/s, by the interpolation rule of this class's Javadoc.
   *
   * @param bytes message size, &ge; 1
   * @return busbw in bytes/s, &gt; 0 (infinite for an infinitely fast link)
   * @throws IllegalArgumentException if {@code bytes < 1}
   */
  public double busbw(long bytes) {
    if (bytes < 1) throw new IllegalArgumentException("busbw of a " + bytes + "-byte message");
    int i = Arrays.binarySearch(this.bytes, bytes);
    if (i >= 0) return busbw[i];
    int hi = -i - 1;
    if (hi == 0) return busbw[0] * ((double) bytes / this.bytes[0]);
    int lo = hi - 1;
    if (hi == this.bytes.length) return busbw[lo];
    double f = Math.log((double) bytes / this.bytes[lo]) / Math.log((double) this.bytes[hi] / this.bytes[lo]);
    double interpolated = busbw[lo] + f * (busbw[hi] - busbw[lo]);
    // where busbw climbs faster than size, the straight line would price n below the point under it
    return Math.min(interpolated, busbw[lo] * ((double) bytes / this.bytes[lo]));
  }

  /**
   * One reduce-scatter or all-gather phase: {@code (R-1)/R * n / busbw(n) + latency}.
   *
   * @param bytesPerRank the message each rank holds, {@code n} bytes (an all-gather's output, a reduce-scatter's
   *     input), &ge; 0
   * @param ranks world size {@code R}, &ge; 1
   * @return seconds; 0 for {@code R = 1} or {@code n = 0}
   * @throws IllegalArgumentException if {@code n < 0} or {@code R < 1}
   */
  public double phaseSeconds(long bytesPerRank, int ranks) {
    if (bytesPerRank < 0) throw new IllegalArgumentException("a phase of " + bytesPerRank + " bytes");
    if (ranks < 1) throw new IllegalArgumentException("a phase over " + ranks + " ranks");
    if (ranks == 1 || bytesPerRank == 0) return 0;
    return (ranks - 1.0) / ranks * bytesPerRank / busbw(bytesPerRank) + latencySeconds;
  }

  /**
   * An uncompressed all-reduce of {@code bytes}: two phases of {@code bytes}.
   *
   * @param bytes the message, &ge; 0
   * @param ranks world size, &ge; 1
   * @return seconds; at the sizes and rank count of a measured table, the measured time
   * @throws IllegalArgumentException as {@link #phaseSeconds}
   */
  public double allReduceSeconds(long bytes, int ranks) {
    return 2 * phaseSeconds(bytes, ranks);
  }

  /** A label for outputs, e.g. {@code emulated link h200-nopeer-2 (NCCL bf16 all-reduce, 2xH200, ...)}. */
  public String emulated() {
    return "emulated link " + name + " (" + source + ")";
  }

  /** The name. */
  @Override
  public String toString() {
    return name;
  }
}
