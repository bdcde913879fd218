package dev.taco.bench;

import dev.taco.collective.LocalCommunicator;
import dev.taco.collective.LocalGroup;
import dev.taco.runtime.data.Corpus;
import dev.taco.collective.CollectiveSites;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One training step of the default {@code ./taco train} model on the CPU (docs/design.md §7): 4 layers, hidden 128, 4
 * heads, sequence 128, micro-batch 8, vocabulary 256, TP = 2 as two threads of this JVM over the {@code local}
 * transport, each TP collective through the codec ({@code none}: bf16 on the wire; {@code taco}: the calibrated
 * per-site plans, calibrated during the warm-up). A step is what {@code Trainer} does per step: zero-grad, forward,
 * backward ({@code Gpt.trainStep}), the gradient norm summed over the ranks, and AdamW; on the bundled corpus's next
 * batch; no evaluation and no codec-error sampling. Average time per step.
 *
 * <p>It uses only API that the previous commits also have, so {@code bench/run-train-step.sh} compiles this same file
 * against an older build, and {@link TrainStepAlternation} runs the two builds' steps in turn in one JVM: the speed-up
 * is a ratio measured in the same run.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
public class TrainStepBench {

  /** The two ranks, their models and their data. */
  @State(Scope.Benchmark)
  public static class Ranks {
    /** {@code none} or {@code taco} (any codec spec). */
    @Param({"none", "taco"})
    public String codec;

    static final int R = 2, B = 8;
    final GptConfig cfg = new GptConfig(256, 128, 4, 4, 128, R);
    final List<Gpt<float[]>> models = new ArrayList<>();
    final List<LocalCommunicator> comms = new ArrayList<>();
    ExecutorService threads;
    Corpus corpus;
    SplittableRandom rng;
    int[] in;
    int[] tgt;
    int step;

    /** Builds both ranks' models (seed 1234, the CLI's default) on one local group. */
    @Setup(Level.Trial)
    public void setup() {
      corpus = Corpus.bundled(0.1);
      rng = new SplittableRandom(1234);
      in = new int[B * cfg.seqLength()];
      tgt = new int[B * cfg.seqLength()];
      comms.addAll(LocalGroup.create(R));
      for (LocalCommunicator c : comms) {
        models.add(Gpt.cpu(cfg, new CollectiveSites(c, codec, 2, 0), B, 1234));
      }
      threads = Executors.newFixedThreadPool(R);
    }

    /** Stops the rank threads and closes the group. */
    @TearDown(Level.Trial)
    public void tearDown() {
      threads.shutdownNow();
      for (LocalCommunicator c : comms) c.close();
    }
  }

  /** One step on both ranks; returns rank 0's loss. */
  @Benchmark
  public float step(Ranks s) throws InterruptedException, ExecutionException {
    s.corpus.batch(false, s.rng, Ranks.B, s.cfg.seqLength(), s.in, s.tgt);
    int step = ++s.step;
    List<Future<Float>> done = new ArrayList<>();
    for (int r = 0; r < Ranks.R; r++) {
      Gpt<float[]> m = s.models.get(r);
      LocalCommunicator c = s.comms.get(r);
      done.add(s.threads.submit(() -> {
        float loss = m.trainStep(s.in, s.tgt);
        float[] norm = {(float) m.gradSquaredNorm(c.rank() == 0)};
        c.allReduce(norm, 0, 1);
        float g = (float) Math.sqrt(norm[0]);
        m.update(2e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, g > 1f ? 1f / g : 1f, step);
        return loss;
      }));
    }
    float loss = 0;
    for (int r = 0; r < Ranks.R; r++) {
      float l = done.get(r).get();
      if (r == 0) loss = l;
    }
    return loss;
  }
}
