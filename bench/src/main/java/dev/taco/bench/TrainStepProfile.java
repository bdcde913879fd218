package dev.taco.bench;

import dev.taco.collective.LocalGroup;
import dev.taco.collective.CollectiveSites;
import dev.taco.runtime.model.CpuOps;
import dev.taco.runtime.model.CpuTensorParallel;
import dev.taco.runtime.model.TensorParallel;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.Ops;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;

/**
 * A profile of one CPU training step of the default {@code ./taco train} model (vocab 256, T = 128, 4 layers, 4 heads, hidden 128,
 * micro-batch 8, TP = 2 as two threads of this JVM, exact fp32 all-reduces so that the codecs' cost stays out): the
 * step is {@link Gpt#trainStep}, {@link Gpt#gradSquaredNorm} and {@link Gpt#update}, as the trainer runs it. Prints the
 * median and mean wall time per step over the measured steps (rank 0's clock; the ranks meet in every all-reduce) and
 * rank 0's time per {@link Ops} call, summed per method over a step (median and mean over the steps) (the calls Gpt makes: {@code matmulGeluForward}
 * includes the GELU, {@code matmulBackwardGelu} its backward), with the load average before and after.
 *
 * <p>Usage: {@code java --add-modules jdk.incubator.vector -cp ... dev.taco.bench.TrainStepProfile [steps=30]
 * [warmup=30]}; through {@code bench/run-step.sh}.
 */
public final class TrainStepProfile {
  private TrainStepProfile() {}

  /** The default model of {@code ./taco train}. */
  static final GptConfig CONFIG = new GptConfig(256, 128, 4, 4, 128, 2);
  static final int MICRO_BATCH = 8;

  /**
   * Runs the benchmark.
   *
   * @param args {@code steps=N} measured steps (default 30), {@code warmup=N} warm-up steps (default 30: the Vector API
   *     is slow until C2 has compiled it)
   * @throws IllegalArgumentException for any other argument or a count below 1 (steps) or 0 (warmup)
   */
  public static void main(String[] args) throws Exception {
    int steps = count(args, "steps", 30, 1);
    int warmup = count(args, "warmup", 30, 0);
    String loadBefore = loadAverage();
    List<Result> results = LocalGroup.run(CONFIG.tp(), comm -> {
      Timed timed = new Timed(steps);
      Gpt<float[]> model = new Gpt<>(CONFIG, timed.of(Ops.class, new CpuOps()),
          timed.of(TensorParallel.class, new CpuTensorParallel(CollectiveSites.fixed(comm))), comm.rank(), MICRO_BATCH,
          1337);
      int n = MICRO_BATCH * CONFIG.seqLength();
      int[] in = new int[n], tgt = new int[n];
      SplittableRandom r = new SplittableRandom(42); // the same tokens on every rank, as the trainer draws them
      long[] nanos = new long[steps];
      float loss = 0;
      for (int s = 0; s < warmup + steps; s++) {
        for (int i = 0; i < n; i++) {
          in[i] = r.nextInt(CONFIG.vocabSize());
          tgt[i] = r.nextInt(CONFIG.vocabSize());
        }
        timed.step = s - warmup; // negative while warming up: not recorded
        long t0 = System.nanoTime();
        loss = model.trainStep(in, tgt);
        double norm = Math.sqrt(model.gradSquaredNorm(true));
        model.update(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, norm > 1 ? (float) (1 / norm) : 1f, s + 1);
        if (s >= warmup) nanos[s - warmup] = System.nanoTime() - t0;
      }
      return new Result(nanos, timed.times, loss);
    });
    String loadAfter = loadAverage();
    Result r0 = results.get(0);
    long[] sorted = r0.nanos.clone();
    Arrays.sort(sorted);
    double mean = Arrays.stream(sorted).average().orElse(0) / 1e6;
    System.out.printf(Locale.ROOT, "# load before: %s; after: %s%n", loadBefore, loadAfter);
    System.out.printf(Locale.ROOT, "step (TP=2, B=%d, T=%d, L=%d, C=%d): median %.2f ms, mean %.2f ms, min %.2f ms"
        + " over %d steps after %d warm-up; last loss %.4f%n", MICRO_BATCH, CONFIG.seqLength(), CONFIG.numLayers(),
        CONFIG.hiddenSize(), sorted[steps / 2] / 1e6, mean, sorted[0] / 1e6, steps, warmup, r0.loss);
    double total = 0;
    for (long[] v : r0.times.values()) total += Arrays.stream(v).sum();
    System.out.println("rank 0, per step, by Ops call: median and mean over the steps, share of the sum of means");
    for (Map.Entry<String, long[]> e : r0.times.entrySet()) {
      long[] perStep = e.getValue().clone();
      Arrays.sort(perStep);
      double opMean = Arrays.stream(perStep).average().orElse(0);
      System.out.printf(Locale.ROOT, "  %-22s %8.3f ms %8.3f ms  %5.1f %%%n", e.getKey(), perStep[steps / 2] / 1e6,
          opMean / 1e6, 100 * opMean * steps / total);
    }
  }

  record Result(long[] nanos, Map<String, long[]> times, float loss) {}

  /** Sums the wall time of each {@link Ops} method called on the proxy, by method name and measured step. */
  static final class Timed {
    final Map<String, long[]> times = new TreeMap<>();
    private final int steps;
    int step = -1;

    Timed(int steps) {
      this.steps = steps;
    }

    /** {@code target} as a {@code type} whose every method's host time adds up by name. */
    @SuppressWarnings("unchecked")
    <T> T of(Class<? super T> type, T target) {
      return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type},
          (proxy, method, args) -> {
            if (method.isDefault()) return java.lang.reflect.InvocationHandler.invokeDefault(proxy, method, args);
            long t0 = System.nanoTime();
            try {
              return method.invoke(target, args);
            } catch (InvocationTargetException e) {
              throw e.getCause();
            } finally {
              if (step >= 0) {
                times.computeIfAbsent(method.getName(), k -> new long[steps])[step] += System.nanoTime() - t0;
              }
            }
          });
    }
  }

  static String loadAverage() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).trim();
    } catch (java.io.IOException e) {
      return "unknown";
    }
  }

  /** The value of {@code key=N} among {@code args} (steps= and warmup= only), or {@code dflt}; at least {@code min}. */
  private static int count(String[] args, String key, int dflt, int min) {
    int v = dflt;
    for (String arg : args) {
      if (!arg.matches("(steps|warmup)=[0-9]{1,9}")) {
        throw new IllegalArgumentException("unknown argument '" + arg + "' (steps=N >= 1, warmup=N >= 0)");
      }
      if (arg.startsWith(key + "=")) v = Integer.parseInt(arg.substring(key.length() + 1));
    }
    if (v < min) throw new IllegalArgumentException(key + " must be at least " + min + ", got " + v);
    return v;
  }
}
