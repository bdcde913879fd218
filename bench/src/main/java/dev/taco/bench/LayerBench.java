package dev.taco.bench;

import dev.taco.runtime.layers.Attention;
import dev.taco.runtime.layers.AttentionLanes;
import dev.taco.runtime.layers.CrossEntropy;
import dev.taco.runtime.layers.CrossEntropyLanes;
import dev.taco.runtime.layers.Encoder;
import dev.taco.runtime.layers.EncoderLanes;
import dev.taco.runtime.layers.Gelu;
import dev.taco.runtime.layers.GeluLanes;
import dev.taco.runtime.layers.GradNorm;
import dev.taco.runtime.layers.GradNormLanes;
import dev.taco.runtime.layers.LayerNorm;
import dev.taco.runtime.layers.LayerNormLanes;
import dev.taco.runtime.layers.Matmul;
import dev.taco.runtime.layers.MatmulLanes;
import dev.taco.runtime.layers.Residual;
import dev.taco.runtime.layers.ResidualLanes;
import dev.taco.runtime.model.ParameterTensors;
import dev.taco.runtime.layers.AdamW;
import dev.taco.runtime.layers.AdamWLanes;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Each CPU layer at the shapes one rank of the default {@code ./taco train} model runs (B = 8, T = 128, C = 128, 2 of
 * the 4 heads of size 32, MLP 256 of 512 channels, V = 256, this rank's parameters), one thread: the scalar kernels
 * (the host wrappers of {@code dev.taco.runtime.layers}) against the lane-wise paths ({@code ...Lanes}) that
 * {@code CpuOps} runs, alternating in rounds so that both see the same load. Prints the median µs per call of each and
 * their ratio, and the load average before and after. Through {@code bench/run-step.sh}, or {@code java --add-modules
 * jdk.incubator.vector -cp ... dev.taco.bench.LayerBench [rounds=15] [name part]}.
 */
public final class LayerBench {
  private LayerBench() {}

  static final int B = 8, T = 128, C = 128, NH = 2, HS = 32, FF = 256, V = 256;

  record Pair(String name, Runnable scalar, Runnable lanes) {}

  /**
   * Runs the benchmark.
   *
   * @param args rounds (each times every layer both ways for about 20 ms), then optionally a part of the names of the
   *     layers to time (e.g. {@code attention})
   */
  public static void main(String[] args) {
    int rounds = args.length > 0 ? Integer.parseInt(args[0]) : 15;
    String only = args.length > 1 ? args[1] : "";
    String loadBefore = TrainStepProfile.loadAverage();
    List<Pair> pairs = pairs(new SplittableRandom(7));
    System.out.printf(Locale.ROOT, "%-22s %12s %12s %8s%n", "layer (one rank)", "scalar us*", "lanes us*", "speed-up");
    for (Pair p : pairs) {
      if (!p.name.contains(only)) continue;
      for (long end = System.nanoTime() + 2_500_000_000L; System.nanoTime() < end;) { // warm-up: C2 on both
        p.scalar.run();
        p.lanes.run();
      }
      int reps = Math.max(1, (int) (10e6 / timeOnce(p.scalar)));
      double[] s = new double[rounds], l = new double[rounds];
      for (int r = 0; r < rounds; r++) {
        s[r] = time(p.scalar, reps);
        l[r] = time(p.lanes, reps);
      }
      double ms = median(s), ml = median(l);
      System.out.printf(Locale.ROOT, "%-22s %12.1f %12.1f %7.2fx%n", p.name, ms / 1e3, ml / 1e3, ms / ml);
    }
    System.out.printf(Locale.ROOT, "# *: thread CPU time per call, median of %d rounds; load before: %s; after: %s%n",
        rounds, loadBefore, TrainStepProfile.loadAverage());
  }

  static List<Pair> pairs(SplittableRandom rnd) {
    List<Pair> out = new ArrayList<>();
    int D = NH * HS, bt = B * T;
    float[] qkv = gauss(rnd, bt * 3 * D), y = new float[bt * D], att = new float[B * NH * T * T];
    float[] dy = gauss(rnd, bt * D), dqkv = new float[bt * 3 * D], scratch = new float[B * NH * T * T];
    AttentionLanes lanes = new AttentionLanes();
    Attention.forward(y, 0, att, 0, qkv, 0, B, T, NH, HS);
    out.add(new Pair("attention forward", () -> Attention.forward(y, 0, att, 0, qkv, 0, B, T, NH, HS),
        () -> lanes.forward(y, 0, att, 0, qkv, 0, B, T, NH, HS)));
    out.add(new Pair("attention backward",
        () -> Attention.backward(dqkv, 0, scratch, 0, dy, 0, qkv, 0, att, 0, B, T, NH, HS),
        () -> lanes.backward(dqkv, 0, scratch, 0, dy, 0, qkv, 0, att, 0, B, T, NH, HS)));

    int n = bt * FF;
    float[] pre = gauss(rnd, n), act = new float[n], dact = gauss(rnd, n), dpre = new float[n];
    out.add(new Pair("gelu forward", () -> Gelu.forward(act, 0, pre, 0, n),
        () -> GeluLanes.forward(act, 0, pre, 0, n)));
    out.add(new Pair("gelu backward", () -> Gelu.backward(dpre, 0, dact, 0, pre, 0, n),
        () -> GeluLanes.backward(dpre, 0, dact, 0, pre, 0, n)));

    float[] x = gauss(rnd, bt * C), w = gauss(rnd, C), b = gauss(rnd, C), ln = new float[bt * C];
    float[] mean = new float[bt], rstd = new float[bt], dln = gauss(rnd, bt * C), dx = new float[bt * C];
    float[] dw = new float[C], db = new float[C];
    out.add(new Pair("layernorm forward", () -> LayerNorm.forward(ln, 0, mean, 0, rstd, 0, x, 0, w, 0, b, 0, B, T, C),
        () -> LayerNormLanes.forward(ln, 0, mean, 0, rstd, 0, x, 0, w, 0, b, 0, B, T, C)));
    out.add(new Pair("layernorm backward",
        () -> LayerNorm.backward(dx, 0, dw, 0, db, 0, dln, 0, x, 0, w, 0, mean, 0, rstd, 0, B, T, C),
        () -> LayerNormLanes.backward(dx, 0, dw, 0, db, 0, dln, 0, x, 0, w, 0, mean, 0, rstd, 0, B, T, C)));

    float[] r = new float[bt * C];
    out.add(new Pair("residual + bias", () -> Residual.forwardBias(r, 0, x, 0, ln, 0, b, 0, bt, C),
        () -> ResidualLanes.forwardBias(r, 0, x, 0, ln, 0, b, 0, bt, C)));

    float[] logits = gauss(rnd, bt * V), probs = new float[bt * V], losses = new float[bt], dlogits = new float[bt * V];
    int[] targets = new int[bt];
    for (int i = 0; i < bt; i++) targets[i] = rnd.nextInt(V);
    out.add(new Pair("cross-entropy forward",
        () -> CrossEntropy.forward(losses, 0, probs, 0, logits, 0, targets, 0, B, T, V),
        () -> CrossEntropyLanes.forward(losses, 0, probs, 0, logits, 0, targets, 0, B, T, V)));
    out.add(new Pair("cross-entropy backward",
        () -> CrossEntropy.backward(dlogits, 0, probs, 0, targets, 0, B, T, V, 1f),
        () -> CrossEntropyLanes.backward(dlogits, 0, probs, 0, targets, 0, B, T, V, 1f)));

    int[] ids = new int[bt];
    for (int i = 0; i < bt; i++) ids[i] = rnd.nextInt(V);
    float[] wte = gauss(rnd, V * C), wpe = gauss(rnd, T * C), dwte = new float[V * C], dwpe = new float[T * C];
    out.add(new Pair("encoder forward", () -> Encoder.forward(x, 0, ids, 0, wte, 0, wpe, 0, B, T, C, V),
        () -> EncoderLanes.forward(x, 0, ids, 0, wte, 0, wpe, 0, B, T, C, V)));
    out.add(new Pair("encoder backward", () -> Encoder.backward(dwte, 0, dwpe, 0, dln, 0, ids, 0, B, T, C, V),
        () -> EncoderLanes.backward(dwte, 0, dwpe, 0, dln, 0, ids, 0, B, T, C, V)));

    float[] fc = gauss(rnd, bt * FF), fcBias = gauss(rnd, FF), dfcBias = new float[FF];
    out.add(new Pair("bias add (" + bt + "x" + FF + ")", () -> Matmul.addBias(fc, 0, fcBias, 0, bt, FF),
        () -> MatmulLanes.addBias(fc, 0, fcBias, 0, bt, FF)));
    out.add(new Pair("bias gradient", () -> Matmul.matmulBackwardBias(dfcBias, 0, fc, 0, bt, FF),
        () -> MatmulLanes.backwardBias(dfcBias, 0, fc, 0, bt, FF)));

    int np = new ParameterTensors(TrainStepProfile.CONFIG, 0).size();
    float[] params = gauss(rnd, np), grads = gauss(rnd, np), m = new float[np], v = new float[np];
    byte[] decay = new byte[np];
    for (int i = 0; i < np; i += 2) decay[i] = 1;
    boolean[] replicated = new ParameterTensors(TrainStepProfile.CONFIG, 0).replicatedMask();
    GradNormLanes norm = new GradNormLanes();
    out.add(new Pair("gradient norm", () -> GradNorm.squaredNorm(grads, 0, replicated, 0, true, np),
        () -> norm.squaredNorm(grads, 0, replicated, 0, true, np)));
    out.add(new Pair("adamw (" + np + ")",
        () -> AdamW.update(params, grads, m, v, decay, np, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, 10),
        () -> AdamWLanes.update(params, grads, m, v, decay, np, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, 10)));
    return out;
  }

  static float[] gauss(SplittableRandom rnd, int n) {
    float[] a = new float[n];
    for (int i = 0; i < n; i++) {
      double u = rnd.nextDouble(1e-12, 1), w = rnd.nextDouble();
      a[i] = (float) (Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * w)); // Box-Muller
    }
    return a;
  }

  static double timeOnce(Runnable r) {
    return Math.max(1, time(r, 1));
  }

  private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

  /**
   * Mean ns per call over {@code reps} calls, in this thread's CPU time (not wall time: on a shared, loaded machine the
   * time the thread waits for a core would otherwise count).
   */
  static double time(Runnable r, int reps) {
    long t0 = THREADS.getCurrentThreadCpuTime();
    for (int i = 0; i < reps; i++) r.run();
    return (THREADS.getCurrentThreadCpuTime() - t0) / (double) reps;
  }

  static double median(double[] a) {
    double[] s = a.clone();
    Arrays.sort(s);
    return s[s.length / 2];
  }
}
