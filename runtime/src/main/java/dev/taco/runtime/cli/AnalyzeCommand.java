package dev.taco.runtime.cli;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Codecs;
import dev.taco.kernels.simd.Simd;
import dev.taco.runtime.analyze.AnalyzePlots;
import dev.taco.runtime.analyze.NamedTensor;
import dev.taco.runtime.analyze.TensorAnalysis;
import dev.taco.runtime.analyze.TensorFileException;
import dev.taco.runtime.analyze.TensorFiles;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code taco analyze FILE...}: every codec on every tensor of users' {@code .npy} and {@code .safetensors}
 * files, as a table on stdout (and optionally JSON and PNG histograms).
 *
 * <p>Exit status: 0 when every file was read, even if a codec refused a tensor (e.g. NaN/Inf: the table row shows
 * the codec's message, naming the index) or a tensor was empty (a row notes it); 2 if a codec name is unknown
 * (nothing is read) or any file is missing or malformed: each such file gets one line {@code taco: error:
 * <file>: <reason>} on stderr, the other files are still analysed.
 */
@Command(name = "analyze", mixinStandardHelpOptions = true, version = TacoCli.VERSION,
    description = {"Measure codecs on your own tensors: relative L2 error, SNR, cosine, max abs error,"
        + " zero-collapse rate, saturation count and bytes per element, per tensor and codec.",
        "Reads NumPy .npy (little-endian f2/f4/f8, C order) and .safetensors (F16, BF16, F32, F64). A tensor is"
            + " viewed as rows x cols with cols = its last dimension.",
        "Exit status: 0 if every file was read (a codec that refuses a tensor, e.g. for NaN/Inf, is shown in its"
            + " row); 2 for an unknown codec or an unreadable or malformed file (one line each on stderr)."})
final class AnalyzeCommand implements Callable<Integer> {
  private static final Logger log = LoggerFactory.getLogger(AnalyzeCommand.class);
  /** Characters of a tensor's label kept in its plot files' names (with "NNN-" and "-values.png" well below 255). */
  static final int MAX_LABEL = 120;

  @Spec
  CommandSpec spec;

  @Parameters(arity = "1..*", paramLabel = "FILE", description = ".npy or .safetensors files.")
  List<Path> files;

  @Option(names = "--codec", paramLabel = "CODEC[,CODEC...]",
      description = "Codecs to measure, comma-separated, with parameters after a colon as in"
          + " `taco:e5m2,g=128,hadamard=off`. Default: fp32, none, fp8-tensor, fp8-group, int8-group,"
          + " int4-group, hadamard-int8, nccl-fp8, nccl-fp8:e5m2, taco, taco:e5m2, taco-no-ash, taco-no-ds,"
          + " taco-no-hadamard. Codecs: "
          + Codecs.NAMES + ".")
  String codecs;

  @Option(names = "--json", paramLabel = "FILE", description = "Also write the results as JSON to FILE (a new file,"
      + " or with --overwrite an existing one).")
  Path json;

  @Option(names = "--overwrite", description = "Replace an existing --json file (refused otherwise: a forgotten file"
      + " name would take the next tensor file's place).")
  boolean overwrite;

  @Option(names = "--plots", paramLabel = "DIR",
      description = "Write per tensor a histogram of |values| and of the per-element relative error per codec"
          + " (PNG, log axis) into DIR.")
  Path plots;

  /** Refuses output paths that cannot be written, before any work. */
  private void checkOutputs() {
    if (json != null && java.nio.file.Files.isDirectory(json)) {
      throw new IllegalArgumentException("--json " + json.toAbsolutePath() + " is a folder; give a file name");
    }
    for (Path f : json == null ? List.<Path>of() : files) {
      if (json.toAbsolutePath().normalize().equals(f.toAbsolutePath().normalize()) || isSameFile(json, f)) {
        throw new IllegalArgumentException("--json " + json + " is one of the input files; give another name");
      }
    }
    if (json != null && !overwrite && java.nio.file.Files.exists(json)) {
      throw new IllegalArgumentException("--json " + json + " exists; give a new file name, or --overwrite to replace"
          + " it");
    }
    // the folders the JSON goes into are made when it is written: the nearest one that exists must be a folder
    Path jsonDir = json == null ? null : json.toAbsolutePath().getParent();
    while (jsonDir != null && !java.nio.file.Files.exists(jsonDir)) jsonDir = jsonDir.getParent();
    if (jsonDir != null && !java.nio.file.Files.isDirectory(jsonDir)) {
      throw new IllegalArgumentException("--json " + json.toAbsolutePath() + ": " + jsonDir + " is not a folder");
    }
    if (jsonDir != null) { // a file made and deleted: the permission bits do not tell (root, /proc, read-only mounts)
      try {
        java.nio.file.Files.delete(java.nio.file.Files.createTempFile(jsonDir, ".taco-analyze", ".probe"));
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException("--json folder " + jsonDir + " is not writable: " + TacoCli.reason(e));
      }
    }
    if (plots != null && java.nio.file.Files.exists(plots) && !java.nio.file.Files.isDirectory(plots)) {
      throw new IllegalArgumentException("--plots " + plots.toAbsolutePath() + " exists and is not a folder");
    }
    if (plots != null) {
      plotsCreated = !java.nio.file.Files.exists(plots);
      try {
        java.nio.file.Files.createDirectories(plots);
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException(
            "cannot create --plots folder " + plots.toAbsolutePath() + ": " + TacoCli.reason(e));
      }
    }
  }

  private static boolean isSameFile(Path a, Path b) {
    try {
      return java.nio.file.Files.exists(a) && java.nio.file.Files.exists(b) && java.nio.file.Files.isSameFile(a, b);
    } catch (java.io.IOException e) {
      return false;
    }
  }

  /** Whether {@link #checkOutputs} made the {@code --plots} folder (removed again if nothing was analysed). */
  private boolean plotsCreated;

  @Override
  public Integer call() throws Exception {
    Map<String, AbstractCodec> chosen = TensorAnalysis.codecs(codecs == null ? TensorAnalysis.DEFAULT_CODECS
        : TacoCli.codecListFor("--codec", codecs, java.util.Set.of()));
    checkOutputs();
    PrintWriter w = new PrintWriter(System.out, true);
    List<TensorAnalysis.Row> all = new ArrayList<>();
    int width = Math.max(24, files.stream().mapToInt(f -> String.valueOf(f.getFileName()).length() + 28).max()
        .orElse(0));
    long bytes = 0;
    for (Path f : files) {
      bytes += java.nio.file.Files.isRegularFile(f) ? java.nio.file.Files.size(f) : 0;
    }
    // below SIMD_MIN_BYTES the scalar reference kernels finish first (same numbers): see SIMD_MIN_BYTES
    int failed;
    try {
      failed = bytes >= SIMD_MIN_BYTES ? analyzeFiles(w, chosen, all, width)
          : Simd.reference(() -> analyzeFiles(w, chosen, all, width));
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
    w.flush();
    if (failed == files.size()) { // nothing was read: no outputs (a --plots folder made for them goes again)
      if (plotsCreated) java.nio.file.Files.deleteIfExists(plots);
      return 2;
    }
    if (json != null) {
      try {
        TensorAnalysis.writeJson(json,
            "taco " + String.join(" ", spec.commandLine().getParseResult().originalArgs()), all);
      } catch (java.io.IOException e) { // AtomicFile's message names the file and the reason
        throw new IllegalArgumentException("--json: " + e.getMessage());
      }
      w.println("wrote " + json);
    }
    if (plots != null) {
      w.println("wrote plots to " + plots);
    }
    return failed == 0 ? 0 : 2;
  }

  /**
   * Files of fewer bytes than this in all are coded by the scalar reference kernels ({@link Simd#reference}), larger
   * jobs by the SIMD ones; the numbers are the same. The Vector API kernels run slowly until C2 has compiled them, about
   * 1.8 s of a JVM's first tensors per codec on the 2-core development machine, and are faster after: 2026-12-02, one
   * 8192 x 1024 float32 file (32 MiB), {@code --codec taco}: 3.23 s SIMD against 1.45 s scalar, three such files 3.36 s
   * against 2.37 s (0.07 s against 0.46 s a tensor once warm); all twelve codecs on a 2048 x 1024 file: 8.0 s against
   * 2.5 s. The break-even is near 150 MiB.
   */
  static final long SIMD_MIN_BYTES = 128L << 20;

  /** Analyses every file, printing as it goes; returns how many files could not be read. */
  private int analyzeFiles(PrintWriter w, Map<String, AbstractCodec> chosen, List<TensorAnalysis.Row> all, int width) {
    boolean headed = false; // the header comes with the first row: none when every file failed
    int failed = 0;
    int seq = 0;
    for (Path f : files) {
      List<NamedTensor> tensors;
      try {
        tensors = TensorFiles.read(f);
      } catch (TensorFileException e) {
        w.flush();
        System.err.println("taco: error: " + e.getMessage());
        failed++;
        continue;
      }
      if (tensors.isEmpty()) { // read fine, but there is nothing to measure: say so, not silence
        w.flush();
        System.err.println("taco: " + f + ": holds no tensors");
      }
      for (NamedTensor t : tensors) {
        List<TensorAnalysis.Row> rows = TensorAnalysis.analyze(f.toString(), t, chosen);
        int codecWidth = TensorAnalysis.codecWidth(chosen.keySet());
        if (!headed) TensorAnalysis.printHeader(w, width, codecWidth);
        headed = true;
        rows.forEach(r -> TensorAnalysis.printRow(w, width, codecWidth, r));
        all.addAll(rows);
        if (plots != null) {
          Map<String, float[]> decoded = new LinkedHashMap<>();
          for (TensorAnalysis.Row r : rows) {
            if (r.stats() != null) {
              String spec = r.codec().replace(TensorAnalysis.COLUMNS, "");
              decoded.put(r.codec(), TensorAnalysis.roundTrip(chosen.get(spec), t));
            }
          }
          String label = rows.get(0).label();
          // the sequence number keeps names apart, so the label is cut to keep file names short (255 bytes at most)
          String safe = label.replaceAll("[^A-Za-z0-9._-]+", "_");
          String prefix = String.format("%03d-%s", seq++, safe.length() > MAX_LABEL ? safe.substring(0, MAX_LABEL - 1)
              + "~" : safe);
          if (t.size() > 0) {
            try {
              log.debug("plots: {}", AnalyzePlots.write(plots, prefix, label, t, decoded));
            } catch (IOException e) {
              throw new UncheckedIOException(e); // back to an IOException in call()
            }
          }
        }
      }
    }
    return failed;
  }
}
