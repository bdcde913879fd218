package dev.taco.collective.link;

import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The link profiles a run can name: the built-ins, {@code GBPS[,LATENCY_US]}, and a user's own nccl-tests output.
 * docs/links.md gives every built-in figure's source; the short form is in each profile's {@link LinkProfile#source()}.
 *
 * <ul>
 *   <li>{@code h200-nvlink-2}, {@code h200-nopeer-2}: NCCL bf16 all-reduce on two H200s over NVLink NV18 and with
 *       {@code NCCL_P2P_DISABLE=1}, 1 to 256 MiB, measured 2026-11-30.
 *   <li>{@code h100-nvlink-8}: 370 GB/s busbw, NCCL's effective NVLink bandwidth on H100 (NVIDIA/nccl-tests#212).
 *   <li>{@code pcie5-8}: 40 GB/s busbw, 8 PCIe Gen5 cards without NVSwitch (assumed).
 *   <li>{@code ib-ndr}: 50 GB/s busbw, one 400 Gb/s InfiniBand NDR port's line rate.
 *   <li>{@code inf}: every phase costs 0 and occupies no SM, which reproduces {@code --no-tp-comm}.
 * </ul>
 *
 * <p>The constant-bandwidth built-ins add a latency per phase from NCCL's own tuning model (src/graph/tuning.cc,
 * base and hardware latencies of the ring algorithm with the LL protocol, NCCL's small-message choice): the base
 * latency plus one hardware latency per ring step, {@code R-1} steps a phase. It is an assumption, taken at the
 * rank count the profile is named for and then held fixed.
 */
public final class LinkProfiles {

  /** The built-in profile names, in the order error messages list them. */
  public static final List<String> BUILT_IN = List.of("h200-nvlink-2", "h200-nopeer-2", "h100-nvlink-8", "pcie5-8",
      "ib-ndr", "inf");

  /** NCCL's NVLink rings run 2 blocks per NVLink (18 on H100/H200), capped at NCCL's 32 channels. */
  static final int NVLINK_SMS = 32;

  /** NCCL's least channel count, and what it runs on a PCI system or per NIC (NVIDIA/nccl#689). */
  static final int PCI_SMS = 2;

  /** One PCIe Gen5 x16 slot, a direction: 32 GT/s x 16 lanes x 128/130 / 8, in bytes/s. */
  static final double PCIE5_X16 = 32e9 * 16 * 128 / 130 / 8;

  private static final long MIB = 1 << 20;
  private static final long[] H200_BYTES = {MIB, 4 * MIB, 16 * MIB, 64 * MIB, 256 * MIB};
  private static final String H200 = "NCCL bf16 all-reduce, 2xH200, ";
  private static final String SPEC = "GBPS[,LATENCY_US] (busbw in GB/s, latency per phase in us), e.g. 50 or 50,12.5";
  private static final String NUMBER = "(\\d+(?:\\.\\d*)?|\\.\\d+)";
  private static final Pattern GBPS = Pattern.compile(NUMBER + "(?:," + NUMBER + ")?");

  private LinkProfiles() {}

  /**
   * A built-in profile by name, or {@code GBPS[,LATENCY_US]}: a constant busbw in GB/s (10^9 bytes/s) and an optional
   * latency per phase in microseconds, e.g. {@code 50} or {@code 50,12.5}; its SMs follow {@link #smsFor}.
   *
   * @param spec a name from {@link #BUILT_IN} or the GBPS form
   * @return the profile
   * @throws IllegalArgumentException for an unknown name (the one-line message lists the built-ins and the GBPS form)
   *     or a GBPS form with a zero busbw
   */
  public static LinkProfile byName(String spec) {
    Objects.requireNonNull(spec, "spec");
    String s = spec.trim().toLowerCase(Locale.ROOT);
    return switch (s) {
      case "h200-nvlink-2" -> LinkProfile.measured(s, H200 + "NVLink NV18, measured 2026-11-30", 2, H200_BYTES,
          ms(0.0863, 0.0699, 0.1173, 0.3007, 0.9967), NVLINK_SMS);
      case "h200-nopeer-2" -> LinkProfile.measured(s, H200 + "NCCL_P2P_DISABLE=1, measured 2026-11-30", 2, H200_BYTES,
          ms(0.0905, 0.1885, 0.6402, 2.4175, 9.3791), PCI_SMS);
      case "h100-nvlink-8" -> ringLl(s, "370 GB/s busbw, NCCL's effective NVLink bandwidth on 8xH100"
          + " (NVIDIA/nccl-tests#212)", 370e9, 0.6, "NVLink", 8, NVLINK_SMS);
      case "pcie5-8" -> ringLl(s, "40 GB/s busbw, 8 PCIe Gen5 cards without NVSwitch (assumed)", 40e9, 1.0, "PCI",
          8, PCI_SMS);
      case "ib-ndr" -> ringLl(s, "50 GB/s busbw, one 400 Gb/s InfiniBand NDR port's line rate", 50e9, 2.7,
          "the network between 2 nodes", 2, PCI_SMS);
      case "inf" -> LinkProfile.constant(s, "infinitely fast: every phase costs 0, as --no-tp-comm",
          Double.POSITIVE_INFINITY, 0, 0);
      default -> gbps(spec.trim());
    };
  }

  /**
   * A profile whose table is a user's own nccl-tests {@code all_reduce_perf} text output (the out-of-place times,
   * the rank count from its {@code #  Rank N Group ...} device lines); its SMs follow {@link #smsFor} at the file's
   * largest busbw.
   *
   * @param file the saved output of e.g. {@code all_reduce_perf -b 1M -e 1G -f 2 -d bfloat16}
   * @return a profile named after the file
   * @throws IllegalArgumentException with a one-line message naming the file, and the line where there is one, if it
   *     cannot be read, has no data rows, has a malformed row, sizes that do not increase, a time that is not
   *     positive and finite, a run that reported wrong values, or no rank count above 1
   */
  public static LinkProfile fromNcclTests(Path file) {
    return AllReducePerfOutput.read(file);
  }

  /**
   * The SMs NCCL is assumed to occupy on a link of this busbw, where no one measured it: above one PCIe Gen5 x16
   * slot's rate the link can only be NVLink (32 channels: 2 per NVLink, capped at NCCL's 32), otherwise NCCL's
   * least, 2 (what it runs on PCI and per NIC). One block per channel, one SM per block (NVIDIA/nccl#689).
   *
   * @param busbw the link's largest busbw, bytes/s
   * @return SMs, 2 or 32
   */
  public static int smsFor(double busbw) {
    return busbw > PCIE5_X16 ? NVLINK_SMS : PCI_SMS;
  }

  private static LinkProfile gbps(String spec) {
    Matcher m = GBPS.matcher(spec);
    if (!m.matches()) {
      throw new IllegalArgumentException("unknown link profile '" + spec + "': known are "
          + String.join(", ", BUILT_IN) + ", or " + SPEC);
    }
    String latencyUs = m.group(2) == null ? "0" : m.group(2);
    double busbw = Double.parseDouble(m.group(1)) * 1e9;
    if (!(busbw > 0)) throw new IllegalArgumentException("link profile '" + spec + "': busbw must be > 0 GB/s");
    return LinkProfile.constant(spec, "given: " + m.group(1) + " GB/s busbw, " + latencyUs + " us a phase", busbw,
        Double.parseDouble(latencyUs) * 1e-6, smsFor(busbw));
  }

  /**
   * A constant busbw with NCCL's ring LL latency per phase at {@code ranks}: base 6.6 us plus {@code hwLatUs} per
   * step (NCCL src/graph/tuning.cc, baseLat and hwLat, Ring/LL), {@code ranks-1} steps.
   */
  private static LinkProfile ringLl(String name, String bandwidth, double busbw, double hwLatUs, String hw, int ranks,
      int sms) {
    double latencyUs = 6.6 + (ranks - 1) * hwLatUs;
    String latency = "%.1f us a phase, NCCL's ring LL latency over %s at %d ranks (assumed)".formatted(latencyUs, hw,
        ranks);
    return LinkProfile.constant(name, bandwidth + "; " + latency, busbw, latencyUs * 1e-6, sms);
  }

  private static double[] ms(double... millis) {
    double[] s = new double[millis.length];
    for (int i = 0; i < s.length; i++) s[i] = millis[i] * 1e-3;
    return s;
  }
}
