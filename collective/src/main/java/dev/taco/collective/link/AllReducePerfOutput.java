package dev.taco.collective.link;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Reads the text output of nccl-tests' {@code all_reduce_perf} (2.x) into a {@link LinkProfile}.
 *
 * <p>Header lines start with {@code #}; among them the device lines {@code #  Rank  3 Group  0 Pid ... device  3
 * [0000:3a:00] NVIDIA H100 80GB HBM3} give the rank count (the largest rank + 1) and the device, and the footer
 * {@code # Out of bounds values : N OK|FAILED} the run's validation. A data row is {@code size count type redop root}
 * then {@code time(us) algbw busbw #wrong} out-of-place and the same four in-place (and, with per-iteration timing or
 * timestamps, more columns); the table takes the out-of-place time. Lines that start with neither {@code #} nor a
 * byte count (NCCL_DEBUG logs, MPI banners) are skipped, and so are 0-byte rows, which measure no bandwidth.
 */
final class AllReducePerfOutput {

  private static final Pattern RANK = Pattern
      .compile("#\\s*Rank\\s+(\\d{1,6})\\s.*?\\bdevice\\s+\\d+\\s+\\[[^\\]]*\\]\\s*(.*)");
  private static final Pattern OUT_OF_BOUNDS = Pattern.compile("#\\s*Out of bounds values\\s*:\\s*(\\d+).*");
  private static final Pattern INTEGER = Pattern.compile("-?\\d{1,18}");
  // what C's printf writes for a double: %f, %e, %g, and inf / nan
  private static final Pattern FLOAT = Pattern
      .compile("[+-]?(?:(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?|inf(?:inity)?|nan)", Pattern.CASE_INSENSITIVE);
  private static final String ROW = "size count type redop root time algbw busbw #wrong ...";

  private AllReducePerfOutput() {}

  /** See {@link LinkProfiles#fromNcclTests}. */
  static LinkProfile read(Path file) {
    List<String> lines;
    try {
      lines = Files.readAllLines(file, StandardCharsets.ISO_8859_1);
    } catch (IOException e) {
      throw new IllegalArgumentException(file + ": cannot read nccl-tests output (" + e.getClass().getSimpleName()
          + (e.getMessage() == null ? "" : ": " + e.getMessage()) + ")");
    }
    int ranks = 0;
    String device = "?";
    String type = null;
    double peakBusbw = 0;
    List<Long> sizes = new ArrayList<>();
    List<Double> seconds = new ArrayList<>();
    for (int n = 1; n <= lines.size(); n++) {
      String line = lines.get(n - 1).strip();
      String where = file + " line " + n + ": ";
      if (line.startsWith("#")) {
        Matcher rank = RANK.matcher(line);
        if (rank.matches()) {
          if (ranks == 0) device = rank.group(2).strip();
          ranks = Math.max(ranks, Integer.parseInt(rank.group(1)) + 1);
        }
        Matcher bounds = OUT_OF_BOUNDS.matcher(line);
        if (bounds.matches() && !bounds.group(1).matches("0+")) {
          throw new IllegalArgumentException(where + "the run reported " + bounds.group(1)
              + " wrong values (Out of bounds values): a run that fails validation measures no link");
        }
        continue;
      }
      String[] f = line.split("\\s+");
      if (!f[0].matches("\\d+")) continue;
      if (f.length < 9 || !f[0].matches("\\d{1,18}") || !f[1].matches("\\d+") || !INTEGER.matcher(f[4]).matches()
          || !isFloat(f[5]) || !isFloat(f[6]) || !isFloat(f[7]) || !(f[8].equals("N/A") || isFloat(f[8]))) {
        throw new IllegalArgumentException(where + "not an all_reduce_perf data row (" + ROW + "): '"
            + (line.length() > 80 ? line.substring(0, 80) + "..." : line) + "'");
      }
      long size = Long.parseLong(f[0]);
      if (size == 0) continue;
      double us = parse(f[5]);
      if (!(us > 0) || !Double.isFinite(us)) {
        throw new IllegalArgumentException(where + "out-of-place time '" + f[5] + "' us at " + size
            + " bytes is not a positive finite number");
      }
      if (!f[8].equals("N/A") && parse(f[8]) != 0) {
        throw new IllegalArgumentException(where + "the run reported " + f[8] + " wrong values at " + size
            + " bytes (#wrong): a run that fails validation measures no link");
      }
      if (!sizes.isEmpty() && size <= sizes.getLast()) {
        throw new IllegalArgumentException(where + "size " + size + " bytes after " + sizes.getLast()
            + ": sizes must increase (one data type -d and one op -o per file)");
      }
      if (type == null) type = f[2] + " " + f[3];
      sizes.add(size);
      seconds.add(us * 1e-6);
      peakBusbw = Math.max(peakBusbw, parse(f[7]) * 1e9);
    }
    if (sizes.isEmpty()) {
      throw new IllegalArgumentException(file + ": no all_reduce_perf data rows (" + ROW + ")");
    }
    if (ranks == 0) {
      throw new IllegalArgumentException(file + ": no '#  Rank N Group G Pid P on HOST device D' lines, so the rank "
          + "count is unknown");
    }
    if (ranks == 1) throw new IllegalArgumentException(file + ": a 1-rank run puts nothing on a link");
    String source = "nccl-tests all_reduce_perf, %d ranks of %s, %s, out-of-place times from %s".formatted(ranks,
        device, type, file);
    return LinkProfile.measured(file.getFileName().toString(), source, ranks,
        sizes.stream().mapToLong(Long::longValue).toArray(),
        seconds.stream().mapToDouble(Double::doubleValue).toArray(),
        LinkProfiles.smsFor(peakBusbw));
  }

  private static boolean isFloat(String s) {
    return FLOAT.matcher(s).matches();
  }

  private static double parse(String s) {
    String t = s.toLowerCase(Locale.ROOT);
    if (t.contains("nan")) return Double.NaN;
    if (t.contains("inf")) return t.startsWith("-") ? Double.NEGATIVE_INFINITY : Double.POSITIVE_INFINITY;
    return Double.parseDouble(s);
  }
}
