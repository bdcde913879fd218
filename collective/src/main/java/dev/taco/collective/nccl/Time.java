package dev.taco.collective.nccl;

import dev.taco.collective.LocalGroup;
import java.time.Duration;
import java.util.Locale;
import java.util.Objects;

/** Duration checks and formatting shared by the watchdog, the rendezvous and the communicator. */
final class Time {
  private Time() {}

  /**
   * @param d a duration
   * @return it in seconds with one decimal, e.g. {@code "120.0 s"}
   */
  static String seconds(Duration d) {
    return String.format(Locale.ROOT, "%.1f s", d.toNanos() / 1e9);
  }

  /**
   * @param d    a duration
   * @param name what it is, for the message
   * @return {@code d}
   * @throws IllegalArgumentException if it is null, zero, negative or over {@link LocalGroup#MAX_TIMEOUT} (a deadline
   *     in {@link System#nanoTime} units would overflow)
   */
  static Duration positive(Duration d, String name) {
    Objects.requireNonNull(d, name);
    if (d.isNegative() || d.isZero() || d.compareTo(LocalGroup.MAX_TIMEOUT) > 0) {
      throw new IllegalArgumentException(name + " must be > 0 and at most " + LocalGroup.MAX_TIMEOUT.toDays()
          + " days: " + d);
    }
    return d;
  }

  /**
   * @param nanos a positive or negative span in nanoseconds
   * @return it in whole milliseconds for a socket timeout, at least 1, at most {@link Integer#MAX_VALUE}
   */
  static int socketMillis(long nanos) {
    return Math.clamp((nanos + 999_999) / 1_000_000, 1, Integer.MAX_VALUE);
  }
}
