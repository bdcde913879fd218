package dev.taco.runtime.analyze;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.CodecStats;
import dev.taco.codec.Codecs;
import dev.taco.kernels.simd.RowSplit;
import dev.taco.runtime.JsonFiles;
import dev.taco.runtime.train.Report;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Measures codecs on users' tensors (docs/design.md §3: relative L2 error, SNR, cosine, max abs error, zero-collapse rate,
 * saturation count, bytes per element) and reports them as a table and as JSON.
 *
 * <p>A tensor of shape {@code [d0, ..., dk]} is viewed as {@code rows x cols} with {@code cols = dk} and
 * {@code rows = d0 * ... * d(k-1)} (1-D: one row; a scalar: 1 x 1), row-major, as the codecs take it.
 */
public final class TensorAnalysis {
  private TensorAnalysis() {}

  /**
   * The codecs {@code taco analyze} measures when {@code --codec} is not given. The one place to change; it will
   * become {@code Codecs.names()} once every baseline is registered.
   */
  public static final List<String> DEFAULT_CODECS = Codecs.names();

  /**
   * One line of the report: a tensor and a codec, with either the measured figures or why there are none.
   *
   * @param file the file as given on the command line
   * @param tensor the tensor's name in the file ({@code ""} for {@code .npy})
   * @param shape the tensor's shape
   * @param dtype the dtype as the file spells it
   * @param codec the codec spec as given ({@code "-"} when the tensor was skipped before any codec ran)
   * @param stats the figures, or null
   * @param message null when {@code stats} is set; else the codec's error (e.g. a NaN at some index) or a note
   *     (e.g. a zero-size tensor)
   */
  public record Row(String file, String tensor, int[] shape, String dtype, String codec, CodecStats stats,
      String message) {
    /**
     * The file's name (not its whole path, which stays in {@link #file}) for an unnamed tensor, else
     * {@code name:tensor}: the table's first column and the plots' titles. Control characters (a newline in a tensor
     * name would break the table's rows) are shown as Java escapes: a newline as backslash-n, others as backslash-u
     * and four hex digits.
     */
    public String label() {
      Path name = Path.of(file).getFileName();
      String f = name == null ? file : name.toString();
      String l = tensor.isEmpty() ? f : f + ":" + tensor;
      StringBuilder b = new StringBuilder(l.length());
      l.codePoints().forEach(c -> {
        if (c == '\n') b.append("\\n");
        else if (c == '\t') b.append("\\t");
        else if (Character.isISOControl(c)) b.append(String.format("\\u%04x", c));
        else b.appendCodePoint(c);
      });
      return b.toString();
    }
  }

  /**
   * Creates the codecs of the given specs, keyed by spec, failing before any work on a bad name.
   *
   * @param specs names accepted by {@link Codecs#byName}
   * @throws IllegalArgumentException for an unknown codec or parameter
   */
  public static Map<String, AbstractCodec> codecs(List<String> specs) {
    Map<String, AbstractCodec> m = new LinkedHashMap<>();
    for (String s : specs) {
      m.put(s.strip(), Codecs.byName(s));
    }
    return m;
  }

  /**
   * Measures every codec on one tensor. A zero-size tensor gives one row with a note and no codec run; a codec
   * that refuses the tensor (non-finite values, a shape it cannot take) gives a row with its message.
   *
   * @param file the file label for the rows
   * @param t the tensor
   * @param codecs specs to codecs, as from {@link #codecs}
   * @return one row per codec (one row in all for a zero-size tensor)
   */
  public static List<Row> analyze(String file, NamedTensor t, Map<String, AbstractCodec> codecs) {
    List<Row> rows = new ArrayList<>();
    if (t.size() == 0) {
      rows.add(new Row(file, t.name(), t.shape(), t.dtype(), "-", null, "zero-size tensor, skipped"));
      return rows;
    }
    for (Map.Entry<String, AbstractCodec> c : codecs.entrySet()) {
      try {
        AbstractCodec codec = c.getValue();
        // a tensor narrower than a group (1000 x 1) would pad every row to G: measure it along its other axis
        boolean across = alongColumns(codec, t);
        CodecStats s = across ? CodecStats.measure(codec, transpose(t.data(), t.rows(), t.cols()), t.cols(), t.rows())
            : CodecStats.measure(codec, t.data(), t.rows(), t.cols());
        rows.add(new Row(file, t.name(), t.shape(), t.dtype(), c.getKey() + (across ? COLUMNS : ""), s, null));
      } catch (IllegalArgumentException e) {
        rows.add(new Row(file, t.name(), t.shape(), t.dtype(), c.getKey(), null, e.getMessage()));
      }
    }
    return rows;
  }

  /**
   * Whether {@code codec} takes {@code t} along its columns: when its rows are shorter than the codec's group and it
   * has more rows than columns (each row would be padded to a whole group: a 1000 x 1 tensor cost 69 bytes per element
   * under {@code taco}, against about 1 along its 1000 values).
   */
  static boolean alongColumns(AbstractCodec codec, NamedTensor t) {
    return codec.groupSize() > 0 && t.cols() < codec.groupSize() && t.rows() > t.cols();
  }

  /** The (cols, rows) transpose of the row-major (rows, cols) {@code x}, row-major. */
  static float[] transpose(float[] x, int rows, int cols) {
    float[] out = new float[rows * cols];
    dev.taco.kernels.cpu.Transpose.transpose(x, 0, rows, cols, out, 0);
    return out;
  }

  /**
   * Encodes and decodes {@code t} with {@code codec}, a large tensor's rows split over every core
   * ({@link RowSplit}: the result is the one-thread result).
   *
   * @return the decoded float32 values, {@code t.size()} of them
   * @throws IllegalArgumentException if the codec refuses the tensor
   */
  public static float[] roundTrip(AbstractCodec codec, NamedTensor t) {
    boolean across = alongColumns(codec, t);
    int rows = across ? t.cols() : t.rows(), cols = across ? t.rows() : t.cols();
    byte[] buf = new byte[codec.encodedSize(rows, cols)];
    float[] y = new float[t.size()];
    RowSplit.withThreads(Runtime.getRuntime().availableProcessors(), RowSplit.MIN_BLOCK, () -> {
      int len = codec.encode(across ? transpose(t.data(), t.rows(), t.cols()) : t.data(), 0, rows, cols, buf, 0);
      codec.decode(buf, 0, len, y, 0, false);
      return y;
    });
    return across ? transpose(y, rows, cols) : y;
  }

  /** What a row's codec label adds when the tensor was coded along its columns (see {@link #alongColumns}). */
  public static final String COLUMNS = " (columns)";

  /**
   * The width of the table's codec column for these codec specs: the longest spec with the {@code " (columns)"} that
   * a row coded along the columns adds, at least 24.
   */
  public static int codecWidth(java.util.Collection<String> specs) {
    return Math.max(24, specs.stream().mapToInt(s -> (s + COLUMNS).length()).max().orElse(0));
  }

  /**
   * Prints the header line of the table; {@code width} is the width of the tensor column, {@code codecWidth} that of
   * the codec column ({@link #codecWidth}).
   */
  public static void printHeader(PrintWriter w, int width, int codecWidth) {
    w.printf("%-" + width + "s %-12s %-6s %-" + codecWidth + "s %10s %8s %10s %10s %10s %9s %7s%n", "tensor", "shape",
        "dtype", "codec", "rel L2", "SNR dB", "cosine", "max |err|", "zero-coll", "saturated", "B/elem");
  }

  /** Prints one row of the table (numbers, or the row's message in their place), in the header's column widths. */
  public static void printRow(PrintWriter w, int width, int codecWidth, Row r) {
    String head = String.format("%-" + width + "s %-12s %-6s %-" + codecWidth + "s", r.label(),
        NamedTensor.shapeString(r.shape()), r.dtype(), r.codec());
    CodecStats s = r.stats();
    if (s == null) {
      w.println(head + " " + r.message());
    } else {
      w.printf(Locale.ROOT, "%s %10.3e %8.2f %10.7f %10.3e %10.2e %9d %7.4f%n", head, s.relL2(), s.snrDb(),
          s.cosine(), s.maxAbsErr(), s.zeroCollapseRate(), s.saturated(), s.bytesPerElement());
    }
  }

  /**
   * Writes the rows as JSON (atomically): {@code command} (the command line), {@code machine}
   * ({@link Report#machine}), {@code results} (one object per row: file, tensor, shape, dtype, codec, rel_l2,
   * snr_db, cosine, max_abs_err, zero_collapse_rate, group_collapse_rate, saturated, bytes_per_element, error;
   * the figures null where the row has an error; strict JSON has no Infinity, so an exact round trip's SNR is null
   * too, beside its {@code rel_l2} of 0 and no error).
   */
  public static void writeJson(Path out, String commandLine, List<Row> rows) throws IOException {
    List<Map<String, Object>> results = new ArrayList<>();
    for (Row r : rows) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("file", r.file());
      m.put("tensor", r.tensor());
      m.put("shape", r.shape());
      m.put("dtype", r.dtype());
      m.put("codec", r.codec());
      CodecStats s = r.stats();
      m.put("rel_l2", s == null ? null : s.relL2());
      m.put("snr_db", s == null ? null : s.snrDb());
      m.put("cosine", s == null ? null : s.cosine());
      m.put("max_abs_err", s == null ? null : s.maxAbsErr());
      m.put("zero_collapse_rate", s == null ? null : s.zeroCollapseRate());
      m.put("group_collapse_rate", s == null ? null : s.groupCollapseRate());
      m.put("saturated", s == null ? null : s.saturated());
      m.put("bytes_per_element", s == null ? null : s.bytesPerElement());
      m.put("error", r.message());
      results.add(m);
    }
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("command", commandLine);
    root.put("machine", Report.machine());
    root.put("results", results);
    JsonFiles.write(out, root);
  }
}
