package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.runtime.cli.TacoCliTest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Data parallelism (docs/design.md §6): a TP × DP grid of thread ranks, each replica on its share of every global batch,
 * gradients all-reduced over the replicas; with a fixed global batch the step is the same whatever the split into
 * replicas and accumulated micro-batches.
 */
class DataParallelTest {
  @TempDir
  Path tmp;

  private TacoCliTest.Result train(Path out, String... more) {
    List<String> args = new ArrayList<>(List.of("train", "--num-layers", "2", "--hidden-size", "64",
        "--num-attention-heads", "4", "--seq-length", "32", "--eval-interval", "5", "--eval-iters", "2",
        "--lr-warmup-iters", "2", "--compression", "fp32", "--tp", "2", "--out", out.toString()));
    args.addAll(List.of(more));
    return TacoCliTest.run(args.toArray(String[]::new));
  }

  @Test
  void dp2Tp2WithAFixedGlobalBatchEqualsDp1WithAccumulation() throws Exception {
    // global batch 8: 2 replicas x 1 micro-batch of 4; 1 replica x 2 accumulated micro-batches of 4; 1 x 1 of 8
    Path dp2 = tmp.resolve("dp2"), acc = tmp.resolve("acc"), whole = tmp.resolve("whole");
    TacoCliTest.Result a = train(dp2, "--data-parallel-size", "2", "--micro-batch-size", "4", "--steps", "10");
    assertThat(a.status()).as(a.err()).isZero();
    assertThat(train(acc, "--micro-batch-size", "4", "--global-batch-size", "8", "--steps", "10").status()).isZero();
    assertThat(train(whole, "--micro-batch-size", "8", "--steps", "10").status()).isZero();
    Map<Integer, double[]> l2 = CheckpointTest.losses(dp2, 0), la = CheckpointTest.losses(acc, 0),
        lw = CheckpointTest.losses(whole, 0);
    assertThat(l2.keySet()).hasSize(11).isEqualTo(la.keySet());
    for (int s = 0; s < 10; s++) {
      assertThat(l2.get(s)[0]).as("DP=2 vs accumulation, step %d", s).isCloseTo(la.get(s)[0],
          org.assertj.core.api.Assertions.within(2e-5));
      assertThat(la.get(s)[0]).as("accumulation vs one micro-batch of 8, step %d", s).isCloseTo(lw.get(s)[0],
          org.assertj.core.api.Assertions.within(2e-5));
    }
    assertThat(l2.get(9)[0]).as("it learns").isLessThan(l2.get(0)[0] - 1);
    JsonObject run = JsonParser.parseString(Files.readString(dp2.resolve("report.json"))).getAsJsonObject()
        .getAsJsonArray("runs").get(0).getAsJsonObject();
    assertThat(run.getAsJsonObject("bytes_per_step_by_kind").get("data-parallel all-reduce (gradients, fp32)")
        .getAsDouble()).isPositive();
  }

  /**
   * With TACO's calibrated plans: the replicas calibrate their backward sites on different data, so the checkpoint
   * keeps every replica's sites; and the gradients' calibrated int8-group plans, one DP group's per TP rank.
   */
  @Test
  void aDataParallelRunResumesBitForBit() throws Exception {
    Path whole = tmp.resolve("A"), stopped = tmp.resolve("B"), resumed = tmp.resolve("C"), ck = tmp.resolve("D");
    String[] grid = {"--data-parallel-size", "2", "--micro-batch-size", "2", "--global-batch-size", "8", "--steps", "6",
        "--compression", "taco", "--dp-compression", "int8-group"};
    assertThat(train(whole, grid).status()).isZero();
    List<String> save = new ArrayList<>(List.of(grid));
    save.addAll(List.of("--save", ck.toString(), "--exit-interval", "3"));
    assertThat(train(stopped, save.toArray(String[]::new)).status()).isZero();
    List<String> load = new ArrayList<>(List.of(grid));
    load.addAll(List.of("--load", ck.toString()));
    TacoCliTest.Result c = train(resumed, load.toArray(String[]::new));
    assertThat(c.status()).as(c.err()).isZero();
    assertThat(CheckpointTest.losses(resumed, 0).keySet()).containsExactly(3, 4, 5, 6);
    CheckpointTest.assertSameLosses(CheckpointTest.losses(whole, 0), CheckpointTest.losses(resumed, 0));
  }

  @Test
  void aGlobalBatchTheGridDoesNotDivideIsRefused() {
    TacoCliTest.Result r = train(tmp.resolve("x"), "--data-parallel-size", "2", "--micro-batch-size", "4",
        "--global-batch-size", "12", "--steps", "1");
    assertThat(r.status()).isEqualTo(2);
    assertThat(r.err()).contains("--global-batch-size 12 must be a positive multiple of --micro-batch-size x"
        + " --data-parallel-size = 8");
    assertThat(train(tmp.resolve("y"), "--data-parallel-size", "0", "--steps", "1").err())
        .contains("--data-parallel-size must be positive");
    assertThat(train(tmp.resolve("z"), "--data-parallel-size", "2", "--dp-compression", "zip", "--steps", "1").err())
        .contains("--dp-compression").contains("zip");
  }
}
