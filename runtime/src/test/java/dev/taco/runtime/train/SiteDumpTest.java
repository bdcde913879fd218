package dev.taco.runtime.train;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import dev.taco.collective.Site;
import dev.taco.runtime.analyze.NamedTensor;
import dev.taco.runtime.analyze.TensorFiles;
import dev.taco.runtime.cli.TacoCliTest;
import dev.taco.runtime.model.CpuOps;
import dev.taco.runtime.model.TensorParallel;
import dev.taco.runtime.model.View;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code --dump-sites}: the tensors a step hands its TP collectives, each site's first call once, at most
 * {@link SiteDump#MAX_ROWS} rows, written as safetensors with the sites' collectives in the metadata; every call still
 * reaches the collectives.
 */
class SiteDumpTest {
  @TempDir
  Path tmp;

  /** The calls that reach the collectives. */
  private static final class Calls implements TensorParallel<float[]> {
    final List<String> seen = new ArrayList<>();

    @Override
    public void allReduce(Site site, View<float[]> x, int rows, int cols) {
      seen.add("all-reduce " + site.name());
    }

    @Override
    public void allGather(Site site, View<float[]> out, View<float[]> shard, int shardRows, int cols) {
      seen.add("all-gather " + site.name());
    }

    @Override
    public void reduceScatter(Site site, View<float[]> shard, View<float[]> x, int rows, int cols) {
      seen.add("reduce-scatter " + site.name());
    }

    @Override
    public void allReduceExact(View<float[]> x, int n) {
      seen.add("exact");
    }

    @Override
    public long bytesSent() {
      return 0;
    }
  }

  @Test
  void takesEachSitesFirstCallWhileArmedAtMostMaxRowsAndWritesExactlyThat() throws Exception {
    long seed = 20261207L;
    System.out.println("SiteDumpTest seed " + seed);
    SplittableRandom rnd = new SplittableRandom(seed);
    int cols = 8, rows = SiteDump.MAX_ROWS + 476;
    float[] arena = new float[5 + rows * cols];
    for (int i = 0; i < arena.length; i++) arena[i] = (float) rnd.nextGaussian();
    float[] other = arena.clone();
    Arrays.fill(other, 3f);
    Calls calls = new Calls();
    SiteDump<float[]> dump = new SiteDump<>(calls, new CpuOps(), tmp.resolve("d"), "taco:e5m2,g=64", 1, "cpu, TP=2");
    Site mlp = new Site.Layer(0, Site.Block.MLP, false, Site.Direction.FORWARD);
    Site gather = new Site.Layer(1, Site.Block.ATTENTION, true, Site.Direction.FORWARD);
    Site scatter = new Site.Layer(1, Site.Block.MLP, false, Site.Direction.BACKWARD);
    dump.allReduce(mlp, new View<>(other, 0), 2, cols); // not armed: not taken
    dump.take(true);
    dump.allReduce(mlp, new View<>(arena, 5), rows, cols);
    dump.allReduce(mlp, new View<>(other, 0), rows, cols); // a second micro-batch: the first one stays
    dump.allGather(gather, new View<>(new float[6 * cols], 0), new View<>(arena, 5), 3, cols);
    dump.reduceScatter(scatter, new View<>(new float[cols], 0), new View<>(arena, 5 + cols), 2, cols);
    dump.allReduceExact(new View<>(arena, 0), 4);
    assertThat(calls.seen).containsExactly("all-reduce layer0.mlp.fwd", "all-reduce layer0.mlp.fwd",
        "all-reduce layer0.mlp.fwd", "all-gather layer1.attn.gather.fwd", "reduce-scatter layer1.mlp.bwd", "exact");
    dump.write(41);
    dump.allReduce(mlp, new View<>(other, 0), 2, cols); // write disarms
    Path file = tmp.resolve("d").resolve("taco_e5m2_g=64-rank1.safetensors");
    assertThat(dump.file()).isEqualTo(file);
    List<NamedTensor> ts = TensorFiles.read(file);
    assertThat(ts).extracting(NamedTensor::name).containsExactly("layer0.mlp.fwd", "layer1.attn.gather.fwd",
        "layer1.mlp.bwd");
    assertThat(ts.get(0).shape()).containsExactly(SiteDump.MAX_ROWS, cols);
    assertThat(ts.get(0).data()).containsExactly(Arrays.copyOfRange(arena, 5, 5 + SiteDump.MAX_ROWS * cols));
    assertThat(ts.get(1).shape()).containsExactly(3, cols);
    assertThat(ts.get(1).data()).containsExactly(Arrays.copyOfRange(arena, 5, 5 + 3 * cols));
    assertThat(ts.get(2).data()).containsExactly(Arrays.copyOfRange(arena, 5 + cols, 5 + 3 * cols));
    JsonObject meta = metadata(file);
    assertThat(meta.get("step").getAsString()).isEqualTo("41");
    assertThat(meta.get("rank").getAsString()).isEqualTo("1");
    assertThat(meta.get("compression").getAsString()).isEqualTo("taco:e5m2,g=64");
    assertThat(meta.get("run").getAsString()).isEqualTo("cpu, TP=2");
    assertThat(meta.get("layer0.mlp.fwd").getAsString()).isEqualTo("all-reduce " + rows + "x" + cols);
    assertThat(meta.get("layer1.attn.gather.fwd").getAsString()).isEqualTo("all-gather 3x" + cols);
    assertThat(meta.get("layer1.mlp.bwd").getAsString()).isEqualTo("reduce-scatter 2x" + cols);
  }

  @Test
  void aTrainingRunDumpsEverySiteOfItsLastStepPerRankAndCodec() throws Exception {
    Path dir = tmp.resolve("sites");
    String[] args = {"train", "--steps", "3", "--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4",
        "--seq-length", "16", "--micro-batch-size", "2", "--eval-iters", "1", "--compression", "none,taco", "--out"};
    TacoCliTest.Result r = TacoCliTest.run(concat(args, tmp.resolve("o").toString(), "--dump-sites", dir.toString()));
    assertThat(r.status()).as(r.err()).isZero();
    TacoCliTest.Result plain = TacoCliTest.run(concat(args, tmp.resolve("p").toString()));
    assertThat(plain.status()).as(plain.err()).isZero();
    assertThat(finalLosses(tmp.resolve("o"))).as("the copies change nothing").isEqualTo(finalLosses(tmp.resolve("p")));
    for (String codec : List.of("none", "taco")) {
      List<List<NamedTensor>> ranks = new ArrayList<>();
      for (int q = 0; q < 2; q++) {
        Path f = dir.resolve(codec + "-rank" + q + ".safetensors");
        ranks.add(TensorFiles.read(f));
        assertThat(metadata(f).get("step").getAsString()).isEqualTo("2");
        assertThat(metadata(f).get("run").getAsString()).isEqualTo("cpu, TP=2, 2 layers, hidden 16, 4 heads, seq 16,"
            + " micro-batch 2, seed 1234, 3 steps");
        assertThat(ranks.get(q)).extracting(NamedTensor::name).containsExactlyInAnyOrder("layer0.attn.fwd",
            "layer0.mlp.fwd", "layer1.attn.fwd", "layer1.mlp.fwd", "layer0.attn.bwd", "layer0.mlp.bwd",
            "layer1.attn.bwd", "layer1.mlp.bwd");
        for (NamedTensor t : ranks.get(q)) assertThat(t.shape()).containsExactly(32, 16);
      }
      // partial sums: each rank holds its own heads' and channels' share, not the same tensor
      assertThat(ranks.get(0).get(0).data()).isNotEqualTo(ranks.get(1).get(0).data());
    }
    assertThat(Files.list(dir)).hasSize(4);
    assertThatThrownBy(() -> Trainer.Options.builder().tensorModelParallelSize(1).dumpSites("d").build())
        .hasMessage("--dump-sites needs --tp of 2 or more: one rank sends no TP tensor");
  }

  private static String[] concat(String[] a, String... b) {
    String[] all = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, all, a.length, b.length);
    return all;
  }

  /** Every run's final validation loss in {@code out}'s report.json. */
  private static List<Double> finalLosses(Path out) throws Exception {
    List<Double> l = new ArrayList<>();
    for (var run : JsonParser.parseString(Files.readString(out.resolve("report.json"))).getAsJsonObject()
        .getAsJsonArray("runs")) {
      l.add(run.getAsJsonObject().get("final_val_loss").getAsDouble());
    }
    return l;
  }

  /** The {@code __metadata__} of a safetensors file. */
  static JsonObject metadata(Path file) throws Exception {
    byte[] all = Files.readAllBytes(file);
    long n = ByteBuffer.wrap(all, 0, 8).order(ByteOrder.LITTLE_ENDIAN).getLong();
    String json = new String(all, 8, (int) n, StandardCharsets.UTF_8);
    return JsonParser.parseString(json).getAsJsonObject().getAsJsonObject("__metadata__");
  }
}
