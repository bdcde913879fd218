package dev.taco.runtime.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The command line: bad input gives one line on stderr and a non-zero exit; a small run writes its report. */
class TacoCliTest {
  @TempDir Path tmp;

  record Result(int status, String out, String err) {}

  static Result run(String... args) {
    PrintStream oldOut = System.out, oldErr = System.err;
    ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
    System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    try {
      int status = TacoCli.execute(args);
      return new Result(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    } finally {
      System.setOut(oldOut);
      System.setErr(oldErr);
    }
  }

  static String[] tiny(Path out, String... more) {
    String[] base = {"train", "--steps", "4", "--num-layers", "1", "--hidden-size", "16", "--num-attention-heads", "4",
        "--seq-length", "16", "--micro-batch-size", "2", "--eval-interval", "2", "--eval-iters", "1", "--out", out.toString()};
    String[] all = new String[base.length + more.length];
    System.arraycopy(base, 0, all, 0, base.length);
    System.arraycopy(more, 0, all, base.length, more.length);
    return all;
  }

  static void assertOneLineError(Result r, String expected) {
    assertThat(r.status()).isNotZero();
    String err = r.err().strip();
    assertThat(err).contains(expected);
    assertThat(err.lines().filter(l -> !l.startsWith("WARNING")).count()).as("stderr: %s", err).isEqualTo(1);
    assertThat(err).doesNotContain("\tat ").doesNotContain("Exception");
  }

  @Test
  void missingDataFile() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", tmp.resolve("nope.txt").toString())), "data file not found");
  }

  @Test
  void emptyDataFile() throws Exception {
    Path f = Files.writeString(tmp.resolve("empty.txt"), "");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", f.toString())), "is empty");
  }

  @Test
  void binaryDataFile() throws Exception {
    Path f = Files.write(tmp.resolve("bin.dat"), new byte[] {0x7f, 'E', 'L', 'F', 0, 1, 2, 3});
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", f.toString())), "binary");
    Path g = Files.write(tmp.resolve("latin1.txt"), new byte[] {'c', 'a', 'f', (byte) 0xE9, ' ', 'x'});
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", g.toString())), "not UTF-8");
  }

  @Test
  void tpMustDivideHeadsAndHidden() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--tp", "3")), "--tp 3 does not divide --num-attention-heads 4");
  }

  @Test
  void nonPositiveSizes() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--steps", "0")), "--steps must be positive");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--hidden-size", "-16")), "--hidden-size must be positive");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--micro-batch-size", "0")), "--micro-batch-size must be positive");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--tp", "0")), "must be positive");
  }

  @Test
  void unknownCompressionAndBadNumbers() {
    assertOneLineError(run(tiny(tmp.resolve("o"), "--compression", "zip")), "zip");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--steps", "many")), "--steps");
  }

  @Test
  void dataTooShortForTheContext() throws Exception {
    Path f = Files.writeString(tmp.resolve("short.txt"), "hello world, a short text\n");
    assertOneLineError(run(tiny(tmp.resolve("o"), "--data", f.toString())), "too short");
  }

  @Test
  void smallRunWritesReportAndPlot() throws Exception {
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    Path out = tmp.resolve("run");
    Result r = run(tiny(out, "--data", text.toString(), "--compression", "none,taco", "--tp", "2"));
    assertThat(r.status()).as(r.err()).isZero();
    assertThat(r.out()).contains("taco vs none");
    JsonObject report = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
    assertThat(report.getAsJsonObject("machine").get("cores").getAsInt()).isPositive();
    var runs = report.getAsJsonArray("runs");
    assertThat(runs).hasSize(2);
    for (var e : runs) {
      JsonObject run = e.getAsJsonObject();
      for (String k : new String[] {"compression", "tp", "steps", "initial_val_loss", "final_val_loss", "tp_bytes_per_step", "wall_seconds"}) {
        assertThat(run.has(k)).as(k).isTrue();
      }
      assertThat(run.get("tp").getAsInt()).isEqualTo(2);
      assertThat(run.get("tp_bytes_per_step").getAsDouble()).isPositive();
      assertThat(Double.isFinite(run.get("final_val_loss").getAsDouble())).isTrue();
    }
    double none = runs.get(0).getAsJsonObject().get("tp_bytes_per_step").getAsDouble();
    double taco = runs.get(1).getAsJsonObject().get("tp_bytes_per_step").getAsDouble();
    assertThat(taco / none).isLessThan(0.7);
    byte[] png = Files.readAllBytes(out.resolve("loss.png"));
    assertThat(png).startsWith((byte) 0x89, (byte) 'P', (byte) 'N', (byte) 'G');
  }
}
