package dev.taco.bench;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.taco.codec.AbstractCodec;
import dev.taco.codec.CodecStats;
import dev.taco.codec.Codecs;
import dev.taco.collective.CollectiveSites;
import dev.taco.runtime.JsonFiles;
import dev.taco.runtime.analyze.NamedTensor;
import dev.taco.runtime.analyze.TensorAnalysis;
import dev.taco.runtime.analyze.TensorFiles;
import dev.taco.runtime.train.Report;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Stream;

/**
 * The codec table of the project: for every codec, its error on real TP tensors, its wire bytes, its GPU compress
 * speed, the loss it costs in training and the end-to-end speed-up it buys, side by side, each figure from the file
 * that measured it and null where none did.
 *
 * <ul>
 *   <li>Error ({@code rel_l2}, {@code snr_db}, {@code zero_collapse}: the element-level rate, {@code saturated}: the
 *       fraction of values clipped): {@link CodecStats} of one encode and decode of each tensor that a training run
 *       handed its TP collectives ({@code taco train --dump-sites}), averaged over the tensors of each source
 *       ({@code --sites LABEL=PATH}: a {@code .safetensors} dump or a folder of them, measured here, or the per-tensor
 *       rows of an earlier measurement in {@code taco analyze --json}'s format); the flat figures are the mean over the
 *       sources, each source's own under {@code by_source}.
 *   <li>{@code bytes_ratio}: the codec's payload for a 1024 x 768 tensor over {@code none}'s (header included); for
 *       {@code auto}, the bytes per step over {@code none}'s of the end-to-end run below.
 *   <li>{@code gpu_compress_fraction_of_copy}: from GpuCodecBench's JSON ({@code --gpu-codec}): {@code taco} at its
 *       defaults on 64 MiB of bf16, {@code mxfp4} / {@code nvfp4} from its {@code fp4} entries of bf16 input.
 *   <li>{@code loss_gap_by_seed}: from {@link LossGap}'s summary ({@code --loss-gap}), relative, one per seed.
 *   <li>{@code speedup_ib_ndr_tp8}: from GpuE2E's JSON ({@code --e2e}): {@code none}'s step time over the codec's on
 *       the emulated {@code ib-ndr} link at TP = 8 without sequence parallelism, at hidden 768 where that shape was run
 *       (else the smallest hidden there).
 * </ul>
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.CodecTable [--sites LABEL=PATH]... [--codecs LIST] [--gpu-codec FILE]
 * [--loss-gap FILE] [--e2e FILE] [--rows FILE] [--json FILE] [--md FILE]}; {@code --rows} writes the per-tensor
 * figures of the tensors measured here (to give back as {@code --sites LABEL=FILE}). Writes
 * {@code {"command", "date", "machine", "sources", "inputs", "codecs": [{"codec", "bytes_ratio", "rel_l2", "snr_db",
 * "zero_collapse", "saturated", "gpu_compress_fraction_of_copy", "loss_gap_by_seed", "speedup_ib_ndr_tp8",
 * "by_source"}]}} and a markdown page that says where each column came from. Bad input: a one-line error, exit 2.
 */
public final class CodecTable {
  private CodecTable() {}

  /** The table's rows, in order; {@code auto} chooses among codecs per site, so only run figures apply to it. */
  static final List<String> CODECS = List.of("none", "fp8-tensor", "fp8-group", "int8-group", "int4-group",
      "hadamard-int8", "mxfp4", "mxfp4:hadamard=off", "nvfp4", "nvfp4:hadamard=on", "nccl-fp8", "nccl-fp8:e5m2", "taco",
      "taco:e5m2", CollectiveSites.AUTO);

  /** The tensor whose payload {@code bytes_ratio} compares: 1024 tokens of GPT-2 small's hidden 768. */
  static final int RATIO_ROWS = 1024, RATIO_COLS = 768;

  /** The end-to-end configuration of {@code speedup_ib_ndr_tp8}. */
  static final String LINK = "ib-ndr";
  static final int E2E_TP = 8, E2E_HIDDEN = 768;

  /**
   * One codec's figures over the tensors of one source.
   *
   * @param relL2 mean relative L2 error
   * @param snrDb mean SNR in dB (+Inf if any round trip was exact)
   * @param zeroCollapse mean fraction of non-zero inputs decoded as 0
   * @param groupCollapse mean fraction of non-zero groups decoded as all zeros
   * @param saturated values clipped over all values
   * @param bytesPerElement payload bytes over all values
   * @param tensors tensors measured
   */
  record Stats(double relL2, double snrDb, double zeroCollapse, double groupCollapse, double saturated,
      double bytesPerElement, int tensors) {
    /** The figures by their JSON names. */
    Map<String, Object> asMap() {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("rel_l2", relL2);
      m.put("snr_db", snrDb);
      m.put("zero_collapse", zeroCollapse);
      m.put("group_collapse", groupCollapse);
      m.put("saturated", saturated);
      m.put("bytes_per_element", bytesPerElement);
      m.put("tensors", tensors);
      return m;
    }
  }

  /**
   * Per-tensor figures of one source of tensors.
   *
   * @param label its name in the table ({@code cpu}, {@code gpu})
   * @param origin what it was read from, for the page
   * @param rows one row per tensor and codec
   */
  record Source(String label, String origin, List<TensorAnalysis.Row> rows) {}

  /** The command line, parsed. */
  record Args(List<String[]> sites, List<String> codecs, Path gpuCodec, Path lossGap, Path e2e, Path rows, Path json,
      Path md) {}

  /** Entry point; see the class doc. */
  public static void main(String[] args) {
    System.exit(run(args));
  }

  /** The program; returns the exit status (2 with a one-line message on stderr for bad input). */
  static int run(String[] args) {
    try {
      Args a = parse(args);
      String command = "CodecTable " + String.join(" ", args);
      String load = Alternation.load();
      List<Source> sources = new ArrayList<>();
      for (String[] s : a.sites()) sources.add(source(s[0], Path.of(s[1]), a.codecs()));
      if (a.rows() != null) {
        List<TensorAnalysis.Row> all = new ArrayList<>();
        List<String> origins = new ArrayList<>();
        for (int i = 0; i < sources.size(); i++) {
          if (a.sites().get(i)[1].endsWith(".json")) continue;
          all.addAll(sources.get(i).rows());
          origins.add(sources.get(i).origin());
        }
        // the command field carries what the tensors were, for a table that reads the rows back
        TensorAnalysis.writeJson(a.rows(), command + "; " + String.join("; ", origins), all);
      }
      Map<String, Object> table = table(command, load, sources, a);
      if (a.json() != null) JsonFiles.write(a.json(), table);
      String md = markdown(table);
      if (a.md() != null) Files.writeString(a.md(), md);
      System.out.print(md);
      return 0;
    } catch (IllegalArgumentException e) {
      System.err.println("CodecTable: " + e.getMessage());
      return 2;
    } catch (IOException e) {
      System.err.println("CodecTable: cannot write: " + e);
      return 2;
    }
  }

  static Args parse(String[] args) {
    List<String[]> sites = new ArrayList<>();
    List<String> codecs = CODECS;
    Map<String, Path> files = new LinkedHashMap<>();
    for (int i = 0; i < args.length; i++) {
      String o = args[i];
      if (i + 1 >= args.length) throw new IllegalArgumentException(o + " needs a value; " + USAGE);
      String v = args[++i];
      switch (o) {
        case "--sites" -> {
          String[] kv = v.split("=", 2);
          if (kv.length != 2 || kv[0].isBlank() || kv[1].isBlank()) {
            throw new IllegalArgumentException("--sites takes LABEL=PATH, got '" + v + "'");
          }
          sites.add(kv);
        }
        case "--codecs" -> codecs = Codecs.parseList(v, java.util.Set.of(CollectiveSites.AUTO));
        case "--gpu-codec", "--loss-gap", "--e2e", "--rows", "--json", "--md" -> files.put(o, Path.of(v));
        default -> throw new IllegalArgumentException("unknown option " + o + "; " + USAGE);
      }
    }
    return new Args(sites, codecs, files.get("--gpu-codec"), files.get("--loss-gap"), files.get("--e2e"),
        files.get("--rows"), files.get("--json"), files.get("--md"));
  }

  static final String USAGE = "usage: CodecTable [--sites LABEL=PATH]... [--codecs A,B,...] [--gpu-codec FILE]"
      + " [--loss-gap FILE] [--e2e FILE] [--rows FILE] [--json FILE] [--md FILE]";

  /**
   * A source of tensors: {@code path} a {@code .safetensors} file or a folder of them (every codec measured on every
   * tensor now), or a {@code .json} of per-tensor rows ({@code taco analyze --json}'s format).
   *
   * @throws IllegalArgumentException for a missing or malformed file, a folder without tensors, naming the file
   */
  static Source source(String label, Path path, List<String> codecs) {
    if (path.toString().endsWith(".json")) return rowsFile(label, path);
    List<Path> files;
    if (Files.isDirectory(path)) {
      try (Stream<Path> s = Files.list(path)) {
        files = s.filter(p -> p.toString().endsWith(".safetensors")).sorted().toList();
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
      if (files.isEmpty()) throw new IllegalArgumentException("--sites " + path + ": no .safetensors file in it");
    } else {
      files = List.of(path);
    }
    Map<String, AbstractCodec> measured = TensorAnalysis.codecs(codecs.stream()
        .filter(c -> !c.equals(CollectiveSites.AUTO)).toList());
    List<TensorAnalysis.Row> rows = new ArrayList<>();
    java.util.Set<String> shapes = new java.util.TreeSet<>();
    int tensors = 0;
    for (Path f : files) {
      for (NamedTensor t : TensorFiles.read(f)) {
        rows.addAll(TensorAnalysis.analyze(f.toString(), t, measured));
        shapes.add(t.shapeString());
        tensors++;
      }
    }
    Map<String, String> meta;
    try {
      meta = dev.taco.runtime.analyze.SafetensorsReader.metadata(files.get(0));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    String run = meta.containsKey("step") && meta.containsKey("run") ? ", step " + meta.get("step") + " of a "
        + meta.get("compression") + " run (" + meta.get("run") + ")" : "";
    return new Source(label, path + ": " + tensors + " tensors (" + String.join(", ", shapes) + ") in " + files.size()
        + " file(s)" + run, rows);
  }

  private static final com.google.gson.Gson GSON = new com.google.gson.Gson();

  /** The rows of a {@code taco analyze --json} file (an SNR of null beside no error is an exact round trip's). */
  static Source rowsFile(String label, Path path) {
    ResultFile f = ResultFile.read("per-tensor rows (taco analyze --json)", path);
    List<TensorAnalysis.Row> rows = new ArrayList<>();
    java.util.Set<String> tensors = new java.util.HashSet<>();
    for (JsonElement e : f.array(f.root(), "results")) {
      JsonObject r = f.object(e, "a result");
      int[] shape = GSON.fromJson(r.get("shape"), int[].class);
      JsonElement err = r.get("error");
      CodecStats s = null;
      if (err == null || err.isJsonNull()) {
        long n = 1;
        for (int d : shape) n *= d;
        double snr = f.number(r, "snr_db");
        s = new CodecStats((int) n, f.number(r, "rel_l2"), Double.isNaN(snr) ? Double.POSITIVE_INFINITY : snr,
            f.number(r, "cosine"), f.number(r, "max_abs_err"), f.number(r, "zero_collapse_rate"),
            f.number(r, "group_collapse_rate"), (long) f.number(r, "saturated"), f.number(r, "bytes_per_element"));
      }
      rows.add(new TensorAnalysis.Row(f.string(r, "file"), f.string(r, "tensor"), shape, f.string(r, "dtype"),
          f.string(r, "codec"), s, s == null ? err.getAsString() : null));
      tensors.add(f.string(r, "file") + ":" + f.string(r, "tensor"));
    }
    return new Source(label, path + ": " + tensors.size() + " tensors measured earlier (" + f.label("command", "?")
        + ")", rows);
  }

  /** {@code codec}'s figures over {@code source}'s tensors; null where none of its rows has figures. */
  static Stats stats(Source source, String codec) {
    double rel = 0, snr = 0, zero = 0, group = 0, sat = 0, bytes = 0, n = 0;
    int count = 0;
    for (TensorAnalysis.Row r : source.rows()) {
      if (r.stats() == null || !r.codec().replace(TensorAnalysis.COLUMNS, "").equals(codec)) continue;
      CodecStats s = r.stats();
      rel += s.relL2();
      snr += s.snrDb();
      zero += s.zeroCollapseRate();
      group += s.groupCollapseRate();
      sat += s.saturated();
      bytes += s.bytesPerElement() * s.n();
      n += s.n();
      count++;
    }
    return count == 0 ? null : new Stats(rel / count, snr / count, zero / count, group / count, sat / n, bytes / n,
        count);
  }

  /** The table as the JSON's root object. */
  static Map<String, Object> table(String command, String load, List<Source> sources, Args a) {
    ResultFile gpuCodec = a.gpuCodec() == null ? null : ResultFile.read("gpu-codec.json (GpuCodecBench)", a.gpuCodec());
    ResultFile lossFile = a.lossGap() == null ? null : ResultFile.read(LossGap.WHAT, a.lossGap());
    List<LossGap.Run> runs = lossFile == null ? List.of() : LossGap.read(lossFile);
    Map<String, List<Double>> gaps = LossGap.gaps(runs);
    E2e e2e = a.e2e() == null ? null : E2e.read(ResultFile.read("gpu-e2e.json (GpuE2E)", a.e2e()));
    AbstractCodec none = Codecs.byName("none");
    List<Map<String, Object>> rows = new ArrayList<>();
    for (String c : a.codecs()) {
      boolean auto = c.equals(CollectiveSites.AUTO);
      Map<String, Stats> by = new LinkedHashMap<>();
      for (Source s : sources) by.put(s.label(), auto ? null : stats(s, c));
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("codec", c);
      m.put("bytes_ratio", auto ? (e2e == null ? null : e2e.byteRatio(c)) : (Double) (Codecs.byName(c)
          .encodedSize(RATIO_ROWS, RATIO_COLS) / (double) none.encodedSize(RATIO_ROWS, RATIO_COLS)));
      m.put("rel_l2", mean(by, Stats::relL2));
      m.put("snr_db", mean(by, Stats::snrDb));
      m.put("zero_collapse", mean(by, Stats::zeroCollapse));
      m.put("saturated", mean(by, Stats::saturated));
      m.put("gpu_compress_fraction_of_copy", gpuCodec == null ? null : gpuFraction(gpuCodec, c));
      m.put("loss_gap_by_seed", gaps.get(c));
      m.put("speedup_ib_ndr_tp8", e2e == null ? null : e2e.speedup(c));
      Map<String, Object> bySource = new LinkedHashMap<>();
      by.forEach((k, v) -> bySource.put(k, v == null ? null : v.asMap()));
      m.put("by_source", bySource);
      rows.add(m);
    }
    Map<String, Object> srcs = new LinkedHashMap<>();
    for (Source s : sources) srcs.put(s.label(), s.origin());
    Map<String, Object> inputs = new LinkedHashMap<>();
    inputs.put("gpu_codec", gpuCodec == null ? null : gpuCodec.path() + " (" + gpuCodec.label("device", "?") + ", "
        + gpuCodec.label("config", "") + ")");
    inputs.put("loss_gap", lossFile == null ? null : lossFile.path() + " (" + lossFile.label("device", "?") + "; "
        + grid(lossFile) + ")");
    inputs.put("loss_gap_seeds", LossGap.seeds(runs));
    inputs.put("e2e", e2e == null ? null : e2e.describe());
    Map<String, Object> machine = new LinkedHashMap<>(Report.machine());
    machine.put("cpu", cpuModel());
    machine.put("loadavg", load);
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("command", command);
    root.put("date", java.time.Instant.now().truncatedTo(java.time.temporal.ChronoUnit.SECONDS).toString());
    root.put("machine", machine);
    root.put("sources", srcs);
    root.put("inputs", inputs);
    root.put("codecs", rows);
    return root;
  }

  /** The shape and schedule of a loss-gap summary's runs, in a line. */
  static String grid(ResultFile f) {
    JsonObject c = f.object(f.root().get("config"), "\"config\"");
    StringBuilder b = new StringBuilder();
    for (String k : List.of("tensor_model_parallel_size", "num_layers", "hidden_size", "num_attention_heads",
        "seq_length", "micro_batch_size", "steps", "lr")) {
      if (c.has(k)) b.append(b.isEmpty() ? "" : ", ").append(k.replace('_', ' ')).append(' ').append(c.get(k));
    }
    return b.toString();
  }

  /** The mean over the sources that measured the codec; null where none did. */
  private static Double mean(Map<String, Stats> by, java.util.function.ToDoubleFunction<Stats> f) {
    List<Stats> have = by.values().stream().filter(java.util.Objects::nonNull).toList();
    return have.isEmpty() ? null : have.stream().mapToDouble(f).average().orElseThrow();
  }

  /**
   * GpuCodecBench's fraction of a copy for {@code codec}: {@code taco} from its {@code sizes} entry of 64 MiB (the
   * codec at its defaults, bf16 input), {@code mxfp4} / {@code nvfp4} from the {@code fp4} entry of the same codec
   * and bf16 input; null for the others.
   */
  static Double gpuFraction(ResultFile f, String codec) {
    if (codec.equals("taco")) {
      for (JsonElement e : f.array(f.root(), "sizes")) {
        JsonObject s = f.object(e, "a \"sizes\" entry");
        if (f.number(s, "mib") == 64) return f.number(s, "compress_fraction_of_copy");
      }
      return null;
    }
    if (!f.root().has("fp4") || codec.equals(CollectiveSites.AUTO)) return null;
    String canonical = Codecs.byName(codec).toString();
    for (JsonElement e : f.array(f.root(), "fp4")) {
      JsonObject s = f.object(e, "an \"fp4\" entry");
      if (f.string(s, "input").equals("bf16") && Codecs.byName(f.string(s, "codec")).toString().equals(canonical)) {
        return f.number(s, "compress_fraction_of_copy");
      }
    }
    return null;
  }

  /**
   * GpuE2E's rows on {@link #LINK} at TP = {@link #E2E_TP} without sequence parallelism, at one hidden size.
   *
   * @param file the file
   * @param hidden the hidden size chosen: {@link #E2E_HIDDEN} if run, else the smallest
   * @param rows codec to its row at that hidden size (the last: a file that appends a later run of the same
   *     configuration, as bench/results/gpu-e2e.json does, compares that run's codecs with that run's none)
   */
  record E2e(ResultFile file, int hidden, Map<String, JsonObject> rows) {
    static E2e read(ResultFile f) {
      List<JsonObject> match = new ArrayList<>();
      for (JsonElement e : f.array(f.root(), "results")) {
        JsonObject r = f.object(e, "a result");
        if (f.string(r, "profile").equals(LINK) && f.number(r, "tp") == E2E_TP && !f.flag(r, "sp")) {
          match.add(r);
        }
      }
      int hidden = match.stream().anyMatch(r -> f.number(r, "hidden") == E2E_HIDDEN) ? E2E_HIDDEN
          : match.stream().mapToInt(r -> (int) f.number(r, "hidden")).min().orElse(-1);
      Map<String, JsonObject> rows = new LinkedHashMap<>();
      for (JsonObject r : match) if (f.number(r, "hidden") == hidden) rows.put(f.string(r, "codec"), r);
      return new E2e(f, hidden, rows);
    }

    /** {@code none}'s step time over {@code codec}'s; null where either was not run. */
    Double speedup(String codec) {
      JsonObject n = rows.get("none"), c = rows.get(codec);
      return n == null || c == null ? null : file.number(n, "step_ms") / file.number(c, "step_ms");
    }

    /** {@code codec}'s bytes per step over {@code none}'s; null where either was not run. */
    Double byteRatio(String codec) {
      JsonObject n = rows.get("none"), c = rows.get(codec);
      return n == null || c == null ? null : file.number(c, "bytes_per_step") / file.number(n, "bytes_per_step");
    }

    String describe() {
      JsonObject any = rows.values().stream().findFirst().orElse(null);
      String shape = any == null ? "no row on " + LINK + " at TP=" + E2E_TP
          : String.format(Locale.ROOT, "D=%d L=%d H=%d T=%d B=%d", (int) file.number(any, "hidden"),
              (int) file.number(any, "layers"), (int) file.number(any, "heads"), (int) file.number(any, "seq"),
              (int) file.number(any, "micro_batch"));
      return file.path() + " (" + file.label("device", "?") + "; emulated " + LINK + ", TP=" + E2E_TP + ", " + shape
          + ")";
    }
  }

  /** The page: the table, its sources and how to read it. */
  @SuppressWarnings("unchecked")
  static String markdown(Map<String, Object> t) {
    StringBuilder b = new StringBuilder("# Every codec, side by side\n\n");
    Map<String, Object> machine = (Map<String, Object>) t.get("machine");
    b.append("`").append(t.get("command")).append("`, ").append(t.get("date")).append("; ").append(machine.get("cpu"))
        .append(", ").append(machine.get("cores")).append(" cores, ").append(machine.get("jdk")).append("; load ")
        .append(machine.get("loadavg")).append(".\n\n");
    Map<String, Object> sources = (Map<String, Object>) t.get("sources"), in = (Map<String, Object>) t.get("inputs");
    b.append("- Tensors of the error columns: ").append(sources.isEmpty() ? "**none given** (no `--sites`)"
        : String.join("; ", sources.entrySet().stream().map(e -> "`" + e.getKey() + "` " + e.getValue()).toList()))
        .append('\n');
    b.append("- GPU compress: ").append(given(in.get("gpu_codec"), "gpu-codec.json")).append('\n');
    b.append("- Loss gap: ").append(given(in.get("loss_gap"), "loss-gap summary")).append(in.get("loss_gap") == null
        ? "" : "; seeds " + in.get("loss_gap_seeds")).append('\n');
    b.append("- Speed-up: ").append(given(in.get("e2e"), "gpu-e2e.json")).append("\n\n");
    b.append("| codec | bytes vs bf16 | rel L2 | SNR dB | zero-collapse | saturated | GPU compress / copy | loss gap by"
        + " seed | speed-up ib-ndr TP=8 |\n|---|---|---|---|---|---|---|---|---|\n");
    List<Map<String, Object>> rows = (List<Map<String, Object>>) t.get("codecs");
    for (Map<String, Object> r : rows) {
      b.append("| ").append(r.get("codec")).append(" | ").append(fmt(r.get("bytes_ratio"), "%.3f", 1)).append(" | ")
          .append(fmt(r.get("rel_l2"), "%.3g %%", 100)).append(" | ").append(fmt(r.get("snr_db"), "%.1f", 1))
          .append(" | ").append(fmt(r.get("zero_collapse"), "%.2e", 1)).append(" | ")
          .append(fmt(r.get("saturated"), "%.2g %%", 100)).append(" | ")
          .append(fmt(r.get("gpu_compress_fraction_of_copy"), "%.2f", 1)).append(" | ");
      List<Double> gaps = (List<Double>) r.get("loss_gap_by_seed");
      b.append(gaps == null ? "—" : String.join(" / ", gaps.stream().map(g -> fmt(g, "%+.3f %%", 100)).toList()))
          .append(" | ").append(fmt(r.get("speedup_ib_ndr_tp8"), "%.2fx", 1)).append(" |\n");
    }
    if (sources.size() > 1) {
      b.append("\nBy source (rel L2, SNR dB, saturated; tensors):\n\n| codec |");
      sources.keySet().forEach(k -> b.append(' ').append(k).append(" |"));
      b.append("\n|---|").append("---|".repeat(sources.size())).append('\n');
      for (Map<String, Object> r : rows) {
        b.append("| ").append(r.get("codec")).append(" |");
        for (Object o : ((Map<String, Object>) r.get("by_source")).values()) {
          Map<String, Object> s = (Map<String, Object>) o;
          b.append(' ').append(s == null ? "—" : fmt(s.get("rel_l2"), "%.3g %%", 100) + ", "
              + fmt(s.get("snr_db"), "%.1f", 1) + ", " + fmt(s.get("saturated"), "%.2g %%", 100) + "; "
              + s.get("tensors")).append(" |");
        }
        b.append('\n');
      }
    }
    b.append(HOW_TO_READ);
    return b.toString();
  }

  private static String given(Object what, String file) {
    return what == null ? "**not given** (no " + file + "): its column is — throughout" : what.toString();
  }

  /** {@code v * scale} in {@code format}; an em dash for null or a figure that is not finite. */
  static String fmt(Object v, String format, double scale) {
    if (!(v instanceof Number n) || !Double.isFinite(n.doubleValue())) {
      return v instanceof Double d && d == Double.POSITIVE_INFINITY ? "∞" : "—";
    }
    double x = n.doubleValue() * scale;
    return x == 0 ? "0" : String.format(Locale.ROOT, format, x);
  }

  static final String HOW_TO_READ = """

      How to read it:

      - **bytes vs bf16**: the payload of a 1024 x 768 tensor (GPT-2 small's hidden size) under the codec over
        `none`'s (bf16, what Megatron-LM sends), header and scales included; each value is sent twice by a two-shot
        all-reduce under every codec alike. `auto` picks a codec per site, so its figure is the bytes per training step
        of the end-to-end run over `none`'s, where given.
      - **rel L2, SNR, zero-collapse, saturated**: one encode and decode of every tensor the model handed its TP
        collectives in one training step (the partial sums of the all-reduces, forward activations and backward
        gradients, at most 1024 token rows each), averaged over the tensors, then over the sources. Zero-collapse is
        the fraction of non-zero values decoded as 0; saturated the fraction of values clipped to the format's largest
        (0 by construction for every codec but the 4-bit floats). `nccl-fp8` is measured alone here (one tensor cast
        with its own absmax): its extra loss in the collective, FP8 sums along NCCL's ring, is in
        [nccl-fp8.md](nccl-fp8.md). Calibrated runs choose G, the Hadamard transform and the layout per site; these
        columns measure each codec at its defaults. `auto`: — (its plans differ per site).
      - **GPU compress / copy**: the fused compress kernel's effective bandwidth as a fraction of a device copy of the
        same bytes ([gpu-codec.json](gpu-codec.json)); measured for `taco` (G=64, Hadamard, E4M3, bf16 input) and the
        4-bit floats only.
      - **loss gap by seed**: (final validation loss with the codec − with `none`) / with `none`, for runs that differ
        only in the codec, paired by seed (the loss-gap summary above says the shape and the steps); a spread over
        seeds as wide as the gap means no measurable cost.
      - **speed-up**: `none`'s training step time over the codec's, rank 0 of TP = 8 on one GPU with every exchange
        held for the emulated `ib-ndr` link's time (docs/design.md §9): an emulated link, not a cluster.
      - —: not measured (the input above says which file was missing, or the file has no figure for that codec).
      """;

  /** The CPU's model name (Linux), or the architecture. */
  static String cpuModel() {
    try (Stream<String> lines = Files.lines(Path.of("/proc/cpuinfo"))) {
      return lines.filter(l -> l.startsWith("model name")).map(l -> l.substring(l.indexOf(':') + 1).strip())
          .findFirst().orElse(System.getProperty("os.arch"));
    } catch (IOException | UncheckedIOException e) {
      return System.getProperty("os.arch");
    }
  }
}
