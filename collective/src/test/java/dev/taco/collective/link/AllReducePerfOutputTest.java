package dev.taco.collective.link;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.function.UnaryOperator;
import org.assertj.core.api.AbstractThrowableAssert;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link LinkProfiles#fromNcclTests} on an {@code all_reduce_perf} output in nccl-tests 2.x's format (8 GPUs, in-place
 * columns; the figures are made up, the layout is nccl-tests' own), and every refusal of a broken one.
 */
class AllReducePerfOutputTest {
  @TempDir
  Path dir;

  static Path fixture() throws URISyntaxException {
    return Path.of(AllReducePerfOutputTest.class.getResource("/link/all_reduce_perf_8xh100.txt").toURI());
  }

  static List<String> lines() throws Exception {
    return new ArrayList<>(Files.readAllLines(fixture()));
  }

  /** The 1-based line number of the data row of {@code size} bytes. */
  static int row(List<String> lines, long size) {
    for (int i = 0; i < lines.size(); i++) {
      if (lines.get(i).strip().startsWith(size + " ")) return i + 1;
    }
    throw new AssertionError("no row of " + size + " bytes");
  }

  Path write(List<String> lines) throws IOException {
    return Files.write(dir.resolve("out.txt"), lines);
  }

  /** The fixture with the row of {@code size} bytes rewritten. */
  Path withRow(long size, UnaryOperator<String> edit) throws Exception {
    List<String> lines = lines();
    int n = row(lines, size);
    lines.set(n - 1, edit.apply(lines.get(n - 1)));
    return write(lines);
  }

  static AbstractThrowableAssert<?, ? extends Throwable> refused(Path file) {
    var refusal = assertThatThrownBy(() -> LinkProfiles.fromNcclTests(file))
        .isInstanceOf(IllegalArgumentException.class);
    refusal.message().doesNotContain("\n").startsWith(file.toString());
    return refusal;
  }

  @Test
  void readsTheOutOfPlaceTimesAndTheRankCount() throws Exception {
    LinkProfile p = LinkProfiles.fromNcclTests(fixture());
    assertThat(p.name()).isEqualTo("all_reduce_perf_8xh100.txt");
    assertThat(p.source()).startsWith("nccl-tests all_reduce_perf, 8 ranks of NVIDIA H100 80GB HBM3, bfloat16 sum,");
    // the row of 16 MiB: 122.61 us out-of-place (120.97 in-place), busbw 239.46 GB/s
    assertThat(p.allReduceSeconds(16_777_216, 8)).isCloseTo(122.61e-6, within(122.61e-6 * 1e-9));
    assertThat(p.busbw(16_777_216)).isCloseTo(239.46e9, within(0.01e9));
    // busbw is the link's: at 2 ranks the same message costs (1/2) / (7/8) as long
    assertThat(p.allReduceSeconds(16_777_216, 2)).isCloseTo(122.61e-6 * 0.5 / 0.875, within(1e-15));
    assertThat(p.latencySeconds()).isZero();
    assertThat(p.sms()).isEqualTo(32);
  }

  @Test
  void skipsNcclLogLinesAndAcceptsAnUnvalidatedRun() throws Exception {
    List<String> lines = lines();
    int n = row(lines, 4096);
    lines.add(n - 1, "hgx-h100-3:24817:24817 [0] NCCL INFO comm 0x55d1 rank 0 nranks 8 cudaDev 0 - Init COMPLETE");
    lines.add(n - 1, "NCCL version 2.21.5+cuda12.4");
    lines.replaceAll(l -> l.matches(" *\\d+ .*") ? l.replaceAll(" 0$", "N/A").replaceAll(" 0( +\\d)", "N/A$1") : l);
    assertThat(lines.get(row(lines, 4096) - 1)).contains("N/A");
    LinkProfile p = LinkProfiles.fromNcclTests(write(lines));
    assertThat(p.allReduceSeconds(16_777_216, 8)).isCloseTo(122.61e-6, within(1e-15));
  }

  @Test
  void noDataRows() throws Exception {
    Path file = write(lines().stream().filter(l -> l.startsWith("#")).toList());
    refused(file).hasMessageContaining("no all_reduce_perf data rows");
  }

  @Test
  void aMalformedRowIsNamedByItsLineNumber() throws Exception {
    int n = row(lines(), 65536);
    refused(withRow(65536, l -> l.replace("22.83", "fast"))).hasMessageContaining(" line " + n + ": ")
        .hasMessageContaining("not an all_reduce_perf data row (size count type redop root time algbw busbw #wrong");
    refused(withRow(65536, l -> l.substring(0, 60))).hasMessageContaining(" line " + n + ": not an all_reduce_perf");
  }

  @Test
  void sizesMustIncrease() throws Exception {
    List<String> lines = lines();
    int n = row(lines, 1024);
    String previous = lines.get(n - 2);
    lines.set(n - 2, lines.get(n - 1));
    lines.set(n - 1, previous);
    refused(write(lines)).hasMessageContaining(" line " + n + ": size 512 bytes after 1024: sizes must increase");
  }

  @Test
  void timesMustBePositiveAndFinite() throws Exception {
    int n = row(lines(), 65536);
    for (String bad : new String[] {"0.00", "inf", "nan", "-1.5"}) {
      refused(withRow(65536, l -> l.replace("22.83", bad))).hasMessageContaining(" line " + n + ": out-of-place time '"
          + bad + "' us at 65536 bytes is not a positive finite number");
    }
  }

  @Test
  void aRunThatReportedWrongValuesIsRefused() throws Exception {
    int n = row(lines(), 65536);
    refused(withRow(65536, l -> l.replace("5.02       0", "5.02       3")))
        .hasMessageContaining(" line " + n + ": the run reported 3 wrong values at 65536 bytes (#wrong)");
    List<String> lines = lines();
    int footer = lines.indexOf("# Out of bounds values : 0 OK");
    lines.set(footer, "# Out of bounds values : 7 FAILED");
    refused(write(lines)).hasMessageContaining(" line " + (footer + 1) + ": the run reported 7 wrong values");
  }

  @Test
  void theRankCountMustBeKnownAndAboveOne() throws Exception {
    refused(write(lines().stream().filter(l -> !l.contains(" Rank ")).toList()))
        .hasMessageContaining("no '#  Rank N Group G Pid P on HOST device D' lines, so the rank count is unknown");
    refused(write(lines().stream().filter(l -> !l.contains(" Rank ") || l.contains("Rank  0 ")).toList()))
        .hasMessageEndingWith(": a 1-rank run puts nothing on a link");
  }

  @Test
  void aMissingFile() {
    Path file = dir.resolve("none.txt");
    refused(file).hasMessage(file + ": cannot read nccl-tests output (NoSuchFileException: " + file + ")");
  }
}
