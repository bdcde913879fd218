package dev.taco.bench;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import dev.taco.runtime.JsonFiles;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;

/**
 * The loss gap of each codec against {@code none}: the final validation loss of training runs that differ only in the
 * codec and the seed (bench/gpu-loss-gap.sh), paired by seed. Collects the runs' {@code report.json} files into one
 * summary, {@code {"command", "device", "config", "runs": [{"codec", "seed", "final_val_loss", "stopped",
 * "wall_seconds"}]}} ({@code config}: the runs' common options, {@code seed} and {@code dump_sites} left out), and
 * computes from a summary each codec's relative gaps {@code (L_codec,s - L_none,s) / L_none,s}, one per seed.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.LossGap --out FILE REPORT.json...}
 */
public final class LossGap {
  private LossGap() {}

  /** What a summary file is, for messages. */
  static final String WHAT = "loss-gap summary (LossGap)";

  /** Options that may differ between the runs of one grid. */
  private static final List<String> PER_RUN = List.of("seed", "dump_sites");

  /**
   * One run's result.
   *
   * @param codec its {@code --compression}
   * @param seed its {@code --seed}
   * @param finalValLoss its final validation loss (NaN where the report has none)
   * @param stopped why it stopped early (report.json's {@code stopped}), or null
   * @param wallSeconds its wall time
   */
  record Run(String codec, long seed, double finalValLoss, String stopped, double wallSeconds) {}

  /** Entry point; see the class doc. Exit status 2 with a one-line message for bad input. */
  public static void main(String[] args) throws IOException {
    try {
      if (args.length < 3 || !args[0].equals("--out")) {
        throw new IllegalArgumentException("usage: LossGap --out FILE REPORT.json...");
      }
      List<Path> reports = new ArrayList<>();
      for (int i = 2; i < args.length; i++) reports.add(Path.of(args[i]));
      JsonFiles.write(Path.of(args[1]), summary("LossGap " + String.join(" ", args), reports));
      System.out.println("wrote " + args[1]);
    } catch (IllegalArgumentException e) {
      System.err.println("LossGap: " + e.getMessage());
      System.exit(2);
    }
  }

  /**
   * The summary of the runs in {@code reports} (taco train's report.json, each of one or several codecs).
   *
   * @throws IllegalArgumentException for a report that cannot be read or lacks a field, a (codec, seed) given twice,
   *     or reports whose options differ in more than {@code seed}, naming the file and the option
   */
  static Map<String, Object> summary(String command, List<Path> reports) {
    if (reports.isEmpty()) throw new IllegalArgumentException("no report.json given");
    Map<String, JsonElement> config = null;
    Path first = null;
    String device = null;
    List<Map<String, Object>> runs = new ArrayList<>();
    java.util.Set<String> seen = new java.util.HashSet<>();
    for (Path p : reports) {
      ResultFile f = ResultFile.read("report.json (taco train)", p);
      JsonObject cfg = f.object(f.root().get("config"), "\"config\"");
      long seed = (long) f.number(cfg, "seed");
      Map<String, JsonElement> common = new LinkedHashMap<>();
      for (Map.Entry<String, JsonElement> e : cfg.entrySet()) {
        if (!PER_RUN.contains(e.getKey())) common.put(e.getKey(), e.getValue());
      }
      if (config == null) {
        config = common;
        first = p;
        device = cfg.has("gpu") ? cfg.get("gpu").getAsString() : f.string(cfg, "device");
      } else if (!config.equals(common)) {
        Map<String, JsonElement> before = config;
        TreeSet<String> keys = new TreeSet<>(before.keySet());
        keys.addAll(common.keySet());
        String key = keys.stream().filter(k -> !Objects.equals(before.get(k), common.get(k))).findFirst().orElseThrow();
        throw f.bad("option " + key + " is " + common.get(key) + " but " + config.get(key) + " in " + first
            + ": the runs of one grid differ only in the codec and the seed");
      }
      for (JsonElement r : f.array(f.root(), "runs")) {
        JsonObject run = f.object(r, "a run");
        String codec = f.string(run, "compression");
        if (!seen.add(codec + "/" + seed)) throw f.bad("a second run of " + codec + " with seed " + seed);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("codec", codec);
        m.put("seed", seed);
        m.put("final_val_loss", f.number(run, "final_val_loss"));
        m.put("stopped", f.optionalString(run, "stopped"));
        m.put("wall_seconds", f.number(run, "wall_seconds"));
        runs.add(m);
      }
    }
    Map<String, Object> root = new LinkedHashMap<>();
    root.put("command", command);
    root.put("device", device);
    root.put("config", config);
    root.put("runs", runs);
    return root;
  }

  /**
   * The runs of a summary file.
   *
   * @throws IllegalArgumentException if it cannot be read or lacks a field, naming the file
   */
  static List<Run> read(ResultFile f) {
    List<Run> out = new ArrayList<>();
    for (JsonElement r : f.array(f.root(), "runs")) {
      JsonObject run = f.object(r, "a run");
      out.add(new Run(f.string(run, "codec"), (long) f.number(run, "seed"), f.number(run, "final_val_loss"),
          f.optionalString(run, "stopped"), f.number(run, "wall_seconds")));
    }
    return out;
  }

  /** The seeds {@code none} ran, ascending: the order of {@link #gaps}' lists. */
  static List<Long> seeds(List<Run> runs) {
    return runs.stream().filter(r -> r.codec().equals("none")).map(Run::seed).sorted().distinct().toList();
  }

  /**
   * Each codec's relative gaps to {@code none} by seed, in ascending seed order over the seeds that {@code none} ran:
   * {@code (L_codec,s - L_none,s) / L_none,s}; NaN where the codec has no run of that seed, or either run stopped
   * early or has no final loss. {@code none} itself maps to zeros where it finished.
   */
  static Map<String, List<Double>> gaps(List<Run> runs) {
    Map<Long, Run> none = new java.util.TreeMap<>(); // by seed, ascending
    for (Run r : runs) if (r.codec().equals("none")) none.put(r.seed(), r);
    Map<String, List<Double>> out = new LinkedHashMap<>();
    for (Run r : runs) out.computeIfAbsent(r.codec(), k -> new ArrayList<>());
    for (Map.Entry<String, List<Double>> e : out.entrySet()) {
      for (Run base : none.values()) {
        Run r = runs.stream().filter(x -> x.codec().equals(e.getKey()) && x.seed() == base.seed()).findFirst()
            .orElse(null);
        boolean ok = r != null && r.stopped() == null && base.stopped() == null;
        e.getValue().add(ok ? (r.finalValLoss() - base.finalValLoss()) / base.finalValLoss() : Double.NaN);
      }
    }
    return out;
  }
}
