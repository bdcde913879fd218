package dev.taco.runtime.train;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;
import dev.taco.runtime.JsonFiles;
import dev.taco.runtime.analyze.NamedTensor;
import dev.taco.runtime.analyze.SafetensorsReader;
import dev.taco.runtime.analyze.SafetensorsWriter;
import dev.taco.runtime.analyze.TensorFileException;
import dev.taco.collective.CollectiveSites;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.ParameterTensors;
import java.io.IOException;
import java.io.InputStream;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Training checkpoints in Megatron-LM's layout: {@code DIR/iter_0000010/} per saved step and
 * {@code DIR/latest_checkpointed_iteration.txt} naming the newest complete one.
 *
 * <p>A checkpoint folder holds {@code model.safetensors} (the unsharded float32 weights, named as a GPT-2 state dict:
 * {@code wte.weight} (V,C), {@code wpe.weight} (T,C), {@code h.0.ln_1.weight} (C), {@code h.0.attn.c_attn.weight}
 * (C,3C), ... {@code ln_f.bias} (C); matrices input channels by output channels, as GPT-2's Conv1D; the LM head is
 * tied to {@code wte}), {@code optimizer.safetensors} (AdamW's first and second moments of every tensor, unsharded,
 * {@code exp_avg.<name>} and {@code exp_avg_sq.<name>}) and {@code meta.json}: the format version, the step (the
 * number of optimizer steps done: a resumed run's first step), the model shape, the TP size and codec it was written
 * with, the data position (the batches drawn from the seed's generator, the only random state a run has), the run's
 * options, every collective site's state with its frozen codec plan ({@link CollectiveSites.SiteState}) per
 * data-parallel replica, with data parallelism the gradient sites' state per TP rank ({@code --dp-compression}'s
 * calibrated plans), and each file's size and CRC32C.
 *
 * <p>Each rank's shard is exactly the slice {@link ParameterTensors#slice} takes of the unsharded tensors (replicated
 * tensors are bit-identical on every rank, checked when saving), so a checkpoint loads at any TP size that divides
 * the model: loading reshards it.
 *
 * <p>Writes are atomic: the folder is written as {@code DIR/.iter_0000010.tmp}, every file and the folder flushed to the
 * disk, renamed into place, and only then is {@code latest_checkpointed_iteration.txt} replaced (a temporary file,
 * flushed, renamed). A process killed at any moment leaves the previous checkpoint loadable. The two newest
 * checkpoints are kept.
 */
public final class Checkpoint {
  private static final Logger log = LoggerFactory.getLogger(Checkpoint.class);

  /** Megatron-LM's name of the file that names the newest checkpoint. */
  public static final String LATEST = "latest_checkpointed_iteration.txt";
  /** 2: the sites' state per data-parallel replica; 3: and the data-parallel gradient sites' (2 still loads). */
  static final int FORMAT = 3;
  static final String MODEL = "model.safetensors", OPTIMIZER = "optimizer.safetensors", META = "meta.json";

  private Checkpoint() {}

  /**
   * What a resumed run restores.
   *
   * @param dir the checkpoint folder it came from
   * @param step optimizer steps done (the resumed run's first step)
   * @param params the unsharded weights (TP = 1 arena order, {@link ParameterTensors})
   * @param m AdamW's first moments, unsharded
   * @param v AdamW's second moments, unsharded
   * @param sites every collective site's state, as TP rank 0 of each data-parallel replica had it, by replica
   * @param dpCompression the {@code --dp-compression} of the data-parallel gradient sites, null without them
   * @param dpSites the data-parallel gradient sites' state by TP rank (each DP group's, as its replica 0 had it);
   *     empty without data parallelism
   * @param batchesDrawn training batches drawn from the seed's generator so far
   * @param tp the TP size it was written at
   * @param options the options the run that wrote it had ({@code Options.asMap}), each value as JSON text
   */
  public record State(Path dir, int step, float[] params, float[] m, float[] v,
      List<Map<String, CollectiveSites.SiteState>> sites, String dpCompression,
      List<Map<String, CollectiveSites.SiteState>> dpSites, long batchesDrawn, int tp, Map<String, String> options) {

    /**
     * The options of {@code now} that differ from the checkpoint's, as {@code name now (checkpoint: was)}: {@code
     * steps} too, since the learning-rate schedule runs to the last step. Numbers are compared by value, not as text.
     */
    public List<String> changedOptions(Map<String, Object> now) {
      List<String> out = new ArrayList<>();
      for (Map.Entry<String, Object> e : now.entrySet()) {
        String was = options.get(e.getKey());
        if (was != null && !same(e.getValue(), JsonParser.parseString(was))) {
          out.add(e.getKey() + " " + shown(JsonFiles.toJsonLine(e.getValue())) + " (checkpoint: " + shown(was) + ")");
        }
      }
      return out;
    }

    /**
     * Whether the option value {@code now} is the recorded {@code was}: a number by its value in {@code now}'s type (a
     * float option's 2.0000001E-4 is the 0.00020000001 that another JSON writer makes of it), anything else as JSON.
     */
    private static boolean same(Object now, JsonElement was) {
      if (now instanceof Number n && was.isJsonPrimitive() && was.getAsJsonPrimitive().isNumber()) {
        return switch (n) {
          case Float f -> f == was.getAsFloat();
          case Double d -> d == was.getAsDouble();
          default -> new BigDecimal(n.toString()).compareTo(was.getAsBigDecimal()) == 0;
        };
      }
      return JsonParser.parseString(JsonFiles.toJsonLine(now)).equals(was);
    }

    /**
     * A JSON value as the command line would give it: a float option to float precision (1.00000005E-4: 0.0001),
     * anything else (a whole number such as a seed, a string) as it is.
     */
    private static String shown(String json) {
      if (!json.matches("-?[0-9]+\\.[0-9]+([eE][-+]?[0-9]+)?|-?[0-9]+[eE][-+]?[0-9]+")) return json;
      return new BigDecimal(json).round(new java.math.MathContext(7)).stripTrailingZeros().toPlainString();
    }
  }

  /**
   * The step that {@code dir}'s {@value #LATEST} names (the newest complete checkpoint), or -1 where there is none.
   *
   * @throws IllegalArgumentException if it holds no step number
   */
  public static int latestStep(Path dir) {
    Path latest = dir.resolve(LATEST);
    if (!Files.exists(latest)) return -1;
    try {
      int step = Integer.parseInt(Files.readString(latest).strip());
      if (step < 0) throw new NumberFormatException("negative");
      return step;
    } catch (IOException | NumberFormatException e) {
      throw new IllegalArgumentException("checkpoint " + latest + " does not hold a step number");
    }
  }

  /** The folder name of the checkpoint of {@code step}: {@code iter_0000010}. */
  public static String folderName(int step) {
    return String.format(Locale.ROOT, "iter_%07d", step);
  }

  /**
   * The steps of the checkpoint folders ({@code iter_0000010}, {@link #folderName}) in {@code dir}, ascending.
   *
   * @throws IOException if {@code dir} cannot be listed
   */
  public static List<Integer> savedSteps(Path dir) throws IOException {
    try (var entries = Files.list(dir)) {
      return entries.map(p -> p.getFileName().toString()).filter(n -> n.matches("iter_\\d{7}"))
          .map(n -> Integer.parseInt(n.substring(5))).sorted().toList();
    }
  }

  /**
   * Saves a checkpoint of {@code step} into {@code dir} (created if missing), atomically.
   *
   * @param ranks every TP rank's {@link dev.taco.runtime.model.Gpt#stateToHost} ({@code {params, m, v}}), by rank
   * @param compression the run's codec name
   * @param sites the collective sites' state of TP rank 0 of each data-parallel replica, by replica
   * @param dpCompression the data-parallel gradient sites' codec ({@code --dp-compression}), null without them
   * @param dpSites their state by TP rank (empty without data parallelism)
   * @param batchesDrawn training batches drawn so far
   * @param options the run's options, stored for the record
   * @return the checkpoint folder
   * @throws IllegalStateException if the ranks' copies of a replicated tensor differ
   * @throws IOException if a file cannot be written (the previous checkpoint stays the latest)
   */
  public static Path save(Path dir, int step, GptConfig cfg, float[][][] ranks, String compression,
      List<Map<String, CollectiveSites.SiteState>> sites, String dpCompression,
      List<Map<String, CollectiveSites.SiteState>> dpSites, long batchesDrawn, Map<String, Object> options)
      throws IOException {
    if (ranks.length != cfg.tp())
      throw new IllegalArgumentException("expected " + cfg.tp() + " ranks, got " + ranks.length);
    ParameterTensors full = new ParameterTensors(cfg.withTp(1), 0);
    float[][] unsharded = new float[3][full.fullSize()];
    for (int k = 0; k < 3; k++) {
      boolean[] written = new boolean[full.fullSize()];
      for (int r = 0; r < cfg.tp(); r++) new ParameterTensors(cfg, r).placeInto(ranks[r][k], unsharded[k], written);
    }
    Files.createDirectories(dir);
    Path done = dir.resolve(folderName(step));
    Path tmp = dir.resolve("." + folderName(step) + ".tmp");
    deleteTree(tmp); // a save killed before
    try {
      writeFolder(tmp, step, cfg, unsharded, compression, sites, dpCompression, dpSites, batchesDrawn, options);
    } catch (IOException | RuntimeException e) { // a full disk: no half-written folder left behind
      try {
        deleteTree(tmp);
      } catch (IOException again) {
        e.addSuppressed(again);
      }
      throw e;
    }
    if (Files.exists(done)) { // the same step saved again: the new one replaces it
      Path old = dir.resolve("." + folderName(step) + ".old");
      deleteTree(old);
      Files.move(done, old, StandardCopyOption.ATOMIC_MOVE);
      Files.move(tmp, done, StandardCopyOption.ATOMIC_MOVE);
      deleteTree(old);
    } else {
      Files.move(tmp, done, StandardCopyOption.ATOMIC_MOVE);
    }
    syncFolder(dir);
    Path latestTmp = dir.resolve("." + LATEST + ".tmp");
    writeSynced(latestTmp, step + "\n");
    try {
      Files.move(latestTmp, dir.resolve(LATEST), StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    } catch (AtomicMoveNotSupportedException e) {
      throw new IOException("cannot replace " + dir.resolve(LATEST) + " atomically on this file system", e);
    }
    syncFolder(dir);
    try {
      pruneOlderThanPrevious(dir, step);
    } catch (IOException e) { // the checkpoint is saved and the latest: an old one left behind costs only disk space
      log.warn("saved checkpoint {}, but an older one in {} could not be deleted ({}): delete it yourself", done, dir,
          e.getMessage() != null ? e.getMessage() : e.toString());
    }
    log.info("saved checkpoint {} (step {})", done, step);
    return done;
  }

  /** Writes the checkpoint's files into the new folder {@code tmp}, each flushed to the disk, and the folder. */
  private static void writeFolder(Path tmp, int step, GptConfig cfg, float[][] unsharded, String compression,
      List<Map<String, CollectiveSites.SiteState>> sites, String dpCompression,
      List<Map<String, CollectiveSites.SiteState>> dpSites, long batchesDrawn, Map<String, Object> options)
      throws IOException {
    Files.createDirectories(tmp);
    ParameterTensors full = new ParameterTensors(cfg.withTp(1), 0);
    List<SafetensorsWriter.Tensor> weights = new ArrayList<>(), moments = new ArrayList<>();
    for (ParameterTensors.Tensor t : full.tensors()) {
      int[] shape = shape(t);
      weights.add(new SafetensorsWriter.Tensor(t.name(), shape, unsharded[0], t.fullOffset()));
      moments.add(new SafetensorsWriter.Tensor("exp_avg." + t.name(), shape, unsharded[1], t.fullOffset()));
      moments.add(new SafetensorsWriter.Tensor("exp_avg_sq." + t.name(), shape, unsharded[2], t.fullOffset()));
    }
    Map<String, String> stMeta = Map.of("format", "pt", "step", String.valueOf(step));
    SafetensorsWriter.write(tmp.resolve(MODEL), weights, stMeta);
    SafetensorsWriter.write(tmp.resolve(OPTIMIZER), moments, stMeta);
    Map<String, Object> files = new LinkedHashMap<>();
    for (String f : List.of(MODEL, OPTIMIZER)) {
      files.put(f, Map.of("bytes", Files.size(tmp.resolve(f)), "crc32c", crc32c(tmp.resolve(f))));
    }
    Map<String, Object> meta = new LinkedHashMap<>();
    meta.put("format", FORMAT);
    meta.put("step", step);
    meta.put("compression", compression);
    meta.put("model", modelShape(cfg));
    meta.put("tensor_model_parallel_size", cfg.tp());
    meta.put("data", Map.of("batches_drawn", batchesDrawn,
        "generator", "java.util.SplittableRandom(--seed), one draw per batch (Corpus.batch)"));
    meta.put("options", options);
    meta.put("sites", sitesToJson(sites));
    if (dpCompression != null) {
      meta.put("data_parallel_sites", Map.of("compression", dpCompression, "by_tensor_parallel_rank",
          sitesToJson(dpSites)));
    }
    meta.put("files", files);
    writeSynced(tmp.resolve(META), JsonFiles.toJson(meta));
    syncFolder(tmp);
  }

  private static List<Map<String, Object>> sitesToJson(List<Map<String, CollectiveSites.SiteState>> sites) {
    List<Map<String, Object>> out = new ArrayList<>();
    for (Map<String, CollectiveSites.SiteState> group : sites) {
      Map<String, Object> one = new LinkedHashMap<>();
      group.forEach((name, st) -> one.put(name, siteToJson(st)));
      out.add(one);
    }
    return out;
  }

  /**
   * The newest checkpoint in {@code dir}, checked against this run, or null when {@code dir} holds none (a fresh
   * start, as Megatron-LM does, with a warning).
   *
   * @param cfg this run's model; a checkpoint of another shape is refused, one of another TP size is resharded
   * @param compression this run's codec; a checkpoint written by another codec's run is refused (its sites' plans are
   *     that codec's)
   * @throws IllegalArgumentException naming the file, for a missing folder, a latest file that names no checkpoint, a
   *     truncated, corrupt or malformed file, or a checkpoint that does not fit this run
   */
  public static State load(Path dir, GptConfig cfg, String compression) {
    Described d = described(dir, cfg, compression);
    if (d == null) return null;
    Path ck = d.dir(), metaFile = ck.resolve(META);
    JsonObject meta = d.meta();
    int step = d.step(), tp = d.tp();
    try {
      ParameterTensors full = new ParameterTensors(cfg.withTp(1), 0);
      float[] params = new float[full.fullSize()], m = new float[full.fullSize()], v = new float[full.fullSize()];
      Map<String, NamedTensor> w = byName(ck.resolve(MODEL)), o = byName(ck.resolve(OPTIMIZER));
      for (ParameterTensors.Tensor t : full.tensors()) {
        copy(ck.resolve(MODEL), w, t.name(), t, params);
        copy(ck.resolve(OPTIMIZER), o, "exp_avg." + t.name(), t, m);
        copy(ck.resolve(OPTIMIZER), o, "exp_avg_sq." + t.name(), t, v);
      }
      List<Map<String, CollectiveSites.SiteState>> sites = sitesFromJson(field(metaFile, meta, "sites"));
      if (sites.isEmpty()) throw new IllegalArgumentException("checkpoint " + metaFile + " holds no sites' state");
      String dpCompression = null;
      List<Map<String, CollectiveSites.SiteState>> dpSites = List.of();
      if (meta.has("data_parallel_sites")) {
        JsonObject dp = meta.getAsJsonObject("data_parallel_sites");
        dpCompression = field(metaFile, dp, "compression").getAsString();
        dpSites = sitesFromJson(field(metaFile, dp, "by_tensor_parallel_rank"));
        if (dpSites.size() != tp) {
          throw new IllegalArgumentException("checkpoint " + metaFile + " holds the data-parallel sites of "
              + dpSites.size() + " TP ranks, written at TP=" + tp);
        }
      }
      Map<String, String> options = new LinkedHashMap<>();
      field(metaFile, meta, "options").getAsJsonObject().entrySet()
          .forEach(e -> options.put(e.getKey(), e.getValue().toString()));
      long drawn = integer(metaFile, field(metaFile, meta, "data").getAsJsonObject(), "batches_drawn", 0,
          Long.MAX_VALUE);
      if (tp != cfg.tp()) log.info("checkpoint {} was written at TP={}; resharding it for TP={}", ck, tp, cfg.tp());
      log.info("loaded checkpoint {} (step {})", ck, step);
      return new State(ck, step, params, m, v, sites, dpCompression, dpSites, drawn, tp, options);
    } catch (NullPointerException | ClassCastException | IllegalStateException | UnsupportedOperationException
        | NumberFormatException e) {
      throw lacksField(metaFile, e);
    }
  }

  /** A checkpoint's folder and description, checked against a run, with its step and TP size. */
  private record Described(Path dir, JsonObject meta, int step, int tp) {}

  /**
   * The step of the newest checkpoint in {@code dir}, its description (meta.json, the files' sizes) checked against
   * this run as {@link #load} checks it, without reading its tensors: what telling a finished run from one to resume
   * needs. -1 when {@code dir} holds none.
   *
   * @throws IllegalArgumentException as {@link #load} does
   */
  public static int checkedStep(Path dir, GptConfig cfg, String compression) {
    Described d = described(dir, cfg, compression);
    return d == null ? -1 : d.step();
  }

  private static Described described(Path dir, GptConfig cfg, String compression) {
    if (!Files.isDirectory(dir)) throw new IllegalArgumentException("--load " + dir + ": no such folder");
    Path latest = dir.resolve(LATEST);
    int step = latestStep(dir);
    if (step < 0) {
      List<Integer> saved;
      try {
        saved = savedSteps(dir);
      } catch (IOException e) {
        throw new IllegalArgumentException("--load " + dir + " cannot be read: " + e.getMessage());
      }
      if (!saved.isEmpty()) { // checkpoints without their pointer: starting over would write over them
        throw new IllegalArgumentException("--load " + dir + " holds " + String.join(", ", saved.stream()
            .map(Checkpoint::folderName).toList()) + " but no " + LATEST + ": write the step to resume from into it"
            + " (echo " + saved.getLast() + " > " + latest + "), or load another folder");
      }
      log.warn("--load {}: no {} there, starting from scratch", dir, LATEST);
      return null;
    }
    Path ck = dir.resolve(folderName(step));
    Path metaFile = ck.resolve(META);
    JsonObject meta;
    try {
      meta = JsonParser.parseString(Files.readString(metaFile)).getAsJsonObject();
    } catch (NoSuchFileException e) {
      throw new IllegalArgumentException(
          "checkpoint " + metaFile + " is missing (" + latest + " names step " + step + ")");
    } catch (IOException | JsonParseException | IllegalStateException e) {
      throw new IllegalArgumentException("checkpoint " + metaFile + " is not a valid checkpoint description (truncated"
          + " or corrupt)");
    }
    try {
      long format = integer(metaFile, meta, "format", 0, Integer.MAX_VALUE);
      if (format != FORMAT && format != 2) {
        throw new IllegalArgumentException("checkpoint " + metaFile + " has format " + meta.get("format")
            + ", this version reads 2 and " + FORMAT);
      }
      JsonObject shape = field(metaFile, meta, "model").getAsJsonObject();
      modelShape(cfg).forEach((k, want) -> {
        long got = integer(metaFile, shape, k, 1, Integer.MAX_VALUE);
        if (got != want) {
          throw new IllegalArgumentException("checkpoint " + metaFile + " holds a model with " + k + " " + got
              + ", this run has " + want);
        }
      });
      String written = field(metaFile, meta, "compression").getAsString();
      if (!written.equals(compression)) {
        throw new IllegalArgumentException("checkpoint " + metaFile + " was written by a --compression " + written
            + " run, this run is " + compression
            + " (with several codecs, --save/--load DIR holds one folder per codec)");
      }
      if (integer(metaFile, meta, "step", 0, Integer.MAX_VALUE) != step) {
        throw new IllegalArgumentException(
            "checkpoint " + metaFile + " is of step " + meta.get("step") + ", but " + latest
                + " names step " + step);
      }
      int tp = (int) integer(metaFile, meta, "tensor_model_parallel_size", 1, Integer.MAX_VALUE);
      JsonObject files = field(metaFile, meta, "files").getAsJsonObject();
      for (String f : List.of(MODEL, OPTIMIZER)) {
        checkFile(metaFile, ck.resolve(f), field(metaFile, files, f).getAsJsonObject());
      }
      return new Described(ck, meta, step, tp);
    } catch (NullPointerException | ClassCastException | IllegalStateException | UnsupportedOperationException
        | NumberFormatException e) {
      throw lacksField(metaFile, e);
    }
  }

  private static IllegalArgumentException lacksField(Path metaFile, RuntimeException e) {
    return new IllegalArgumentException("checkpoint " + metaFile + " lacks a field or holds one of the wrong type", e);
  }

  /**
   * {@code o}'s field {@code key} as a whole number in {@code [min, max]}, or a refusal naming the field and the
   * description {@code metaFile} (a string, a fraction or a number out of range is not silently read as another).
   */
  private static long integer(Path metaFile, JsonObject o, String key, long min, long max) {
    JsonElement e = field(metaFile, o, key);
    BigDecimal v = e.isJsonPrimitive() && e.getAsJsonPrimitive().isNumber() ? e.getAsBigDecimal() : null;
    if (v == null || v.signum() != 0 && v.stripTrailingZeros().scale() > 0 || v.compareTo(BigDecimal.valueOf(min)) < 0
        || v.compareTo(BigDecimal.valueOf(max)) > 0) {
      throw new IllegalArgumentException("checkpoint " + metaFile + ": the field \"" + key + "\" must be a whole"
          + " number in [" + min + ", " + max + "], got " + e);
    }
    return v.longValueExact();
  }

  /** {@code o}'s field {@code key}, or a refusal naming it and the description {@code metaFile}. */
  private static JsonElement field(Path metaFile, JsonObject o, String key) {
    JsonElement e = o.get(key);
    if (e == null || e.isJsonNull()) {
      throw new IllegalArgumentException("checkpoint " + metaFile + " lacks the field \"" + key + "\"");
    }
    return e;
  }

  private static Map<String, Integer> modelShape(GptConfig cfg) {
    Map<String, Integer> m = new LinkedHashMap<>();
    m.put("vocab_size", cfg.vocabSize());
    m.put("seq_length", cfg.seqLength());
    m.put("num_layers", cfg.numLayers());
    m.put("hidden_size", cfg.hiddenSize());
    m.put("num_attention_heads", cfg.numHeads());
    return m;
  }

  private static void checkFile(Path metaFile, Path f, JsonObject want) {
    long size;
    try {
      size = Files.size(f);
    } catch (IOException e) {
      throw new IllegalArgumentException("checkpoint file " + f + " is missing");
    }
    long bytes = integer(metaFile, want, "bytes", 0, Long.MAX_VALUE);
    if (size != bytes) {
      throw new IllegalArgumentException(
          "checkpoint file " + f + " holds " + size + " bytes, " + bytes + " were written"
              + (size < bytes ? " (truncated)" : ""));
    }
    String crc;
    try {
      crc = crc32c(f);
    } catch (IOException e) {
      throw new IllegalArgumentException("checkpoint file " + f + " cannot be read: " + e.getMessage());
    }
    if (!crc.equals(field(metaFile, want, "crc32c").getAsString())) {
      throw new IllegalArgumentException("checkpoint file " + f + " is corrupt (CRC32C " + crc + ", written "
          + want.get("crc32c").getAsString() + ")");
    }
  }

  private static Map<String, NamedTensor> byName(Path f) {
    try {
      Map<String, NamedTensor> out = new LinkedHashMap<>();
      for (NamedTensor t : SafetensorsReader.read(f)) out.put(t.name(), t);
      return out;
    } catch (TensorFileException e) {
      throw new IllegalArgumentException("checkpoint file " + e.getMessage());
    } catch (IOException e) {
      throw new IllegalArgumentException("checkpoint file " + f + " cannot be read: " + e.getMessage());
    }
  }

  private static void copy(Path f, Map<String, NamedTensor> tensors, String name, ParameterTensors.Tensor t,
      float[] into) {
    NamedTensor x = tensors.get(name);
    int n = t.fullRows() * t.fullCols();
    if (x == null || !Arrays.equals(x.shape(), shape(t))) {
      throw new IllegalArgumentException("checkpoint file " + f + (x == null ? " has no tensor " + name
          : ": tensor " + name + " has shape " + Arrays.toString(x.shape()) + ", the model needs "
              + Arrays.toString(shape(t))));
    }
    System.arraycopy(x.data(), 0, into, t.fullOffset(), n);
  }

  /** A parameter tensor's full (unsharded) shape as written: {@code [cols]} for a vector, else {@code [rows, cols]}. */
  private static int[] shape(ParameterTensors.Tensor t) {
    return t.fullRows() == 1 ? new int[] {t.fullCols()} : new int[] {t.fullRows(), t.fullCols()};
  }

  private static List<Map<String, CollectiveSites.SiteState>> sitesFromJson(JsonElement groups) {
    List<Map<String, CollectiveSites.SiteState>> out = new ArrayList<>();
    for (JsonElement group : groups.getAsJsonArray()) {
      Map<String, CollectiveSites.SiteState> one = new LinkedHashMap<>();
      for (Map.Entry<String, JsonElement> e : group.getAsJsonObject().entrySet()) {
        one.put(e.getKey(), siteFromJson(e.getValue().getAsJsonObject()));
      }
      out.add(one);
    }
    return out;
  }

  private static Map<String, Object> siteToJson(CollectiveSites.SiteState s) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("uses", s.uses());
    m.put("calibrating", s.calibrating());
    m.put("seen", s.seen());
    m.put("errors", s.errors() == null ? null : infAsNull(s.errors()));
    m.put("energy", s.energy());
    m.put("codec", s.codec());
    m.put("layout", s.layout());
    m.put("permutation", s.permutation());
    m.put("rel_l2", s.relL2());
    return m;
  }

  /** Calibration error sums are finite or +Inf (a plan that does not apply); JSON has no Inf: null stands for it. */
  private static List<Double> infAsNull(double[] a) {
    List<Double> out = new ArrayList<>(a.length);
    for (double x : a) out.add(Double.isFinite(x) ? x : null);
    return out;
  }

  private static CollectiveSites.SiteState siteFromJson(JsonObject o) {
    return new CollectiveSites.SiteState(o.get("uses").getAsInt(), o.get("calibrating").getAsInt(),
        o.get("seen").getAsInt(), doubles(o.get("errors")), doubles(o.get("energy")), string(o.get("codec")),
        string(o.get("layout")), ints(o.get("permutation")), o.get("rel_l2").getAsDouble());
  }

  private static double[] doubles(JsonElement e) {
    if (e == null || e.isJsonNull()) return null;
    JsonArray a = e.getAsJsonArray();
    double[] out = new double[a.size()];
    for (int i = 0; i < out.length; i++)
      out[i] = a.get(i).isJsonNull() ? Double.POSITIVE_INFINITY : a.get(i).getAsDouble();
    return out;
  }

  private static int[] ints(JsonElement e) {
    if (e == null || e.isJsonNull()) return null;
    JsonArray a = e.getAsJsonArray();
    int[] out = new int[a.size()];
    for (int i = 0; i < out.length; i++) out[i] = a.get(i).getAsInt();
    return out;
  }

  private static String string(JsonElement e) {
    return e == null || e.isJsonNull() ? null : e.getAsString();
  }

  static String crc32c(Path f) throws IOException {
    CRC32C crc = new CRC32C();
    byte[] buf = new byte[1 << 16];
    try (InputStream in = Files.newInputStream(f)) {
      for (int n; (n = in.read(buf)) > 0;) crc.update(buf, 0, n);
    }
    return String.format(Locale.ROOT, "%08x", crc.getValue());
  }

  private static void writeSynced(Path f, String text) throws IOException {
    try (FileChannel ch = FileChannel.open(f, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
        StandardOpenOption.TRUNCATE_EXISTING)) {
      ByteBuffer b = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
      while (b.hasRemaining()) ch.write(b);
      ch.force(true);
    }
  }

  /** fsync of a folder, so that the names created or renamed in it are on the disk (Linux; a no-op where refused). */
  private static void syncFolder(Path dir) {
    try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
      ch.force(true);
    } catch (IOException e) {
      log.debug("cannot fsync folder {}: {}", dir, e.toString());
    }
  }

  /** Deletes the checkpoints older than the newest one before {@code step}, and leftovers of killed saves. */
  private static void pruneOlderThanPrevious(Path dir, int step) throws IOException {
    List<Integer> steps = new ArrayList<>(savedSteps(dir));
    steps.sort(Comparator.reverseOrder());
    int kept = 0;
    for (int s : steps) {
      if (s > step) continue; // a newer one from another run into this folder: not ours to delete
      if (kept++ >= 2) deleteTree(dir.resolve(folderName(s)));
    }
  }

  private static void deleteTree(Path p) throws IOException {
    if (!Files.exists(p)) return;
    try (var s = Files.walk(p)) {
      for (Path q : s.sorted(Comparator.reverseOrder()).toList()) Files.delete(q);
    }
  }

  /**
   * A codec spec as a file or folder name (a per-codec checkpoint folder, a site dump): every character but letters,
   * digits and {@code . _ = -} replaced by {@code _}.
   */
  public static String codecName(String codec) {
    return codec.replaceAll("[^A-Za-z0-9._=-]", "_");
  }
}
