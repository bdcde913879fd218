package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Stopping well (docs/design.md §6, Megatron's --exit-signal-handler): SIGTERM to a training process finishes the current
 * step, saves a checkpoint (--save), writes the partial report and plot, and exits with 143; the codecs after the
 * stopped one do not run.
 */
class StopSignalTest {
  @TempDir
  Path tmp;

  @Test
  void sigtermFinishesTheStepSavesAndWritesThePartialReport() throws Exception {
    Path out = tmp.resolve("out"), ck = tmp.resolve("ck");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
    Process p = new ProcessBuilder(java, "--add-modules=jdk.incubator.vector", "--enable-native-access=ALL-UNNAMED",
        "-cp", System.getProperty("java.class.path"), "-Djava.awt.headless=true",
        "dev.taco.runtime.cli.TacoCli", "train", "--steps", "100000", "--tp", "2", "--compression", "none,taco",
        "--num-layers", "1", "--hidden-size", "32", "--num-attention-heads", "2", "--seq-length", "16",
        "--micro-batch-size", "2", "--eval-interval", "50000", "--save", ck.toString(), "--out", out.toString())
        .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(tmp.resolve("err.txt").toFile()).start();
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
    while (!Files.readString(tmp.resolve("err.txt")).contains("run 'none'") && System.nanoTime() < deadline) {
      Thread.sleep(20);
    }
    Thread.sleep(2000); // some steps
    p.destroy(); // SIGTERM on Linux
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).as("stopped within a minute").isTrue();
    String err = Files.readString(tmp.resolve("err.txt"));
    assertThat(p.exitValue()).as("stderr: %s", err).isEqualTo(143);
    JsonObject rep = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    JsonArray runs = rep.getAsJsonArray("runs");
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
    assertThat(err.toString()).contains("taco: stopped by SIGTERM after step " + steps);
  }
}
