package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.runtime.analyze.NamedTensor;
import dev.taco.runtime.cli.TacoCliTest;
import dev.taco.runtime.analyze.SafetensorsReader;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.ParameterTensors;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Checkpoints (docs/design.md §6): a resumed run repeats the uninterrupted run's losses bit for bit on the CPU, codec
 * plans included; a checkpoint reshards to another TP size; damaged or mismatched checkpoints are one-line errors
 * naming the file; a process killed while saving leaves the previous checkpoint loadable.
 */
class CheckpointTest {
  @TempDir
  Path tmp;

  /** The tiny model of the CLI tests, on a small text, with the given extra flags. */
  private TacoCliTest.Result train(Path out, String... more) throws IOException {
    Path text = tmp.resolve("t.txt");
    if (!Files.exists(text)) {
      Files.writeString(text,
          "The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs. ".repeat(80));
    }
    List<String> args = new ArrayList<>(List.of("train", "--num-layers", "2", "--hidden-size", "64",
        "--num-attention-heads", "4", "--seq-length", "16", "--micro-batch-size", "4", "--eval-interval", "3",
        "--eval-iters", "1", "--lr-warmup-iters", "2", "--data", text.toString(), "--out", out.toString()));
    args.addAll(List.of(more));
    return TacoCliTest.run(args.toArray(String[]::new));
  }

  /** {@code history[].train_loss} and {@code val_loss} by step of run {@code run} of a report. */
  static Map<Integer, double[]> losses(Path out, int run) throws IOException {
    JsonObject rep = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    Map<Integer, double[]> m = new java.util.TreeMap<>();
    for (JsonElement e : rep.getAsJsonArray("runs").get(run).getAsJsonObject().getAsJsonArray("history")) {
      JsonObject h = e.getAsJsonObject();
      m.put(h.get("step").getAsInt(), new double[] {num(h.get("train_loss")), num(h.get("val_loss"))});
    }
    return m;
  }

  private static double num(JsonElement e) {
    return e == null || e.isJsonNull() ? Double.NaN : e.getAsDouble();
  }

  /** Every step of {@code resumed} has the losses of {@code whole} at that step, bit for bit (NaN = not evaluated). */
  static void assertSameLosses(Map<Integer, double[]> whole, Map<Integer, double[]> resumed) {
    for (Map.Entry<Integer, double[]> e : resumed.entrySet()) {
      double[] w = whole.get(e.getKey());
      assertThat(w).as("step %d in the uninterrupted run", e.getKey()).isNotNull();
      for (int k = 0; k < 2; k++) {
        assertThat(Double.doubleToRawLongBits(e.getValue()[k])).as("step %d %s", e.getKey(), k == 0 ? "train" : "val")
            .isEqualTo(Double.doubleToRawLongBits(w[k]));
      }
    }
  }

  @Test
  void resumingRepeatsTheUninterruptedRunBitForBitWithCalibratedPlansAtTp2() throws Exception {
    // taco calibrates its sites over the first 2 tensors each: the checkpoint after step 1 holds a calibration in
    // progress, the one after step 4 frozen plans; none and taco run side by side, each under DIR/<codec>/
    Path whole = tmp.resolve("A"), stopped = tmp.resolve("B"), resumed = tmp.resolve("C"), early = tmp.resolve("E");
    Path ck = tmp.resolve("D"), ck1 = tmp.resolve("D1");
    assertThat(train(whole, "--tp", "2", "--steps", "8").status()).isZero();
    TacoCliTest.Result b = train(stopped, "--tp", "2", "--steps", "8", "--save", ck.toString(), "--save-interval", "2",
        "--exit-interval", "4");
    assertThat(b.status()).as(b.err()).isZero();
    assertThat(ck.resolve("none").resolve(Checkpoint.LATEST)).content().isEqualToIgnoringWhitespace("4");
    assertThat(ck.resolve("taco").resolve("iter_0000002")).isDirectory();
    assertThat(losses(stopped, 1).keySet()).as("and the evaluation where it stopped").containsExactly(0, 1, 2, 3, 4);
    assertThat(losses(stopped, 1).get(4)[1]).as("validation loss at the stop").isFinite();
    TacoCliTest.Result c = train(resumed, "--tp", "2", "--steps", "8", "--load", ck.toString());
    assertThat(c.status()).as(c.err()).isZero();
    for (int run = 0; run < 2; run++) {
      assertThat(losses(resumed, run).keySet()).containsExactly(4, 5, 6, 7, 8);
      assertSameLosses(losses(whole, run), losses(resumed, run));
    }
    assertThat(train(early, "--tp", "2", "--steps", "8", "--compression", "taco", "--save", ck1.toString(),
        "--exit-interval", "1").status()).isZero();
    Path fromMid = tmp.resolve("F");
    assertThat(train(fromMid, "--tp", "2", "--steps", "8", "--compression", "taco", "--load", ck1.toString()).status())
        .isZero();
    assertThat(losses(fromMid, 0).keySet()).startsWith(1);
    assertSameLosses(losses(whole, 1), losses(fromMid, 0));
  }

  /**
   * A job run as bench/gpu-continue.sh runs it across device calls, the same command each time (--save and --load one
   * folder, --exit-duration-in-mins shorter than any step, a gzip --data file), takes one step per call, calibration in
   * progress in between, and ends where the uninterrupted run ends, bit for bit: each step's training loss, the final
   * validation loss, and the last checkpoint's weights and AdamW moments byte for byte.
   */
  @Test
  void aRunSplitOverCallsByExitDurationEndsBitForBitAsTheUninterruptedOne() throws Exception {
    Path gz = tmp.resolve("t.txt.gz");
    try (var z = new java.util.zip.GZIPOutputStream(Files.newOutputStream(gz))) {
      z.write("Sphinx of black quartz, judge my vow; how vexingly quick daft zebras jump. ".repeat(90).getBytes(
          java.nio.charset.StandardCharsets.UTF_8));
    }
    Path whole = tmp.resolve("whole"), ckWhole = tmp.resolve("ckWhole"), ck = tmp.resolve("ck");
    List<String> run = List.of("--tp", "2", "--steps", "3", "--compression", "taco", "--calibration-steps", "2",
        "--data", gz.toString());
    List<String> uninterrupted = new ArrayList<>(run), job = new ArrayList<>(run);
    uninterrupted.addAll(List.of("--save", ckWhole.toString()));
    job.addAll(List.of("--save", ck.toString(), "--load", ck.toString(), "--exit-duration-in-mins", "0.000001"));
    TacoCliTest.Result a = train(whole, uninterrupted.toArray(String[]::new));
    assertThat(a.status()).as(a.err()).isZero();
    Map<Integer, double[]> wholeLosses = losses(whole, 0);
    for (int call = 1; call <= 3; call++) {
      Path out = tmp.resolve("call" + call);
      TacoCliTest.Result r = train(out, job.toArray(String[]::new));
      assertThat(r.status()).as(r.err()).isZero();
      JsonObject result = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
          .getAsJsonArray("runs").get(0).getAsJsonObject();
      Map<Integer, double[]> l = losses(out, 0);
      assertThat(l.keySet()).as("call %d", call).containsExactly(call - 1, call);
      assertThat(Double.doubleToRawLongBits(l.get(call - 1)[0])).as("train loss of step %d", call - 1)
          .isEqualTo(Double.doubleToRawLongBits(wholeLosses.get(call - 1)[0]));
      assertThat(ck.resolve(Checkpoint.LATEST)).content().isEqualToIgnoringWhitespace(String.valueOf(call));
      if (call < 3) {
        assertThat(result.get("stopped").getAsString()).isEqualTo("exit-duration");
        assertThat(r.err()).contains("taco: stopped after step " + call + " of taco's run to end within"
            + " --exit-duration-in-mins 0.000001; its checkpoint is in " + ck + ": the same command with --load " + ck
            + " goes on");
      } else {
        assertThat(result.get("stopped")).as("ran to --steps").matches(e -> e == null || e.isJsonNull());
        assertThat(Double.doubleToRawLongBits(l.get(3)[1])).as("final validation loss")
            .isEqualTo(Double.doubleToRawLongBits(wholeLosses.get(3)[1]));
      }
    }
    TacoCliTest.Result done = train(tmp.resolve("call4"), job.toArray(String[]::new));
    assertThat(done.err()).contains("taco: nothing to do");
    for (String f : List.of(Checkpoint.MODEL, Checkpoint.OPTIMIZER)) {
      Path mine = ck.resolve("iter_0000003").resolve(f), theirs = ckWhole.resolve("iter_0000003").resolve(f);
      assertThat(Files.mismatch(mine, theirs)).as("%s byte for byte", f).isEqualTo(-1L);
    }
  }

  /** Without --save, --exit-duration-in-mins is warned about up front; a negative one is refused. */
  @Test
  void anExitDurationWithoutSaveWarnsAndANegativeOneIsRefused() throws Exception {
    TacoCliTest.Result r = train(tmp.resolve("A"), "--tp", "1", "--steps", "3", "--compression", "none",
        "--exit-duration-in-mins", "0.000001");
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.err()).contains("--exit-duration-in-mins without --save: a run stopped in time leaves no checkpoint")
        .contains("taco: stopped after step 1 of none's run to end within --exit-duration-in-mins 0.000001 (no --save:"
            + " nothing to go on from)");
    assertOneLine(train(tmp.resolve("B"), "--steps", "3", "--exit-duration-in-mins", "-1"),
        "--exit-duration-in-mins must be a number >= 0 (0: no limit), got -1.0");
  }

  @Test
  void aSeveralCodecRunStoppedBeforeItsSecondCodecResumesTheFirstAndStartsTheSecond() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("B"), "--tp", "2", "--steps", "6", "--save", ck.toString(), "--exit-interval", "3")
        .status()).isZero();
    deleteTree(ck.resolve("taco")); // as if the run had been stopped before taco's run began
    TacoCliTest.Result r = train(tmp.resolve("C"), "--tp", "2", "--steps", "6", "--load", ck.toString());
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.err()).contains("no checkpoint of taco");
    assertThat(losses(tmp.resolve("C"), 0).keySet()).startsWith(3);
    assertThat(losses(tmp.resolve("C"), 1).keySet()).startsWith(0);
    // one codec's run finds its folder inside a several-codec --load folder
    TacoCliTest.Result one = train(tmp.resolve("E"), "--tp", "2", "--steps", "6", "--compression", "none", "--load",
        ck.toString());
    assertThat(one.status()).as(one.err()).isZero();
    assertThat(losses(tmp.resolve("E"), 0).keySet()).startsWith(3);
    // and saves into it too, keeping the folder's layout: a several-codec run then resumes it
    TacoCliTest.Result back = train(tmp.resolve("H"), "--tp", "2", "--steps", "5", "--compression", "none", "--load",
        ck.toString(), "--save", ck.toString());
    assertThat(back.status()).as(back.err()).isZero();
    assertThat(ck.resolve(Checkpoint.LATEST)).doesNotExist();
    assertThat(Files.readString(ck.resolve("none").resolve(Checkpoint.LATEST)).strip()).isEqualTo("5");
    TacoCliTest.Result both = train(tmp.resolve("I"), "--tp", "2", "--steps", "6", "--load", ck.toString());
    assertThat(both.status()).as(both.err()).isZero();
    assertThat(losses(tmp.resolve("I"), 0).keySet()).startsWith(5);
    // and says so when it holds other codecs' runs but not this one's
    TacoCliTest.Result absent = train(tmp.resolve("G"), "--tp", "2", "--steps", "6", "--compression", "int8-group",
        "--load", ck.toString());
    assertThat(absent.status()).as(absent.err()).isZero();
    assertThat(absent.err()).contains("--load " + ck + " holds checkpoints of other codecs' runs (none), not of"
        + " int8-group: starting int8-group from scratch");
    assertThat(losses(tmp.resolve("G"), 0).keySet()).startsWith(0);
    // a codec with no folder there yet gets its own <codec>/ too, not the folder's root
    TacoCliTest.Result fresh = train(tmp.resolve("J"), "--tp", "2", "--steps", "2", "--compression", "int8-group",
        "--save", ck.toString());
    assertThat(fresh.status()).as(fresh.err()).isZero();
    assertThat(ck.resolve("int8-group").resolve(Checkpoint.LATEST)).exists();
    assertThat(ck.resolve(Checkpoint.LATEST)).doesNotExist();
  }

  /** A later codec's run that fails (here: its checkpoint is corrupt) does not lose the runs that finished before it. */
  @Test
  void aRunThatFailsAfterAnotherFinishedKeepsTheFinishedRunsReport() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("B"), "--tp", "2", "--steps", "4", "--save", ck.toString(), "--exit-interval", "2")
        .status()).isZero();
    Path model = ck.resolve("taco").resolve("iter_0000002").resolve(Checkpoint.MODEL);
    byte[] bytes = Files.readAllBytes(model);
    bytes[bytes.length / 2] ^= 0x10;
    Files.write(model, bytes);
    Path out = tmp.resolve("C");
    TacoCliTest.Result r = train(out, "--tp", "2", "--steps", "4", "--load", ck.toString());
    assertThat(r.status()).as(r.err()).isEqualTo(2); // a checkpoint that cannot be loaded is a usage error
    assertThat(r.err()).contains("run 'taco' failed; the report holds the 1 run(s) before it")
        .contains("taco: error: checkpoint file " + model + " is corrupt");
    assertThat(losses(out, 0).keySet()).as("none's resumed run, in the report").containsExactly(2, 3, 4);
    assertThat(out.resolve("loss.png")).exists();
  }

  @Test
  void savingOverAnEarlierRunsCheckpointsWithoutLoadingThemWarns() throws IOException {
    Path ck = tmp.resolve("D");
    String[] args = {"--tp", "1", "--steps", "2", "--compression", "none", "--save", ck.toString()};
    TacoCliTest.Result first = train(tmp.resolve("A"), args);
    assertThat(first.status()).as(first.err()).isZero();
    assertThat(first.err()).doesNotContain("already holds checkpoints");
    TacoCliTest.Result second = train(tmp.resolve("B"), args);
    assertThat(second.status()).as(second.err()).isZero();
    assertThat(second.err()).contains("--save " + ck + " already holds checkpoints of an earlier run");
    Files.delete(ck.resolve(Checkpoint.LATEST)); // checkpoints without their latest-file are an earlier run's too
    TacoCliTest.Result third = train(tmp.resolve("C"), args);
    assertThat(third.status()).as(third.err()).isZero();
    assertThat(third.err()).contains("--save " + ck + " already holds checkpoints of an earlier run (" + ck.resolve(
        "iter_0000002") + ")");
  }

  private static void deleteTree(Path p) throws IOException {
    try (var s = Files.walk(p)) {
      for (Path q : s.sorted(java.util.Comparator.reverseOrder()).toList()) Files.delete(q);
    }
  }

  @Test
  void aCheckpointLoadsAtAnotherTpSizeResharded() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("A"), "--tp", "2", "--steps", "6", "--compression", "fp32").status()).isZero();
    assertThat(train(tmp.resolve("B"), "--tp", "2", "--steps", "6", "--compression", "fp32", "--save", ck.toString(),
        "--exit-interval", "3").status()).isZero();
    Map<Integer, double[]> whole = losses(tmp.resolve("A"), 0);
    for (String tp : new String[] {"1", "4"}) {
      Path out = tmp.resolve("tp" + tp);
      // fp32 calibrates nothing: its calibration options are not settings of the run, and differ without a warning
      TacoCliTest.Result r = train(out, "--tp", tp, "--steps", "6", "--compression", "fp32", "--calibration-steps", "0",
          "--load", ck.toString());
      assertThat(r.status()).as(r.err()).isZero();
      assertThat(r.err()).doesNotContain("differ from the checkpoint's");
      Map<Integer, double[]> l = losses(out, 0);
      assertThat(l.keySet()).containsExactly(3, 4, 5, 6);
      // the same weights and moments at another TP size: equal up to float32 rounding of the reordered sums
      for (int s = 3; s < 6; s++)
        assertThat(l.get(s)[0]).as("TP=%s step %d", tp, s).isCloseTo(whole.get(s)[0],
            org.assertj.core.api.Assertions.within(1e-4));
    }
  }

  /**
   * A TACO checkpoint, its plans calibrated at TP=2, resumes where nothing calibrates (TP=1, --calibration-steps 0);
   * a resume with other settings than the checkpoint's says which.
   */
  @Test
  void aCalibratedCheckpointResumesAtOneRankOrWithoutCalibrationAndChangedSettingsAreNamed() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("B"), "--tp", "2", "--steps", "6", "--compression", "taco", "--save", ck.toString(),
        "--exit-interval", "3").status()).isZero();
    String[][] resumes = {{"--tp", "1"}, {"--tp", "2", "--calibration-steps", "0"}, {"--tp", "4"}};
    for (String[] how : resumes) {
      List<String> args = new ArrayList<>(List.of(how));
      args.addAll(List.of("--steps", "6", "--compression", "taco", "--load", ck.toString()));
      Path out = tmp.resolve("r" + String.join("", how));
      TacoCliTest.Result r = train(out, args.toArray(String[]::new));
      assertThat(r.status()).as(String.join(" ", how) + ": " + r.err()).isZero();
      assertThat(losses(out, 0).keySet()).containsExactly(3, 4, 5, 6);
      if (how.length > 2) { // --calibration-steps 0: this run uses the codec's defaults, and is told so
        assertThat(r.err()).contains("differ from the checkpoint's: calibration_steps 0 (checkpoint: 2);");
      } else {
        assertThat(r.err()).doesNotContain("differ from the checkpoint's");
      }
    }
    // with sequence parallelism turned on, a site that was an all-reduce is a reduce-scatter: plans that do not fit
    // it (the token axis) calibrate anew
    TacoCliTest.Result sp = train(tmp.resolve("SP"), "--tp", "2", "--steps", "6", "--compression", "taco",
        "--sequence-parallel", "--load", ck.toString());
    assertThat(sp.status()).as(sp.err()).isZero();
    assertThat(sp.err()).contains("sequence_parallel true (checkpoint: false)");
    TacoCliTest.Result seed = train(tmp.resolve("S"), "--tp", "2", "--steps", "6", "--compression", "taco", "--seed",
        "1234567891234567", "--lr", "0.001", "--load", ck.toString());
    assertThat(seed.status()).as(seed.err()).isZero();
    assertThat(seed.err()).contains("with settings that differ from the checkpoint's: lr 0.001 (checkpoint: 0.002),"
        + " min_lr 0.0001 (checkpoint: 0.0002), seed 1234567891234567 (checkpoint: 1234)");
    Path other = tmp.resolve("other.txt");
    Files.writeString(other, "Sphinx of black quartz, judge my vow. ".repeat(100));
    TacoCliTest.Result data = train(tmp.resolve("T"), "--tp", "2", "--steps", "6", "--compression", "taco", "--data",
        other.toString(), "--load", ck.toString());
    assertThat(data.status()).as(data.err()).isZero();
    assertThat(data.err()).containsPattern("differ from the checkpoint's: data \"\\d+\\+\\d+ bytes, crc32c");
  }

  @Test
  void theUnshardedWeightsAreAGpt2StateDictInSafetensors() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("B"), "--tp", "2", "--steps", "2", "--compression", "none", "--save", ck.toString())
        .status()).isZero();
    Path model = ck.resolve("iter_0000002").resolve(Checkpoint.MODEL);
    List<NamedTensor> tensors = SafetensorsReader.read(model);
    Map<String, int[]> shapes = new java.util.LinkedHashMap<>();
    for (NamedTensor t : tensors) shapes.put(t.name(), t.shape());
    assertThat(shapes).hasSize(2 + 12 * 2 + 2);
    assertThat(shapes.get("wte.weight")).containsExactly(256, 64);
    assertThat(shapes.get("wpe.weight")).containsExactly(16, 64);
    assertThat(shapes.get("h.1.attn.c_attn.weight")).containsExactly(64, 192);
    assertThat(shapes.get("h.1.attn.c_proj.weight")).containsExactly(64, 64);
    assertThat(shapes.get("h.0.mlp.c_fc.weight")).containsExactly(64, 256);
    assertThat(shapes.get("h.0.mlp.c_proj.weight")).containsExactly(256, 64);
    assertThat(shapes.get("ln_f.bias")).containsExactly(64);
    for (NamedTensor t : tensors) for (float x : t.data()) assertThat(Float.isFinite(x)).as(t.name()).isTrue();
    float[] wte = tensors.get(0).data();
    assertThat(wte[0] != 0f || wte[1] != 0f).as("the weights, not the zeros of an empty arena").isTrue();
    // the safetensors library itself, where Python has it (bench/check-safetensors.py prints names and shapes)
    Process p;
    try {
      p = new ProcessBuilder("python3", "-c", "import safetensors.numpy").redirectErrorStream(true).start();
    } catch (IOException e) {
      p = null;
    }
    assumeTrue(p != null && p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0,
        "python3 with the safetensors package is not installed here: the library check is skipped");
    Process check = new ProcessBuilder("python3", Path.of("..", "bench", "check-safetensors.py").toString(),
        model.toString()).redirectErrorStream(true).start();
    String out = new String(check.getInputStream().readAllBytes());
    assertThat(check.waitFor()).as(out).isZero();
    assertThat(out).contains("h.1.attn.c_attn.weight (64, 192) float32").contains("28 tensors");
  }

  @Test
  void damagedOrMismatchedCheckpointsAreOneLineErrorsNamingTheFile() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("B"), "--tp", "2", "--steps", "4", "--compression", "none", "--save", ck.toString(),
        "--exit-interval", "2").status()).isZero();
    Path iter = ck.resolve("iter_0000002");
    Path model = iter.resolve(Checkpoint.MODEL), meta = iter.resolve(Checkpoint.META);
    byte[] good = Files.readAllBytes(model), goodMeta = Files.readAllBytes(meta);
    String[] resume = {"--tp", "2", "--steps", "4", "--compression", "none", "--load", ck.toString()};

    byte[] flipped = good.clone();
    flipped[flipped.length / 2] ^= 0x10;
    Files.write(model, flipped);
    assertOneLine(train(tmp.resolve("x1"), resume), model + " is corrupt");
    Files.write(model, java.util.Arrays.copyOf(good, good.length - 100));
    assertOneLine(train(tmp.resolve("x2"), resume), model + " holds");
    Files.write(model, good);

    Files.write(meta, java.util.Arrays.copyOf(goodMeta, goodMeta.length / 2));
    assertOneLine(train(tmp.resolve("x3"), resume), meta.toString());
    var json = com.google.gson.JsonParser.parseString(new String(goodMeta, java.nio.charset.StandardCharsets.UTF_8))
        .getAsJsonObject();
    json.remove("compression");
    Files.writeString(meta, json.toString());
    assertOneLine(train(tmp.resolve("x13"), resume), meta + " lacks the field \"compression\"");
    json = com.google.gson.JsonParser.parseString(new String(goodMeta, java.nio.charset.StandardCharsets.UTF_8))
        .getAsJsonObject();
    json.add("sites", new com.google.gson.JsonPrimitive(3));
    Files.writeString(meta, json.toString());
    assertOneLine(train(tmp.resolve("x14"), resume), meta + " lacks a field or holds one of the wrong type");
    // a number field that is a string, a fraction or out of range, and a step other than the one latest names
    String[][] badFields = {{"format", "\"x\""}, {"tensor_model_parallel_size", "-1"}, {"step", "2.5"}};
    for (int i = 0; i < badFields.length; i++) {
      json = com.google.gson.JsonParser.parseString(new String(goodMeta, java.nio.charset.StandardCharsets.UTF_8))
          .getAsJsonObject();
      json.add(badFields[i][0], com.google.gson.JsonParser.parseString(badFields[i][1]));
      Files.writeString(meta, json.toString());
      assertOneLine(train(tmp.resolve("x" + (15 + i)), resume), meta + ": the field \"" + badFields[i][0]
          + "\" must be a whole number in [");
    }
    json = com.google.gson.JsonParser.parseString(new String(goodMeta, java.nio.charset.StandardCharsets.UTF_8))
        .getAsJsonObject();
    json.getAsJsonObject("model").addProperty("hidden_size", 64.5);
    Files.writeString(meta, json.toString());
    assertOneLine(train(tmp.resolve("x18"), resume), "the field \"hidden_size\" must be a whole number");
    json = com.google.gson.JsonParser.parseString(new String(goodMeta, java.nio.charset.StandardCharsets.UTF_8))
        .getAsJsonObject();
    json.addProperty("step", 3);
    Files.writeString(meta, json.toString());
    assertOneLine(train(tmp.resolve("x19"), resume), meta + " is of step 3, but");
    Files.write(meta, goodMeta);
    // a tensor stored transposed, its checksum made right: the element count fits, the shape does not
    String header = new String(good, 8, 400, java.nio.charset.StandardCharsets.ISO_8859_1);
    java.util.regex.Matcher wide = java.util.regex.Pattern.compile("\"shape\":\\s*\\[(\\d+)(,\\s*)(\\d+)\\]")
        .matcher(header);
    boolean found;
    while ((found = wide.find()) && wide.group(1).equals(wide.group(3))) {} // [b,a] is as long as [a,b]
    assertThat(found).as("a 2-D tensor with rows != cols in " + header).isTrue();
    byte[] transposed = good.clone();
    byte[] swapped = (wide.group(3) + wide.group(2) + wide.group(1))
        .getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    System.arraycopy(swapped, 0, transposed, 8 + wide.start(1), swapped.length);
    Files.write(model, transposed);
    json = com.google.gson.JsonParser.parseString(new String(goodMeta, java.nio.charset.StandardCharsets.UTF_8))
        .getAsJsonObject();
    json.getAsJsonObject("files").getAsJsonObject(Checkpoint.MODEL).addProperty("crc32c", Checkpoint.crc32c(model));
    Files.writeString(meta, json.toString());
    assertOneLine(train(tmp.resolve("x20"), resume), "has shape [" + wide.group(3) + ", " + wide.group(1)
        + "], the model needs [" + wide.group(1) + ", " + wide.group(3) + "]");
    Files.write(model, good);
    Files.write(meta, goodMeta);

    String[] wider = {"--tp", "2", "--steps", "4", "--compression", "none", "--load", ck.toString(), "--hidden-size",
        "128"};
    assertOneLine(train(tmp.resolve("x4"), wider), meta + " holds a model with hidden_size 64, this run has 128");
    assertOneLine(train(tmp.resolve("x5"), "--tp", "2", "--steps", "4", "--compression", "taco", "--load",
        ck.toString()), "written by a --compression none run");
    assertOneLine(train(tmp.resolve("x6"), "--tp", "2", "--steps", "1", "--compression", "none", "--load",
        ck.toString()), "is at step 2, not before --steps 1: nothing left to train");
    assertOneLine(train(tmp.resolve("x7"), "--load", tmp.resolve("nowhere").toString()), "no such folder");
    assertOneLine(train(tmp.resolve("x9"), "--load", model.toString()), "is not a folder");
    assertOneLine(train(tmp.resolve("x10"), "--tp", "2", "--steps", "4", "--compression", "none", "--load",
        iter.toString()), "is one checkpoint's folder: give the folder above it");
    assertOneLine(train(tmp.resolve("x11"), "--tp", "2", "--steps", "4", "--compression", "none,taco", "--load",
        ck.toString()), "holds one run's checkpoint; with several --compression codecs");
    assertOneLine(train(tmp.resolve("x12"), "--steps", "1", "--save", model.toString()), "exists and is not a folder");
    Files.writeString(ck.resolve(Checkpoint.LATEST), "7\n"); // names a checkpoint that is not there
    assertOneLine(train(tmp.resolve("x8"), resume), "iter_0000007");
    Files.writeString(ck.resolve(Checkpoint.LATEST), "-4\n");
    assertOneLine(train(tmp.resolve("x14"), resume), Checkpoint.LATEST + " does not hold a step number");
    Files.delete(ck.resolve(Checkpoint.LATEST)); // checkpoints without their pointer are not started over
    assertOneLine(train(tmp.resolve("x21"), resume), "holds iter_0000002 but no " + Checkpoint.LATEST
        + ": write the step to resume from into it (echo 2 > ");
    assertThat(tmp.resolve("x21")).doesNotExist();
    assertOneLine(train(tmp.resolve("x22"), "--steps", "1", "--save", ""), "--save is empty");
    assertOneLine(train(tmp.resolve("x23"), "--steps", "1", "--load", ""), "--load is empty");
    for (int i = 1; i <= 20; i++) { // each failed before writing anything: no empty --out folder is left behind
      assertThat(tmp.resolve("x" + i)).as("--out of a failed run").doesNotExist();
    }
    // the intact checkpoint still loads
    Files.writeString(ck.resolve(Checkpoint.LATEST), "2\n");
    assertThat(train(tmp.resolve("ok"), resume).status()).isZero();
  }

  /**
   * A job that resumes itself (--save and --load the same folder) runs from scratch the first time, and resubmitted
   * after its run finished (the checkpoint is at --steps, as Megatron's requeue resubmits it) does nothing and exits 0,
   * making no --out folder (it was refused as "nothing left to train").
   */
  @Test
  void aFinishedRunResubmittedIsANoOp() throws Exception {
    Path ck = tmp.resolve("D");
    String[] job = {"--tp", "2", "--steps", "2", "--compression", "none", "--save", ck.toString(), "--load",
        ck.toString()};
    TacoCliTest.Result first = train(tmp.resolve("A"), job);
    assertThat(first.status()).as(first.err()).isZero();
    assertThat(first.err()).contains("--load " + ck + ": no " + Checkpoint.LATEST + " there, starting from scratch");
    TacoCliTest.Result again = train(tmp.resolve("B"), job);
    assertThat(again.status()).as(again.err()).isZero();
    assertThat(again.err()).contains("taco: nothing to do: --load " + ck + " holds the checkpoint of step 2 (--steps)"
        + " of the run; raise --steps to train further");
    assertThat(again.out()).isEmpty();
    assertThat(tmp.resolve("B")).doesNotExist();
    // a finished checkpoint of another codec is not taken for this run's
    assertOneLine(train(tmp.resolve("C"), "--tp", "2", "--steps", "2", "--compression", "taco", "--load",
        ck.toString()), "written by a --compression none run");
  }

  /**
   * A checkpoint save that fails (a full disk; here the latest-file's temporary name is taken by a folder) stops the
   * run after that step with its report written, as a signal or a divergence does, and the error last (the report of
   * the steps that ran was lost).
   */
  @Test
  void aCheckpointSaveThatFailsKeepsTheReportOfTheStepsThatRan() throws Exception {
    Path ck = tmp.resolve("D"), out = tmp.resolve("B");
    Files.createDirectories(ck.resolve("." + Checkpoint.LATEST + ".tmp").resolve("x"));
    TacoCliTest.Result r = train(out, "--tp", "2", "--steps", "6", "--compression", "none", "--save", ck.toString(),
        "--save-interval", "2");
    assertThat(r.status()).as(r.err()).isEqualTo(1);
    List<String> lines = r.err().strip().lines().toList();
    assertThat(lines.getLast()).startsWith("taco: error: saving the checkpoint of step 2 into " + ck + " failed: ");
    assertThat(r.err()).contains("run 'none' stopped after step 2; the report holds its steps up to there");
    assertThat(losses(out, 0).keySet()).as("its steps, and the evaluation where it stopped").containsExactly(0, 1, 2);
    JsonObject run = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
        .getAsJsonArray("runs").get(0).getAsJsonObject();
    assertThat(run.get("stopped").getAsString()).isEqualTo("save-failed");
    assertThat(run.get("steps").getAsInt()).isEqualTo(2);
    assertThat(run.get("tp_bytes_per_step").getAsDouble()).isPositive();
    assertThat(r.out()).contains("none         stopped after step 2, whose checkpoint could not be saved");
    assertThat(out.resolve("loss.png")).exists();
    assertThat(Files.readAllLines(out.resolve("metrics.jsonl"))).hasSize(2);
  }

  /**
   * A resume compares the options it records by value, not as JSON text: a float that another JSON writer (Python's
   * json, jq) spells 0.00020000001 is the 2.0000001E-4 this run has (it was named as changed), a seed 1.234E+3 is 1234;
   * a value that changed is still named.
   */
  @Test
  void aResumeComparesOptionsByValueNotAsJsonText() throws Exception {
    Path ck = tmp.resolve("D");
    assertThat(train(tmp.resolve("A"), "--tp", "2", "--steps", "4", "--compression", "none", "--save", ck.toString(),
        "--exit-interval", "2").status()).isZero();
    Path meta = ck.resolve("iter_0000002").resolve(Checkpoint.META);
    JsonObject json = JsonParser.parseString(Files.readString(meta)).getAsJsonObject();
    JsonObject options = json.getAsJsonObject("options");
    assertThat(options.get("min_lr").toString()).isEqualTo("2.0000001E-4");
    options.add("min_lr", new com.google.gson.JsonPrimitive(new java.math.BigDecimal("0.00020000001")));
    Files.writeString(meta, json.toString().replace("\"seed\":1234,", "\"seed\":1.234E+3,"));
    assertThat(Files.readString(meta)).contains("\"min_lr\":0.00020000001").contains("\"seed\":1.234E+3");
    TacoCliTest.Result same = train(tmp.resolve("B"), "--tp", "2", "--steps", "4", "--compression", "none", "--load",
        ck.toString());
    assertThat(same.status()).as(same.err()).isZero();
    assertThat(same.err()).doesNotContain("differ from the checkpoint's");
    TacoCliTest.Result other = train(tmp.resolve("C"), "--tp", "2", "--steps", "4", "--compression", "none", "--load",
        ck.toString(), "--lr", "0.001");
    assertThat(other.status()).as(other.err()).isZero();
    assertThat(other.err()).contains("differ from the checkpoint's: lr 0.001 (checkpoint: 0.002), min_lr 0.0001"
        + " (checkpoint: 0.0002);");
  }

  private static void assertOneLine(TacoCliTest.Result r, String expected) {
    assertThat(r.status()).isNotZero();
    String err = r.err().strip();
    assertThat(err).contains(expected).doesNotContain("\tat ").doesNotContain("Exception");
    assertThat(err.lines().filter(l -> l.startsWith("taco:")).count()).as(err).isEqualTo(1);
  }

  /**
   * An old checkpoint that cannot be deleted (here made immutable, or read-only where chattr is refused) costs a
   * warning, not the run: the new checkpoint was saved whole and is the latest.
   */
  @Test
  void anOldCheckpointThatCannotBeDeletedIsAWarningNotAFailure() throws Exception {
    Path ck = tmp.resolve("ck");
    assertThat(train(tmp.resolve("a"), "--tp", "2", "--steps", "2", "--compression", "none", "--save", ck.toString(),
        "--save-interval", "1").status()).isZero();
    Path old = ck.resolve("iter_0000001");
    boolean immutable;
    try {
      immutable = new ProcessBuilder("chattr", "+i", old.toString()).start().waitFor() == 0;
    } catch (IOException e) { // no chattr
      immutable = false;
    }
    if (!immutable) old.toFile().setWritable(false);
    try {
      boolean locked;
      try {
        Files.delete(Files.createFile(old.resolve("probe")));
        locked = false;
      } catch (IOException e) {
        locked = true;
      }
      org.junit.jupiter.api.Assumptions.assumeTrue(locked, "no way to make a folder undeletable here");
      TacoCliTest.Result r = train(tmp.resolve("b"), "--tp", "2", "--steps", "4", "--compression", "none", "--load",
          ck.toString(), "--save", ck.toString(), "--save-interval", "1");
      assertThat(r.status()).as(r.err()).isZero();
      assertThat(r.err()).contains("but an older one in " + ck + " could not be deleted");
      assertThat(Files.readString(ck.resolve(Checkpoint.LATEST)).strip()).isEqualTo("4");
      assertThat(ck.resolve("iter_0000004/model.safetensors")).exists();
      assertThat(tmp.resolve("b/report.json")).exists();
    } finally {
      if (immutable) new ProcessBuilder("chattr", "-i", old.toString()).start().waitFor();
      old.toFile().setWritable(true);
    }
  }

  /** A --save folder that another run holds is refused before any work; once free, it serves. */
  @Test
  void aSaveFolderInUseByAnotherRunIsRefused() throws Exception {
    Path ck = Files.createDirectories(tmp.resolve("busy"));
    try (var held = TacoCliTest.heldLock(ck.resolve(".taco-save.lock"))) {
      assertOneLine(train(tmp.resolve("r1"), "--tp", "2", "--steps", "2", "--compression", "none", "--save",
          ck.toString()), "--save " + ck.toAbsolutePath() + " is in use by another run");
      assertThat(tmp.resolve("r1")).doesNotExist();
    }
    assertThat(train(tmp.resolve("r2"), "--tp", "2", "--steps", "2", "--compression", "none", "--save", ck.toString())
        .status()).isZero();
    assertThat(ck.resolve("iter_0000002")).exists();
    // nor around the lock: into a <codec>/ folder of a several-codec run's --save, or into a folder laid out per codec
    // while a run saves into one of its <codec>/ folders
    Path both = tmp.resolve("both");
    assertThat(train(tmp.resolve("r3"), "--tp", "2", "--steps", "2", "--save", both.toString()).status()).isZero();
    try (var held = TacoCliTest.heldLock(both.resolve(".taco-save.lock"))) {
      TacoCliTest.Result r4 = train(tmp.resolve("r4"), "--tp", "2", "--steps", "4", "--compression", "taco",
          "--save", both.resolve("taco").toString(), "--overwrite");
      assertOneLine(r4, "is in use by another run (it holds the lock on " + both.toAbsolutePath().resolve(
          ".taco-save.lock"));
      assertThat(r4.err()).doesNotContain("writes over them"); // refused before it would write anything
    }
    try (var held = TacoCliTest.heldLock(both.resolve("taco").resolve(".taco-save.lock"))) {
      assertOneLine(train(tmp.resolve("r5"), "--tp", "2", "--steps", "4", "--compression", "taco", "--save",
          both.toString()),
          "is in use by another run (it holds the lock on "
              + both.toAbsolutePath().resolve("taco").resolve(".taco-save.lock"));
    }
  }

  @Test
  void aSecondRunIntoAFolderWithAReportIsRefusedUnlessOverwrite() throws Exception {
    Path out = tmp.resolve("A");
    assertThat(train(out, "--tp", "1", "--steps", "1", "--compression", "none").status()).isZero();
    assertOneLine(train(out, "--tp", "1", "--steps", "1", "--compression", "none"), "already holds a report.json");
    assertThat(train(out, "--tp", "1", "--steps", "1", "--compression", "none", "--overwrite").status()).isZero();
    // a job resumed with --load runs the same command, its --out included, and goes on there
    Path ck = tmp.resolve("ckA");
    assertThat(train(out, "--tp", "1", "--steps", "1", "--compression", "none", "--save", ck.toString(), "--overwrite")
        .status()).isZero();
    TacoCliTest.Result resumed = train(out, "--tp", "1", "--steps", "2", "--compression", "none", "--save",
        ck.toString(), "--load", ck.toString());
    assertThat(resumed.status()).as(resumed.err()).isZero();
    JsonObject run = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
        .getAsJsonArray("runs").get(0).getAsJsonObject();
    assertThat(run.get("first_step").getAsInt()).as("the resumed call's report").isEqualTo(1);
    assertThat(Files.readAllLines(out.resolve("metrics.jsonl"))).as("both calls' steps, the first call's kept")
        .hasSize(2).allMatch(l -> l.contains("\"codec\":\"none\""))
        .satisfies(l -> assertThat(l.get(1)).contains("\"step\":1"));
  }

  /** A model large enough that a save takes a while, for the kill test. */
  static final GptConfig KILL_MODEL = new GptConfig(256, 64, 4, 4, 256, 2);

  /**
   * The process the kill test kills: saves checkpoints of steps 1, 2, 3, ... into {@code args[0]} for ever, every
   * parameter of the checkpoint of step s holding s, every first moment s + 1, every second moment s + 2.
   */
  public static void main(String[] args) throws IOException {
    Path dir = Path.of(args[0]);
    ParameterTensors p0 = new ParameterTensors(KILL_MODEL, 0), p1 = new ParameterTensors(KILL_MODEL, 1);
    for (int step = 1;; step++) {
      float[][][] ranks = new float[2][3][];
      for (int k = 0; k < 3; k++) {
        ranks[0][k] = new float[p0.size()];
        ranks[1][k] = new float[p1.size()];
        java.util.Arrays.fill(ranks[0][k], step + k);
        java.util.Arrays.fill(ranks[1][k], step + k);
      }
      Checkpoint.save(dir, step, KILL_MODEL, ranks, "none", List.of(Map.of()), null, List.of(), step, Map.of());
    }
  }

  @Test
  void aProcessKilledWhileSavingLeavesALoadableCheckpoint() throws Exception {
    SplittableRandom rnd = new SplittableRandom();
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    int loadedNonZero = 0;
    for (int round = 0; round < 4; round++) {
      Path dir = tmp.resolve("kill" + round);
      Process p = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"),
          "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", CheckpointTest.class.getName(), dir.toString())
          .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
      // wait for the second complete checkpoint (on a loaded machine a save can take most of a second), then kill -9
      // at a random moment of a later save
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (latest(dir) < 2 && System.nanoTime() < deadline && p.isAlive()) {
        Thread.sleep(5);
      }
      Thread.sleep(rnd.nextInt(50, 1500));
      p.destroyForcibly(); // SIGKILL on Linux
      assertThat(p.waitFor(30, TimeUnit.SECONDS)).isTrue();
      assertThat(dir.resolve(Checkpoint.LATEST)).exists();
      Checkpoint.State s = Checkpoint.load(dir, KILL_MODEL, "none");
      assertThat(s).isNotNull();
      assertThat(s.batchesDrawn()).isEqualTo(s.step());
      for (int k = 0; k < 3; k++) {
        float[] a = k == 0 ? s.params() : k == 1 ? s.m() : s.v();
        for (float x : a) {
          if (x != s.step() + k) throw new AssertionError("step " + s.step() + " array " + k + " holds " + x);
        }
      }
      if (s.step() > 1) loadedNonZero++;
    }
    assertThat(loadedNonZero).as("kills landed after several saves").isPositive();
  }

  /** The step in {@code dir}'s latest-checkpoint file, or 0 while there is none (or it is being replaced). */
  private static int latest(Path dir) {
    try {
      return Integer.parseInt(Files.readString(dir.resolve(Checkpoint.LATEST)).strip());
    } catch (IOException | NumberFormatException e) {
      return 0;
    }
  }

  @Test
  void savingRefusesRanksWhoseReplicatedTensorsDiffer() {
    GptConfig cfg = new GptConfig(256, 8, 1, 2, 8, 2);
    ParameterTensors p0 = new ParameterTensors(cfg, 0), p1 = new ParameterTensors(cfg, 1);
    float[][][] ranks = {{new float[p0.size()], new float[p0.size()], new float[p0.size()]},
        {new float[p1.size()], new float[p1.size()], new float[p1.size()]}};
    ranks[1][0][p1.lnfb] = 1f; // rank 1's ln_f.bias differs from rank 0's
    assertThatThrownBy(() -> Checkpoint.save(tmp.resolve("D"), 1, cfg, ranks, "none", List.of(Map.of()), null,
        List.of(), 1, Map.of()))
        .isInstanceOf(IllegalStateException.class).hasMessageContaining("ln_f.bias");
    assertThat(tmp.resolve("D").resolve(Checkpoint.LATEST)).doesNotExist();
  }

  /** A save that fails while writing its folder (a full disk; here a description that cannot be written) leaves none. */
  @Test
  void aSaveThatFailsMidwayLeavesNoHalfWrittenFolder() throws IOException {
    GptConfig cfg = new GptConfig(256, 8, 1, 2, 8, 1);
    ParameterTensors p = new ParameterTensors(cfg, 0);
    SplittableRandom rng = new SplittableRandom(3);
    float[][][] ranks = {{new float[p.size()], new float[p.size()], new float[p.size()]}};
    for (float[] a : ranks[0]) for (int i = 0; i < a.length; i++) a[i] = (float) rng.nextGaussian();
    Path dir = tmp.resolve("D");
    assertThatThrownBy(() -> Checkpoint.save(dir, 1, cfg, ranks, "none", List.of(Map.of()), null, List.of(), 1,
        Map.of("lr", java.time.Duration.ofSeconds(1)))).isInstanceOf(RuntimeException.class);
    try (var left = Files.list(dir)) {
      assertThat(left).as("the weights were written, then the folder removed").isEmpty();
    }
  }
}
