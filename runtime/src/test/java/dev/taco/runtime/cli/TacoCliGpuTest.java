package dev.taco.runtime.cli;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.gson.JsonArray;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cuda;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code taco train --device cuda} end to end on a tiny model (skipped with the reason without a GPU): TP = 1 in fp32
 * ends within 1 % of the CPU run's validation loss from the same seed, and in bf16 (the default) within 3 %; TP = 2
 * ranks sharing the GPU ({@code device-local}) with bf16 on the wire write the same report as on the CPU, with the
 * GPU's name, memory, precision and per-step time breakdown, bytes on the wire and finite losses; {@code --no-tp-comm}
 * puts no bytes on the wire and says in the report that its losses are wrong; TP = 1 through a one-rank NCCL
 * communicator ({@code --tp-transport nccl}) ends where the run without one does, and TP = 2 over NCCL on one GPU is
 * refused naming the GPU count; a codec without GPU kernels is refused before any work.
 */
@Tag("gpu")
class TacoCliGpuTest {
  @TempDir
  Path tmp;

  static void assumeGpu() {
    assumeTrue(Cuda.available() && Cuda.deviceCount() > 0 && Cublas.available(),
        Cuda.unavailableReason() + "; " + Cublas.unavailableReason());
  }

  static JsonObject train(Path out, String... more) throws Exception {
    TacoCliTest.Result r = TacoCliTest.run(TacoCliTest.tiny(out, more));
    assertThat(r.status()).as(r.err()).isZero();
    return JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject();
  }

  static double finalVal(JsonObject report) {
    return report.getAsJsonArray("runs").get(0).getAsJsonObject().get("final_val_loss").getAsDouble();
  }

  @Test
  void cudaTp1MatchesTheCpuAndTp2SharesTheGpu() throws Exception {
    assumeGpu();
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    String[] common = {"--data", text.toString(), "--hidden-size", "64", "--compression", "fp32", "--tp", "1"};
    JsonObject cpu = train(tmp.resolve("cpu"), common);
    JsonObject gpu = train(tmp.resolve("gpu"), concat(common, "--device", "cuda", "--precision", "fp32"));
    assertThat(gpu.getAsJsonObject("config").get("device").getAsString()).isEqualTo("cuda");
    assertThat(gpu.getAsJsonObject("config").get("gpu").getAsString()).isNotBlank();
    assertThat(gpu.getAsJsonObject("config").get("gpu_memory_gib").getAsDouble()).isPositive();
    assertThat(gpu.getAsJsonObject("config").get("precision").getAsString()).isEqualTo("fp32");
    assertThat(Math.abs(finalVal(gpu) - finalVal(cpu)) / finalVal(cpu)).as("GPU fp32 vs CPU final validation loss")
        .isLessThanOrEqualTo(0.01);
    JsonObject viaNccl = train(tmp.resolve("nccl"), concat(common, "--device", "cuda", "--precision", "fp32",
        "--tp-transport", "nccl")); // TP = 1 through an NCCL communicator of one rank: the same run
    assertThat(viaNccl.getAsJsonObject("config").get("tp_transport").getAsString()).isEqualTo("nccl");
    assertThat(Math.abs(finalVal(viaNccl) - finalVal(gpu)) / finalVal(gpu)).as("NCCL TP=1 vs alone")
        .isLessThanOrEqualTo(
            1e-6);
    TacoCliTest.assertOneLineError(TacoCliTest.run(TacoCliTest.tiny(tmp.resolve("n1"), "--device", "cuda", "--tp", "1",
        "--no-tp-comm")), "--no-tp-comm with --tp 1: there are no TP collectives to skip");
    if (Cuda.deviceCount() < 2) {
      TacoCliTest.assertOneLineError(TacoCliTest.run(TacoCliTest.tiny(tmp.resolve("n2"), "--device", "cuda",
          "--tp-transport", "nccl")),
          "--tp-transport nccl needs a GPU per rank: 2 ranks (--tp x --data-parallel-size) but this machine has 1 GPU");
    }
    JsonObject bf16 = train(tmp.resolve("bf16"), concat(common, "--device", "cuda"));
    assertThat(bf16.getAsJsonObject("config").get("precision").getAsString()).startsWith("bf16");
    assertThat(Math.abs(finalVal(bf16) - finalVal(cpu)) / finalVal(cpu)).as("GPU bf16 vs CPU final validation loss")
        .isLessThanOrEqualTo(0.03);

    JsonObject tp2 = train(tmp.resolve("tp2"), "--data", text.toString(), "--hidden-size", "64", "--compression",
        "none", "--tp", "2", "--device", "cuda");
    assertThat(tp2.getAsJsonObject("config").get("device").getAsString()).isEqualTo("cuda");
    JsonArray runs = tp2.getAsJsonArray("runs");
    JsonObject run = runs.get(0).getAsJsonObject();
    assertThat(run.get("tp").getAsInt()).isEqualTo(2);
    assertThat(run.get("tp_bytes_per_step").getAsDouble()).isPositive();
    assertThat(Double.isFinite(run.get("final_val_loss").getAsDouble())).isTrue();
    JsonObject times = run.getAsJsonObject("gpu_step_ms");
    for (String k : new String[] {"gemm", "attention", "tp_collectives", "compression", "optimizer", "other_kernels",
        "total"}) {
      assertThat(times.get(k).getAsDouble()).as("gpu_step_ms.%s", k).isPositive();
    }
    assertThat(tp2.getAsJsonObject("config").get("tp_comm").getAsBoolean()).isTrue();

    // per-site plans on the GPU, as on the CPU: taco at TP = 2 calibrates every site and samples its codec error
    String[] taco = {"--data", text.toString(), "--hidden-size", "64", "--compression", "taco", "--tp", "2"};
    JsonObject tacoCpu = train(tmp.resolve("taco-cpu"), taco);
    JsonObject tacoGpu = train(tmp.resolve("taco-gpu"), concat(taco, "--device", "cuda", "--precision", "fp32"));
    JsonObject gpuRun = tacoGpu.getAsJsonArray("runs").get(0).getAsJsonObject();
    JsonObject cpuRun = tacoCpu.getAsJsonArray("runs").get(0).getAsJsonObject();
    assertThat(gpuRun.getAsJsonObject("plans").keySet()).as("calibrated sites").isNotEmpty()
        .isEqualTo(cpuRun.getAsJsonObject("plans").keySet());
    assertThat(gpuRun.getAsJsonObject("codec_error").keySet()).as("sampled directions").containsExactlyInAnyOrder(
        "fwd", "bwd");
    assertThat(Math.abs(finalVal(tacoGpu) - finalVal(tacoCpu)) / finalVal(tacoCpu)).as("GPU vs CPU, taco TP = 2")
        .isLessThanOrEqualTo(0.01);

    JsonObject off = train(tmp.resolve("off"), "--data", text.toString(), "--hidden-size", "64", "--compression",
        "none", "--tp", "2", "--device", "cuda", "--no-tp-comm");
    assertThat(off.getAsJsonObject("config").get("tp_comm").getAsBoolean()).isFalse();
    assertThat(off.getAsJsonObject("config").get("warning").getAsString()).contains("losses are wrong");
    JsonObject offRun = off.getAsJsonArray("runs").get(0).getAsJsonObject();
    assertThat(offRun.get("tp_bytes_per_step").getAsDouble()).isZero();
    assertThat(offRun.getAsJsonObject("gpu_step_ms").get("tp_collectives").getAsDouble())
        .isLessThan(times.get("tp_collectives").getAsDouble());
    if (dev.taco.runtime.train.Report.canPlot()) {
      assertThat(Files.readAllBytes(tmp.resolve("tp2").resolve("loss.png"))).startsWith((byte) 0x89, (byte) 'P');
    } else {
      assertThat(tmp.resolve("tp2").resolve("loss.png")).doesNotExist();
    }
  }

  /**
   * {@code --compression auto} on the GPU ({@code device-local}, TP = 2, a slow link so that bytes count): every
   * candidate, the 4-bit floats and nccl-fp8 included, is priced by its kernels on this GPU; each site's codec passes
   * its direction's bound; the device collectives count the TP bytes per kind and direction, which for {@code none}
   * (no calibration) add up to its TP bytes per step.
   */
  @Test
  void autoOnTheGpuChoosesPerSiteAndReportsTheBytesPerKindAndDirection() throws Exception {
    assumeGpu();
    Path text = Files.writeString(tmp.resolve("t.txt"), "the quick brown fox jumps over the lazy dog. ".repeat(200));
    JsonObject rep = train(tmp.resolve("auto"), "--data", text.toString(), "--hidden-size", "64", "--compression",
        "none,auto", "--tp", "2", "--device", "cuda", "--precision", "fp32", "--link", "0.02", "--auto-max-error",
        "activations=0.05,gradients=0.3");
    TacoCliTest.assertAllReduceBytesByDirection(rep);
    JsonObject plans = rep.getAsJsonArray("runs").get(1).getAsJsonObject().getAsJsonObject("plans");
    assertThat(plans.keySet()).containsExactlyInAnyOrder("layer0.attn.fwd", "layer0.mlp.fwd", "layer0.attn.bwd",
        "layer0.mlp.bwd");
    for (String site : plans.keySet()) {
      JsonObject p = plans.getAsJsonObject(site);
      String choice = p.get("choice").getAsString();
      assertThat(choice).as(site).startsWith("predicted ms:")
          .contains(site.endsWith("fwd") ? "(fwd gate rel L2 <= 0.0500)" : "(bwd gate rel L2 <= 0.300)");
      assertThat(p.get("relL2").getAsDouble()).as(site + ": " + choice).isLessThanOrEqualTo(
          site.endsWith("fwd") ? 0.05 : 0.3);
    }
  }

  @Test
  void aCodecWithoutGpuKernelsIsRefusedUpFront() {
    assumeGpu();
    TacoCliTest.assertOneLineError(TacoCliTest.run(TacoCliTest.tiny(tmp.resolve("o"), "--device", "cuda",
        "--compression", "none,int4-group")), "--compression int4-group cannot run on the GPU");
  }

  static String[] concat(String[] a, String... b) {
    String[] all = new String[a.length + b.length];
    System.arraycopy(a, 0, all, 0, a.length);
    System.arraycopy(b, 0, all, a.length, b.length);
    return all;
  }
}
