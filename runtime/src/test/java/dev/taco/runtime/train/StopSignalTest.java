package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.runtime.cli.TacoCliTest;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Stopping well (docs/design.md §6, Megatron's --exit-signal-handler): SIGTERM to a training process finishes the current
 * step, saves a checkpoint (--save), writes the partial report and plot, and exits with 143; the codecs after the
 * stopped one do not run. The same command with --load then resumes where it stopped.
 */
class StopSignalTest {
  @TempDir
  Path tmp;

  /** {@code taco train}'s arguments for two codecs' runs of a tiny model. */
  private static final List<String> TINY = List.of("train", "--tp", "2", "--compression", "none,taco", "--num-layers",
      "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16", "--micro-batch-size", "2",
      "--eval-interval", "50000");

  /** {@link #TINY} with {@code args}, in a process of its own, its stderr into {@code err}. */
  private static Process train(Path err, List<String> args) throws IOException {
    List<String> command = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        "--add-modules=jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED", "-cp",
        System.getProperty("java.class.path"), "-Djava.awt.headless=true", "dev.taco.runtime.cli.TacoCli"));
    command.addAll(TINY);
    command.addAll(args);
    return new ProcessBuilder(command).redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(err.toFile())
        .start();
  }

  /** Waits up to a minute for {@code file} to exist with content that {@code ready} accepts. */
  private static void await(Path file, Predicate<String> ready) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!(Files.exists(file) && ready.test(Files.readString(file))) && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
  }

  private static JsonArray runs(Path out) throws IOException {
    return JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
        .getAsJsonArray("runs");
  }

  @Test
  void sigtermFinishesTheStepSavesAndWritesThePartialReport() throws Exception {
    Path out = tmp.resolve("out"), ck = tmp.resolve("ck"), err = tmp.resolve("err.txt");
    Process p = train(err, List.of("--steps", "100000", "--save", ck.toString(), "--out", out.toString()));
    await(err, e -> e.contains("run 'none'"));
    Thread.sleep(2000); // some steps
    p.destroy(); // SIGTERM on Linux
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("stopped within a minute").isTrue();
    String said = Files.readString(err);
    assertThat(p.exitValue()).as("stderr: %s", said).isEqualTo(143);
    JsonArray runs = runs(out);
    assertThat(runs).as("the taco run after the stopped one did not start").hasSize(1);
    JsonObject run = runs.get(0).getAsJsonObject();
    assertThat(run.get("stopped").getAsString()).isEqualTo("signal");
    int steps = run.get("steps").getAsInt();
    assertThat(steps).isPositive().isLessThan(100000);
    JsonArray history = run.getAsJsonArray("history");
    assertThat(history).as("every step, then the evaluation where it stopped").hasSize(steps + 1);
    assertThat(history.get(steps).getAsJsonObject().get("val_loss").getAsDouble()).isFinite();
    assertThat(run.get("final_val_loss").getAsDouble()).isEqualTo(
        history.get(steps).getAsJsonObject().get("val_loss").getAsDouble());
    Path latest = ck.resolve("none").resolve(Checkpoint.LATEST);
    assertThat(Files.readString(latest).strip()).as("the checkpoint holds the last finished step").isEqualTo(
        String.valueOf(steps));
    assertThat(out.resolve("loss.png")).exists();
    assertThat(Files.readAllLines(out.resolve("metrics.jsonl"))).as("a line per step").hasSize(steps);
    assertThat(said).contains("taco: stopped by SIGTERM after step " + steps);
  }

  /**
   * A several-codec job that resumes itself (--save and --load one folder), stopped by SIGTERM in its second codec's
   * run, resumes with the same command: the first codec, finished, is skipped and the second goes on from its
   * checkpoint (the first had been refused as "nothing left to train", exit 2); resubmitted once more, it does
   * nothing. The metrics file has the second codec's lines while its run goes on: the signal is sent on the first.
   */
  @Test
  void aSeveralCodecRunStoppedInItsSecondCodecResumesWithTheSameCommand() throws Exception {
    Path ck = tmp.resolve("ck"), err = tmp.resolve("err.txt");
    List<String> job = List.of("--steps", "300", "--save", ck.toString(), "--load", ck.toString());
    List<String> first = new ArrayList<>(job);
    first.addAll(List.of("--out", tmp.resolve("first").toString()));
    Process p = train(err, first);
    await(tmp.resolve("first").resolve("metrics.jsonl"), m -> m.contains("\"codec\":\"taco\""));
    p.destroy(); // SIGTERM on Linux
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("stopped within a minute").isTrue();
    assertThat(p.exitValue()).as("stderr: %s", Files.readString(err)).isEqualTo(143);
    JsonArray stopped = runs(tmp.resolve("first"));
    assertThat(stopped).hasSize(2);
    assertThat(stopped.get(0).getAsJsonObject().get("stopped").isJsonNull()).as("none finished").isTrue();
    int at = stopped.get(1).getAsJsonObject().get("steps").getAsInt();
    assertThat(at).as("taco stopped before its end").isLessThan(300);
    assertThat(Files.readString(ck.resolve("taco").resolve(Checkpoint.LATEST)).strip()).isEqualTo(String.valueOf(at));

    String[] again = args(job, tmp.resolve("again"));
    TacoCliTest.Result resumed = TacoCliTest.run(again);
    assertThat(resumed.status()).as(resumed.err()).isZero();
    assertThat(resumed.err()).contains("run 'none' has finished: " + ck.resolve("none") + " holds its checkpoint of"
        + " step 300 (--steps); skipped");
    JsonArray runs = runs(tmp.resolve("again"));
    assertThat(runs).as("taco's run alone").hasSize(1);
    JsonObject taco = runs.get(0).getAsJsonObject();
    assertThat(taco.get("compression").getAsString()).isEqualTo("taco");
    assertThat(taco.get("first_step").getAsInt()).isEqualTo(at);
    assertThat(taco.get("steps").getAsInt()).isEqualTo(300 - at);
    assertThat(taco.get("stopped").isJsonNull()).isTrue();

    TacoCliTest.Result third = TacoCliTest.run(args(job, tmp.resolve("third")));
    assertThat(third.status()).as(third.err()).isZero();
    assertThat(third.err()).contains("taco: nothing to do: --load " + ck + " holds the checkpoint of step 300"
        + " (--steps) of every codec's run (none, taco)");
    assertThat(tmp.resolve("third")).doesNotExist();
  }

  /** {@link #TINY} with {@code job}, into {@code out}: the command line of a run in this JVM. */
  private static String[] args(List<String> job, Path out) {
    List<String> a = new ArrayList<>(TINY);
    a.addAll(job);
    a.addAll(List.of("--out", out.toString()));
    return a.toArray(String[]::new);
  }
}
