package dev.taco.runtime.cli;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The per-step metrics file ({@code metrics.jsonl} in --out, {@code StepMetrics}): a JSON line per training step of
 * every codec's run, with the numbers of the report's history (the gradient norm there too) and the step's TP bytes,
 * which average to the report's bytes per step. That its lines appear as training goes: {@code StopSignalTest}.
 */
class MetricsFileTest {
  @TempDir
  Path tmp;

  @Test
  void everyTrainingStepOfEveryCodecIsALineWithTheReportsNumbers() throws Exception {
    Path out = tmp.resolve("m");
    TacoCliTest.Result r = TacoCliTest.run(TacoCliTest.tiny(out, "--compression", "none,taco", "--tp", "2",
        "--hidden-size", "64"));
    assertThat(r.status()).as(r.err()).isZero();
    List<JsonObject> lines = Files.readAllLines(out.resolve("metrics.jsonl")).stream()
        .map(l -> JsonParser.parseString(l).getAsJsonObject()).toList();
    assertThat(lines).as("4 steps of each of 2 codecs").hasSize(8);
    JsonArray runs = JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
        .getAsJsonArray("runs");
    for (int k = 0; k < 2; k++) {
      JsonObject run = runs.get(k).getAsJsonObject();
      String codec = run.get("compression").getAsString();
      JsonArray history = run.getAsJsonArray("history");
      assertThat(history).as("steps 0..3, then the evaluation at the end").hasSize(5);
      assertThat(history.get(4).getAsJsonObject().get("grad_norm").isJsonNull()).isTrue();
      long bytes = 0;
      for (int step = 0; step < 4; step++) {
        JsonObject line = lines.get(4 * k + step), row = history.get(step).getAsJsonObject();
        assertThat(line.get("codec").getAsString()).isEqualTo(codec);
        assertThat(line.get("step").getAsInt()).isEqualTo(step);
        // the float values of the history, written as floats (5.5510864, not 5.55108642578125)
        assertThat(line.get("loss").getAsFloat()).isEqualTo(row.get("train_loss").getAsFloat());
        assertThat(line.get("loss").toString()).isEqualTo(Float.toString(line.get("loss").getAsFloat()));
        assertThat(line.get("val_loss")).as("evaluated at steps 0 and 2").isEqualTo(row.get("val_loss"));
        assertThat(line.get("lr").getAsFloat()).isEqualTo(row.get("lr").getAsFloat());
        assertThat(line.get("grad_norm").getAsFloat()).isEqualTo(row.get("grad_norm").getAsFloat());
        assertThat(row.get("grad_norm").getAsDouble()).isPositive().isFinite();
        assertThat(line.get("tokens_per_s").getAsDouble()).isPositive().isFinite();
        assertThat(line.get("tp_bytes").getAsLong()).isPositive();
        bytes += line.get("tp_bytes").getAsLong();
      }
      if (codec.equals("none")) { // no site calibrates: the report's bytes per step is the mean over every step
        assertThat(bytes / 4.0).isEqualTo(run.get("tp_bytes_per_step").getAsDouble());
      }
    }
    assertThat(lines.get(0).keySet()).containsExactly("codec", "step", "loss", "val_loss", "lr", "grad_norm",
        "tokens_per_s", "tp_bytes");
    assertThat(lines.get(1).get("val_loss").isJsonNull()).isTrue();
    assertThat(lines.stream().map(l -> l.get("loss")).map(JsonElement::getAsDouble)).allMatch(Double::isFinite);
  }
}
