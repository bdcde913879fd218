package dev.taco.bench;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.codec.CodecStats;
import dev.taco.codec.Codecs;
import dev.taco.runtime.analyze.SafetensorsWriter;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link CodecTable} on known inputs: its error columns are {@link CodecStats}' figures averaged over the tensors,
 * the exact codec's error is 0, {@code none}'s bytes are the unit; it merges GpuCodecBench's, {@link LossGap}'s and
 * GpuE2E's files (fixtures written here, with decoys it must not take), says where an input is missing, and gives a
 * one-line error for a malformed one.
 */
class CodecTableTest {
  @TempDir
  Path tmp;

  /** Two TP-like tensors: Gaussian, and Gaussian with a few channels 50 times louder. */
  private Path tensors(long seed) throws Exception {
    System.out.println("CodecTableTest seed " + seed);
    SplittableRandom rnd = new SplittableRandom(seed);
    float[] a = new float[64 * 256], b = new float[48 * 256];
    for (int i = 0; i < a.length; i++) a[i] = (float) rnd.nextGaussian();
    for (int i = 0; i < b.length; i++) b[i] = (float) (rnd.nextGaussian() * (i % 256 % 61 == 3 ? 50 : 1));
    Path f = tmp.resolve("none-rank0.safetensors");
    SafetensorsWriter.write(f, List.of(new SafetensorsWriter.Tensor("layer0.mlp.fwd", new int[] {64, 256}, a, 0),
        new SafetensorsWriter.Tensor("layer0.mlp.bwd", new int[] {48, 256}, b, 0)), Map.of());
    return f;
  }

  @Test
  void errorColumnsAreTheMeanOfEachTensorsRoundTripAndTheBytesAreBf16s() throws Exception {
    Path f = tensors(7);
    CodecTable.Source s = CodecTable.source("cpu", f, List.of("fp32", "none", "taco", "int8-group"));
    CodecTable.Stats exact = CodecTable.stats(s, "fp32");
    assertThat(exact.relL2()).isZero();
    assertThat(exact.snrDb()).isInfinite();
    assertThat(exact.tensors()).isEqualTo(2);
    var x = dev.taco.runtime.analyze.TensorFiles.read(f);
    CodecStats a = CodecStats.measure(Codecs.byName("taco"), x.get(0).data(), 64, 256);
    CodecStats b = CodecStats.measure(Codecs.byName("taco"), x.get(1).data(), 48, 256);
    CodecTable.Stats taco = CodecTable.stats(s, "taco");
    assertThat(taco.relL2()).isCloseTo((a.relL2() + b.relL2()) / 2, within(1e-15));
    assertThat(taco.snrDb()).isCloseTo((a.snrDb() + b.snrDb()) / 2, within(1e-12));
    assertThat(taco.bytesPerElement()).isCloseTo((a.bytesPerElement() * a.n() + b.bytesPerElement() * b.n())
        / (a.n() + b.n()), within(1e-12));
    assertThat(taco.saturated()).isZero();
    assertThat(CodecTable.stats(s, "none").relL2()).isBetween(1e-3, 3e-3); // bf16: 8 significant bits
    assertThat(CodecTable.stats(s, "int4-group")).as("not measured").isNull();

    Path json = tmp.resolve("codecs.json"), rows = tmp.resolve("rows.json");
    assertThat(run("--sites", "cpu=" + f, "--codecs", "fp32,none,taco,auto", "--rows", rows.toString(), "--json",
        json.toString())).isZero();
    Map<String, JsonObject> by = byCodec(json);
    assertThat(by.get("none").get("bytes_ratio").getAsDouble()).isEqualTo(1.0);
    assertThat(by.get("fp32").get("bytes_ratio").getAsDouble()).isCloseTo(2.0, within(1e-3)); // raw, no header
    assertThat(by.get("taco").get("bytes_ratio").getAsDouble()).isBetween(0.5, 0.52); // fp8 + scales
    assertThat(by.get("fp32").get("rel_l2").getAsDouble()).isZero();
    assertThat(by.get("fp32").get("snr_db").isJsonNull()).as("JSON has no Infinity").isTrue();
    assertThat(by.get("taco").get("rel_l2").getAsDouble()).isEqualTo(taco.relL2());
    assertThat(by.get("auto").get("rel_l2").isJsonNull()).isTrue();
    // the per-tensor rows, given back as a source, give the same table
    Path again = tmp.resolve("again.json");
    assertThat(run("--sites", "cpu=" + rows, "--codecs", "fp32,none,taco,auto", "--json", again.toString())).isZero();
    assertThat(byCodec(again).get("taco").get("rel_l2").getAsDouble()).isEqualTo(taco.relL2());
    assertThat(byCodec(again).get("fp32").get("snr_db").isJsonNull()).isTrue();
  }

  @Test
  void mergesTheGpuCodecTheLossGapAndTheEndToEndFilesAndSaysWhatIsMissing() throws Exception {
    Path gpu = Files.writeString(tmp.resolve("gpu-codec.json"), """
        {"device": "H100", "config": "bf16", "sizes": [
          {"mib": 16, "compress_fraction_of_copy": 0.5}, {"mib": 64, "compress_fraction_of_copy": 0.724}],
         "fp4": [{"codec": "mxfp4:hadamard=on", "input": "fp32", "compress_fraction_of_copy": 0.6},
          {"codec": "mxfp4:hadamard=on", "input": "bf16", "compress_fraction_of_copy": 0.8},
          {"codec": "nvfp4:hadamard=off", "input": "bf16", "compress_fraction_of_copy": 0.9}]}
        """);
    Path r1 = report(1, 2.0, 1.9), r2 = report(2, 2.2, 2.31);
    Path gaps = tmp.resolve("loss-gap.json");
    LossGap.main(new String[] {"--out", gaps.toString(), r2.toString(), r1.toString()});
    String row = "{\"profile\": \"%s\", \"tp\": %d, \"sp\": %s, \"hidden\": %d, \"layers\": 12, \"heads\": 12,"
        + " \"seq\": 1024, \"micro_batch\": 8, \"codec\": \"%s\", \"step_ms\": %s, \"bytes_per_step\": %d}";
    Path e2e = Files.writeString(tmp.resolve("gpu-e2e.json"), "{\"device\": \"H100\", \"results\": ["
        + String.join(",", String.format(row, "ib-ndr", 8, false, 1024, "none", 300, 1000),
            String.format(row, "ib-ndr", 8, false, 1024, "taco", 100, 500),
            String.format(row, "ib-ndr", 4, false, 768, "taco", 10, 500),
            String.format(row, "ib-ndr", 8, true, 768, "taco", 10, 500),
            String.format(row, "pcie5-8", 8, false, 768, "taco", 10, 500),
            // an earlier run of the same configuration, which the later one below supersedes
            String.format(row, "ib-ndr", 8, false, 768, "none", 50, 1000),
            String.format(row, "ib-ndr", 8, false, 768, "taco", 50, 510),
            String.format(row, "ib-ndr", 8, false, 768, "none", 100, 1000),
            String.format(row, "ib-ndr", 8, false, 768, "taco", 80, 510),
            String.format(row, "ib-ndr", 8, false, 768, "auto", 90, 700))
        + "]}");
    Path json = tmp.resolve("codecs.json"), md = tmp.resolve("codecs.md");
    assertThat(run("--gpu-codec", gpu.toString(), "--loss-gap", gaps.toString(), "--e2e", e2e.toString(), "--json",
        json.toString(), "--md", md.toString())).isZero();
    Map<String, JsonObject> by = byCodec(json);
    assertThat(by.keySet()).containsExactlyElementsOf(CodecTable.CODECS);
    assertThat(by.get("taco").get("gpu_compress_fraction_of_copy").getAsDouble()).isEqualTo(0.724);
    assertThat(by.get("mxfp4").get("gpu_compress_fraction_of_copy").getAsDouble()).isEqualTo(0.8);
    assertThat(by.get("nvfp4").get("gpu_compress_fraction_of_copy").getAsDouble()).isEqualTo(0.9);
    assertThat(by.get("mxfp4:hadamard=off").get("gpu_compress_fraction_of_copy").isJsonNull()).isTrue();
    assertThat(by.get("int8-group").get("gpu_compress_fraction_of_copy").isJsonNull()).isTrue();
    JsonArray g = by.get("taco").getAsJsonArray("loss_gap_by_seed");
    assertThat(g.get(0).getAsDouble()).isCloseTo((1.9 - 2.0) / 2.0, within(1e-12));
    assertThat(g.get(1).getAsDouble()).isCloseTo((2.31 - 2.2) / 2.2, within(1e-12));
    assertThat(by.get("fp8-tensor").get("loss_gap_by_seed").isJsonNull()).as("not run").isTrue();
    assertThat(by.get("taco").get("speedup_ib_ndr_tp8").getAsDouble()).isEqualTo(100.0 / 80);
    assertThat(by.get("auto").get("speedup_ib_ndr_tp8").getAsDouble()).isEqualTo(100.0 / 90);
    assertThat(by.get("auto").get("bytes_ratio").getAsDouble()).isEqualTo(0.7);
    assertThat(by.get("int8-group").get("speedup_ib_ndr_tp8").isJsonNull()).isTrue();
    assertThat(by.get("taco").get("rel_l2").isJsonNull()).as("no --sites").isTrue();
    String page = Files.readString(md);
    assertThat(page).contains("| taco | 0.510 | — | — | — | — | 0.72 | -5.000 % / +5.000 % | 1.25x |")
        .contains("Tensors of the error columns: **none given**").contains("D=768 L=12 H=12 T=1024 B=8");

    assertThat(run("--json", json.toString(), "--md", md.toString())).isZero();
    assertThat(byCodec(json).get("taco").get("speedup_ib_ndr_tp8").isJsonNull()).isTrue();
    assertThat(Files.readString(md)).contains("Speed-up: **not given** (no gpu-e2e.json)")
        .contains("GPU compress: **not given**").contains("Loss gap: **not given**");
  }

  @Test
  void aMalformedInputGetsAOneLineErrorNamingTheFile() throws Exception {
    Path cut = Files.writeString(tmp.resolve("cut.json"), "{\"sizes\": [{\"mib\": 64,");
    assertOneLineError(new String[] {"--gpu-codec", cut.toString()}, "gpu-codec.json (GpuCodecBench) " + cut
        + ": not valid JSON");
    Path noResults = Files.writeString(tmp.resolve("e2e.json"), "{\"device\": \"H100\"}");
    assertOneLineError(new String[] {"--e2e", noResults.toString()}, "gpu-e2e.json (GpuE2E) " + noResults
        + ": no \"results\" array");
    Path text = Files.writeString(tmp.resolve("x.safetensors"), "not tensors");
    assertOneLineError(new String[] {"--sites", "cpu=" + text}, text.toString());
    assertOneLineError(new String[] {"--codecs", "taco,zip"}, "unknown codec 'zip'");
    assertOneLineError(new String[] {"--sites", "nolabel"}, "--sites takes LABEL=PATH, got 'nolabel'");
    Path wrong = Files.writeString(tmp.resolve("gap.json"), "{\"runs\": [{\"codec\": \"none\", \"seed\": 1}]}");
    assertOneLineError(new String[] {"--loss-gap", wrong.toString()}, "no \"final_val_loss\" number");
    // the runs of one grid differ in the codec and the seed only
    Path other = report(2, 2.2, 2.3);
    Files.writeString(other, Files.readString(other).replace("\"hidden_size\": 384", "\"hidden_size\": 768"));
    assertThatThrownBy(() -> LossGap.summary("c", List.of(report(1, 2.0, 1.9), other)))
        .hasMessageContaining("option hidden_size is 768 but 384 in");
  }

  /** A report.json of runs none and taco with {@code seed} and these final validation losses. */
  private Path report(long seed, double none, double taco) throws Exception {
    String run = "{\"compression\": \"%s\", \"final_val_loss\": %s, \"stopped\": null, \"wall_seconds\": 12.5}";
    return Files.writeString(tmp.resolve("report-" + seed + ".json"), "{\"config\": {\"hidden_size\": 384, \"seed\": "
        + seed + ", \"device\": \"cuda\", \"gpu\": \"H100\"}, \"runs\": [" + String.format(run, "none", none) + ", "
        + String.format(run, "taco", taco) + "]}");
  }

  private static int run(String... args) {
    return CodecTable.run(args);
  }

  private static void assertOneLineError(String[] args, String expected) {
    PrintStream old = System.err;
    ByteArrayOutputStream err = new ByteArrayOutputStream();
    System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
    int status;
    try {
      status = CodecTable.run(args);
    } finally {
      System.setErr(old);
    }
    String e = err.toString(StandardCharsets.UTF_8).strip();
    assertThat(status).as(e).isEqualTo(2);
    assertThat(e).contains(expected).doesNotContain("\tat ");
    assertThat(e.lines().count()).as(e).isEqualTo(1);
  }

  private static Map<String, JsonObject> byCodec(Path json) throws Exception {
    Map<String, JsonObject> m = new java.util.LinkedHashMap<>();
    for (var e : JsonParser.parseString(Files.readString(json)).getAsJsonObject().getAsJsonArray("codecs")) {
      m.put(e.getAsJsonObject().get("codec").getAsString(), e.getAsJsonObject());
    }
    return m;
  }
}
