package dev.taco.bench;

import dev.taco.codec.Codecs;
import dev.taco.codec.Fp8Format;
import dev.taco.codec.NcclFp8Codec;
import dev.taco.collective.CollectiveSites;
import dev.taco.collective.HostWire;
import dev.taco.collective.LocalGroup;
import dev.taco.collective.Plan;
import dev.taco.collective.Site;
import dev.taco.collective.TwoShot;
import dev.taco.runtime.data.Corpus;
import dev.taco.runtime.model.CpuOps;
import dev.taco.runtime.model.CpuTensorParallel;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.TensorParallel;
import dev.taco.runtime.model.View;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * How much {@code nccl-fp8} (NCCL's own FP8 all-reduce with one scale for the group, docs/design.md §4.1) loses against
 * TACO and the other baselines: the relative L2 error of the all-reduced tensor against the exact float64 sum of the
 * ranks' tensors, {@code ||y - s|| / ||s||}, on the host path (ranks as threads, {@code TwoShot} over {@code
 * HostWire}: the ring's FP8 arithmetic bit for bit, docs/design.md §4.1), at TP = 2 and 8. Inputs: Gaussian tensors,
 * tensors whose 1 % loud channels are the same on every rank (as TP partial sums' are), and the TP all-reduce inputs
 * of a short CPU training run of the default model at that TP size (every site's forward activations and backward
 * gradients at the last step). {@code taco} is calibrated per tensor as a training run calibrates a site (its plan
 * chosen on the tensor itself, then sent). Prints a markdown table, one row per input and TP size.
 *
 * <p>Usage: {@code java --add-modules jdk.incubator.vector -cp ... dev.taco.bench.NcclFp8Fidelity [rows=1024]
 * [cols=1024] [steps=40] [seed=1]}; through {@code bench/run-nccl-fp8.sh}.
 */
public final class NcclFp8Fidelity {
  private NcclFp8Fidelity() {}

  /** A column of the table: its label and the plan, or null for taco calibrated on the tensor. */
  record Column(String label, Plan plan) {}

  static final List<Column> COLUMNS = List.of(new Column("none (bf16)", Plan.of(Codecs.byName("none"))),
      new Column("fp8-tensor", Plan.of(Codecs.byName("fp8-tensor"))),
      new Column("nccl-fp8", Plan.of(Codecs.byName("nccl-fp8"))),
      new Column("nccl-fp8, scale 448/amax", Plan.of(new NcclFp8Codec(Fp8Format.E4M3, NcclFp8Codec.ScaleRule.MAX,
          NcclFp8Codec.NonFinite.REFUSE))),
      new Column("nccl-fp8:e5m2", Plan.of(Codecs.byName("nccl-fp8:e5m2"))), new Column("taco (calibrated)", null));

  /** One all-reduce's inputs, rank by rank. */
  record Tensors(float[][] ranks, int rows, int cols) {}

  /**
   * Runs the comparison.
   *
   * @param args {@code rows=N cols=N} of the synthetic tensors (default 1024 x 1024), {@code steps=N} of the training
   *     run (40), {@code seed=N} (1)
   * @throws IllegalArgumentException for any other argument
   */
  public static void main(String[] args) {
    Map<String, Long> opt = new LinkedHashMap<>(Map.of("rows", 1024L, "cols", 1024L, "steps", 40L, "seed", 1L));
    for (String a : args) {
      String[] kv = a.split("=", 2);
      if (kv.length != 2 || !opt.containsKey(kv[0])) {
        throw new IllegalArgumentException("unknown argument '" + a + "'; valid: rows=N cols=N steps=N seed=N");
      }
      opt.put(kv[0], Long.parseLong(kv[1]));
    }
    int rows = opt.get("rows").intValue(), cols = opt.get("cols").intValue();
    long seed = opt.get("seed");
    System.out.printf(Locale.ROOT, "# NcclFp8Fidelity rows=%d cols=%d steps=%d seed=%d; %d cores, Java %s%n", rows,
        cols, opt.get("steps"), seed, Runtime.getRuntime().availableProcessors(), Runtime.version());
    StringBuilder head = new StringBuilder("| input | TP |");
    StringBuilder rule = new StringBuilder("|---|---|");
    for (Column c : COLUMNS) {
      head.append(' ').append(c.label()).append(" |");
      rule.append("---|");
    }
    System.out.println(head);
    System.out.println(rule);
    for (int world : new int[] {2, 8}) {
      row("Gaussian", world, List.of(synthetic(world, rows, cols, seed, false)));
      row("1 % outlier channels (x64)", world, List.of(synthetic(world, rows, cols, seed, true)));
      Map<String, List<Tensors>> real = capture(world, opt.get("steps").intValue(), seed);
      real.forEach((dir, tensors) -> row("TP " + (dir.equals("fwd") ? "activations" : "gradients") + " (" + dir + ", "
          + tensors.size() + " tensors " + tensors.get(0).rows() + " x " + tensors.get(0).cols() + ")", world,
          tensors));
    }
  }

  /** One table row: each column's relative L2 error, averaged over {@code tensors}. */
  private static void row(String input, int world, List<Tensors> tensors) {
    StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "| %s | %d |", input, world));
    for (Column c : COLUMNS) {
      double sum = 0;
      for (Tensors t : tensors) sum += relL2(c.plan(), t);
      line.append(String.format(Locale.ROOT, " %.3f %% |", 100 * sum / tensors.size()));
    }
    System.out.println(line);
  }

  /** {@code ||y - s|| / ||s||} of rank 0's all-reduced tensor {@code y} against the float64 sum {@code s}. */
  static double relL2(Plan plan, Tensors t) {
    int world = t.ranks().length, n = t.rows() * t.cols();
    List<float[]> out = LocalGroup.run(world, comm -> {
      float[] x = t.ranks()[comm.rank()].clone();
      if (plan != null) {
        TwoShot.allReduce(new HostWire(comm), plan, x, t.rows(), t.cols());
        return x;
      }
      CollectiveSites sites = new CollectiveSites(comm, "taco", 1, 0); // the first use calibrates, the second sends
      Site site = new Site.Layer(0, Site.Block.MLP, false, Site.Direction.FORWARD);
      sites.allReduce(site, x.clone(), t.rows(), t.cols());
      sites.allReduce(site, x, t.rows(), t.cols());
      return x;
    });
    double err = 0, norm = 0;
    for (int i = 0; i < n; i++) {
      double s = 0;
      for (float[] r : t.ranks()) s += r[i];
      err += (out.get(0)[i] - s) * (out.get(0)[i] - s);
      norm += s * s;
    }
    return Math.sqrt(err / norm);
  }

  /** Every rank's {@code rows x cols} tensor: N(0, 1), with 1 % of the channels 64 times louder if {@code outliers}. */
  static Tensors synthetic(int world, int rows, int cols, long seed, boolean outliers) {
    SplittableRandom channels = new SplittableRandom(seed);
    boolean[] loud = new boolean[cols];
    for (int j = 0; j < cols; j++) loud[j] = outliers && channels.nextInt(100) == 0;
    float[][] x = new float[world][rows * cols];
    for (int q = 0; q < world; q++) {
      SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + q);
      for (int i = 0; i < rows * cols; i++) x[q][i] = (float) (rnd.nextGaussian() * (loud[i % cols] ? 64 : 1));
    }
    return new Tensors(x, rows, cols);
  }

  /**
   * Trains the default model of {@code ./taco train} (4 layers, hidden 128, sequence 128, micro-batch 8; 8 heads, so
   * that TP = 8 divides them) for {@code steps} steps at TP = {@code world} with exact collectives on the bundled
   * corpus, and returns, by direction ({@code fwd}, {@code bwd}), every TP all-reduce's inputs of the last step.
   */
  static Map<String, List<Tensors>> capture(int world, int steps, long seed) {
    GptConfig cfg = new GptConfig(Corpus.VOCAB, 128, 4, 8, 128, world);
    int b = 8;
    Corpus corpus = Corpus.bundled(0.1);
    List<List<float[]>> perRank = new ArrayList<>();
    List<List<String>> labels = new ArrayList<>();
    List<int[]> shapes = new ArrayList<>();
    List<Object[]> res = LocalGroup.run(world, comm -> {
      Recorder tp = new Recorder(new CpuTensorParallel(CollectiveSites.fixed(comm)));
      Gpt<float[]> model = new Gpt<>(cfg, new CpuOps(), tp, comm.rank(), b, seed);
      SplittableRandom rng = new SplittableRandom(seed); // the same batches on every rank
      int[] in = new int[b * cfg.seqLength()], tgt = new int[b * cfg.seqLength()];
      for (int s = 0; s < steps; s++) {
        corpus.batch(false, rng, b, cfg.seqLength(), in, tgt);
        tp.recording = s == steps - 1;
        model.trainStep(in, tgt);
        double norm = Math.sqrt(model.gradSquaredNorm(true));
        float lr = 2e-3f * Math.min(1f, (s + 1) / 10f);
        model.update(lr, 0.9f, 0.95f, 1e-8f, 0.1f, norm > 1 ? (float) (1 / norm) : 1f, s + 1);
      }
      return new Object[] {tp.tensors, tp.labels, tp.shapes};
    });
    for (Object[] r : res) {
      perRank.add(cast(r[0]));
      labels.add(cast(r[1]));
      shapes = cast(r[2]);
    }
    Map<String, List<Tensors>> out = new LinkedHashMap<>();
    for (int i = 0; i < labels.get(0).size(); i++) {
      float[][] ranks = new float[world][];
      for (int q = 0; q < world; q++) ranks[q] = perRank.get(q).get(i);
      out.computeIfAbsent(labels.get(0).get(i), k -> new ArrayList<>())
          .add(new Tensors(ranks, shapes.get(i)[0], shapes.get(i)[1]));
    }
    return out;
  }

  @SuppressWarnings("unchecked")
  private static <T> T cast(Object o) {
    return (T) o;
  }

  /** The CPU TP collectives, keeping a copy of every all-reduce's input while {@link #recording}. */
  private static final class Recorder implements TensorParallel<float[]> {
    final TensorParallel<float[]> inner;
    final List<float[]> tensors = new ArrayList<>();
    final List<String> labels = new ArrayList<>();
    final List<int[]> shapes = new ArrayList<>();
    boolean recording;

    Recorder(TensorParallel<float[]> inner) {
      this.inner = inner;
    }

    @Override
    public void allReduce(Site site, View<float[]> x, int rows, int cols) {
      if (recording) {
        tensors.add(java.util.Arrays.copyOfRange(x.arena(), x.off(), x.off() + rows * cols));
        labels.add(site.direction().label());
        shapes.add(new int[] {rows, cols});
      }
      inner.allReduce(site, x, rows, cols);
    }

    @Override
    public void allGather(Site site, View<float[]> out, View<float[]> shard, int shardRows, int cols) {
      inner.allGather(site, out, shard, shardRows, cols);
    }

    @Override
    public void reduceScatter(Site site, View<float[]> shard, View<float[]> x, int rows, int cols) {
      inner.reduceScatter(site, shard, x, rows, cols);
    }

    @Override
    public void allReduceExact(View<float[]> x, int n) {
      inner.allReduceExact(x, n);
    }

    @Override
    public long bytesSent() {
      return inner.bytesSent();
    }
  }
}
