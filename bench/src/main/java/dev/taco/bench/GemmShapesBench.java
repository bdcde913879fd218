package dev.taco.bench;

import dev.taco.bench.TrainingGemms.Shape;
import dev.taco.kernels.Gemm;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

/**
 * The training step's GEMMs ({@link TrainingGemms}: every product of one rank's step at the default and the 4x wider
 * model, plus the square n = 1024) through the same {@link Gemm} entry point and accumulate flag the training uses.
 *
 * <p>Modes, one JMH run each: {@code pair} is two JMH threads, each with its own operands, multiplying the same shape at
 * the same time, as the two tensor-parallel ranks of a training run do on a 2-core machine (its GFLOP/s count both
 * products); {@code solo} is one caller, which {@link Gemm} may help with its helper threads; {@code core} is one
 * caller with {@code -Dtaco.gemm.threads=1} (no helpers), the single-core kernel.
 * Each thread has its own A, B and C ({@link Scope#Thread}). Run through {@code bench/run-gemm-shapes.sh}, which
 * measures OpenBLAS on the same shapes and modes in the same run, shape by shape, and merges the two.
 *
 * <p>One more mode, without JMH, for a machine shared with other work: {@code cpu} times the {@code core} case by the
 * calling thread's CPU time ({@link ThreadMXBean#getCurrentThreadCpuTime}) instead of the wall clock, so that the
 * time other processes hold the core does not count (their cache traffic still does). It runs in {@link #main}'s
 * JVM, which must be started with {@code -Dtaco.gemm.threads=1}.
 *
 * <p>With {@code openblas=LIB}, modes {@code pair}, {@code solo} and {@code core} alternate instead (no JMH): in this
 * JVM, on the same threads, slices of Gemm's products and of OpenBLAS's ({@link OpenBlas}: one thread per caller in
 * {@code pair} and {@code core}; in {@code solo} as many as there are cores, as Gemm has its helpers) take turns, and
 * the ratio is the median over rounds of each round's Gemm GFLOP/s over its OpenBLAS GFLOP/s. On the shared 2-core
 * machines the speed of a core changes within a second (the same product, alone in its JVM, read 50 and then 81 GFLOP/s
 * a second later, and OpenBLAS 72 to 109), so that Gemm and OpenBLAS measured one after the other, seconds apart, gave
 * ratios that moved by 0.3 between runs; side by side in slices of 20 ms, both see the same machine.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
public class GemmShapesBench {
  /** A {@link Shape#key()}; main passes the list. */
  @Param({"default:1024x128x192:AB:set"})
  public String shape;

  private Shape s;
  private float[] a, b, c;

  /** Operands of the shape from a fixed seed, and the GEMM's code compiled before the first timed call. */
  @Setup(Level.Trial)
  public void setup() {
    s = Shape.parse(shape);
    Random r = new Random(2604);
    a = random(r, s.m() * s.k());
    b = random(r, s.k() * s.n());
    c = random(r, s.m() * s.n());
    // C2 must have compiled the micro-kernel and this shape's packing before the first (1 s or shorter) warmup
    // iteration ends: 300 small products once left it to the timed iterations on a loaded machine (the square n = 1024
    // read 212-311 GFLOP/s over six runs, 286-311 with 5 s of warmup); 2 s of this shape's own product
    float[] x = random(r, 96 * 96);
    for (int i = 0; i < 300; i++) Gemm.matmul(x, 0, x, 0, new float[96 * 96], 0, 96, 96, 96, false);
    for (long end = System.nanoTime() + 2_000_000_000L; System.nanoTime() < end;) gemm();
  }

  private static float[] random(Random r, int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) x[i] = r.nextFloat() - 0.5f;
    return x;
  }

  /** One product, as the training calls it. */
  @Benchmark
  public float[] gemm() {
    switch (s.op()) {
      case AB -> Gemm.matmul(a, 0, b, 0, c, 0, s.m(), s.n(), s.k(), s.accumulate());
      case ABT -> Gemm.matmulTransB(a, 0, b, 0, c, 0, s.m(), s.n(), s.k(), s.accumulate());
      case ATB -> Gemm.matmulTransA(a, 0, b, 0, c, 0, s.m(), s.n(), s.k(), s.accumulate());
    }
    return c;
  }

  /**
   * {@code shapes}: prints the shape list ({@link Shape#tsv()} lines). Otherwise runs the benchmark and prints one JSON
   * object per shape and mode: {@code {"key", "mode", "threads", "us_best", "us_mean", "gflops"}}, GFLOP/s from the
   * best iteration (the least disturbed one on a shared machine) and counting every thread's products. Arguments:
   * {@code models=default,wide,square}, {@code modes=pair,solo} (or {@code core}, or {@code cpu} alone in a JVM
   * started with {@code -Dtaco.gemm.threads=1}), {@code warmup=3}, {@code measure=5}, {@code time=300} (ms per
   * iteration), {@code key=KEY} (one shape, repeatable), {@code openblas=LIB} (modes {@code pair}, {@code solo} and
   * {@code core} alternated with OpenBLAS, see the class notes: then {@code warmup} and {@code measure} count rounds
   * and {@code time} is a slice's milliseconds).
   *
   * @throws IllegalArgumentException for an unknown argument or mode, or mode {@code cpu} without
   *     {@code -Dtaco.gemm.threads=1}
   */
  public static void main(String[] args) throws Exception {
    List<String> models = List.of("default", "wide", "square"), modes = List.of("pair", "solo");
    List<String> keys = new ArrayList<>();
    int warmup = 3, measure = 5, timeMs = 300;
    String openblas = null;
    if (args.length == 1 && args[0].equals("shapes")) {
      for (Shape sh : TrainingGemms.all()) System.out.println(sh.tsv());
      return;
    }
    for (String arg : args) {
      String v = arg.substring(arg.indexOf('=') + 1);
      if (arg.startsWith("models=")) models = Arrays.asList(v.split(","));
      else if (arg.startsWith("modes=")) modes = Arrays.asList(v.split(","));
      else if (arg.startsWith("warmup=")) warmup = Integer.parseInt(v);
      else if (arg.startsWith("measure=")) measure = Integer.parseInt(v);
      else if (arg.startsWith("time=")) timeMs = Integer.parseInt(v);
      else if (arg.startsWith("key=")) keys.add(v);
      else if (arg.startsWith("openblas=")) openblas = v;
      else throw new IllegalArgumentException("unknown argument " + arg);
    }
    if (keys.isEmpty()) {
      for (Shape sh : TrainingGemms.all()) if (models.contains(sh.model())) keys.add(sh.key());
    }
    OpenBlas lib = openblas == null ? null : new OpenBlas(Path.of(openblas));
    for (String mode : modes) {
      if (lib != null) {
        for (String key : keys) System.out.println(alternate(lib, key, mode, warmup, measure, timeMs));
        continue;
      }
      if (mode.equals("cpu")) {
        for (String key : keys) System.out.println(cpuTime(key, warmup, measure, timeMs));
        continue;
      }
      int threads = switch (mode) {
        case "solo", "core" -> 1;
        case "pair" -> 2;
        default -> throw new IllegalArgumentException("unknown mode " + mode + " (pair, solo, core)");
      };
      Collection<RunResult> results = new Runner(new OptionsBuilder()
          .include(GemmShapesBench.class.getName() + "\\.gemm$")
          .forks(1)
          .jvmArgsAppend(mode.equals("core")
              ? new String[] {"--add-modules", "jdk.incubator.vector", "-Dtaco.gemm.threads=1"}
              : new String[] {"--add-modules", "jdk.incubator.vector"})
          .threads(threads)
          .warmupIterations(warmup).warmupTime(TimeValue.milliseconds(timeMs))
          .measurementIterations(measure).measurementTime(TimeValue.milliseconds(timeMs))
          .param("shape", keys.toArray(String[]::new))
          .build()).run();
      for (RunResult rr : results) System.out.println(json(rr, mode, threads));
    }
  }

  private static String json(RunResult rr, String mode, int threads) {
    String key = rr.getParams().getParam("shape");
    double best = Double.POSITIVE_INFINITY;
    for (BenchmarkResult br : rr.getBenchmarkResults()) {
      for (IterationResult ir : br.getIterationResults()) best = Math.min(best, ir.getPrimaryResult().getScore());
    }
    return json(key, mode, threads, best, rr.getPrimaryResult().getScore());
  }

  /**
   * Mode {@code cpu}: {@code warmup} then {@code measure} rounds of about {@code timeMs} of this thread's CPU time
   * each, the best round's CPU microseconds per product.
   */
  private static String cpuTime(String key, int warmup, int measure, int timeMs) {
    if (Integer.getInteger("taco.gemm.threads", 0) != 1) {
      throw new IllegalArgumentException("mode cpu times one core: start the JVM with -Dtaco.gemm.threads=1");
    }
    GemmShapesBench bench = new GemmShapesBench();
    bench.shape = key;
    bench.setup();
    ThreadMXBean mx = ManagementFactory.getThreadMXBean();
    long start = mx.getCurrentThreadCpuTime();
    int calls = 0;
    while (mx.getCurrentThreadCpuTime() - start < timeMs * 1_000_000L) {
      bench.gemm();
      calls++;
    }
    double best = Double.POSITIVE_INFINITY, sum = 0;
    for (int round = 0; round < warmup + measure; round++) {
      long t = mx.getCurrentThreadCpuTime();
      for (int i = 0; i < calls; i++) bench.gemm();
      double us = (mx.getCurrentThreadCpuTime() - t) / 1e3 / calls;
      if (round >= warmup) {
        best = Math.min(best, us);
        sum += us;
      }
    }
    return json(key, "cpu", 1, best, sum / measure);
  }

  /**
   * Modes {@code pair}, {@code solo} and {@code core} with {@code openblas=LIB}: {@code warmup} then {@code measure}
   * rounds, each a slice of about {@code sliceMs} of Gemm's products then one of OpenBLAS's (one thread per caller;
   * in {@code solo} one caller, Gemm with its helpers and OpenBLAS with a thread per core), every caller (two in
   * {@code pair}) on its own operands and starting together, after {@link #checkAgainst} has compared the two
   * products. Prints Gemm's median GFLOP/s over the rounds, OpenBLAS's, and the median, first and third quartile of
   * the per-round ratio ({@code us_best} and {@code openblas_us}: the median round's microseconds per product).
   */
  static String alternate(OpenBlas lib, String key, String mode, int warmup, int measure, int sliceMs)
      throws Exception {
    int callers = switch (mode) {
      case "pair" -> 2;
      case "solo", "core" -> 1;
      default -> throw new IllegalArgumentException("mode " + mode + " does not alternate (pair, solo, core)");
    };
    if (mode.equals("core") && Integer.getInteger("taco.gemm.threads", 0) != 1) {
      throw new IllegalArgumentException("mode core times one core: start the JVM with -Dtaco.gemm.threads=1");
    }
    lib.threads(mode.equals("solo") ? Runtime.getRuntime().availableProcessors() : 1);
    Shape sh = Shape.parse(key);
    GemmShapesBench[] benches = new GemmShapesBench[callers];
    for (int t = 0; t < callers; t++) {
      benches[t] = new GemmShapesBench();
      benches[t].shape = key;
      benches[t].setup();
    }
    benches[0].checkAgainst(lib);
    int rounds = warmup + measure;
    double[][] gflops = new double[2][rounds]; // [Gemm, OpenBLAS][round], summed over callers
    CyclicBarrier start = new CyclicBarrier(callers);
    Thread[] threads = new Thread[callers];
    Throwable[] failure = new Throwable[1];
    for (int t = 0; t < callers; t++) {
      GemmShapesBench bench = benches[t];
      threads[t] = new Thread(() -> {
        try {
          for (int round = 0; round < rounds; round++) {
            for (int side = 0; side < 2; side++) {
              start.await();
              long t0 = System.nanoTime(), elapsed;
              int calls = 0;
              do {
                if (side == 0) bench.gemm();
                else bench.openblas(lib);
                calls++;
              } while ((elapsed = System.nanoTime() - t0) < sliceMs * 1_000_000L);
              synchronized (gflops) {
                gflops[side][round] += calls * sh.flops() / (double) elapsed;
              }
            }
          }
        } catch (Throwable e) {
          synchronized (gflops) {
            if (failure[0] == null) failure[0] = e; // the other caller's is the broken barrier this one leaves
          }
          start.reset();
        }
      }, "alternate-" + t);
      threads[t].start();
    }
    for (Thread t : threads) t.join();
    if (failure[0] != null) throw new IllegalStateException("alternating " + key + " failed", failure[0]);
    double[] ratio = new double[measure], java = new double[measure], blas = new double[measure];
    for (int i = 0; i < measure; i++) {
      java[i] = gflops[0][warmup + i];
      blas[i] = gflops[1][warmup + i];
      ratio[i] = java[i] / blas[i];
    }
    Arrays.sort(ratio);
    Arrays.sort(java);
    Arrays.sort(blas);
    double usJava = callers * sh.flops() / (java[measure / 2] * 1e3),
        usBlas = callers * sh.flops() / (blas[measure / 2] * 1e3);
    return String.format(Locale.ROOT,
        "{\"key\": \"%s\", \"mode\": \"%s\", \"threads\": %d, \"us_best\": %.2f, \"gflops\": %.2f, "
            + "\"openblas_us\": %.2f, \"openblas_gflops\": %.2f, \"ratio\": %.3f, \"ratio_q1\": %.3f, "
            + "\"ratio_q3\": %.3f, \"rounds\": %d, \"slice_ms\": %d, \"load\": \"%s\"}",
        key, mode, callers, usJava, java[measure / 2], usBlas, blas[measure / 2], ratio[measure / 2],
        ratio[measure / 4], ratio[3 * measure / 4], measure, sliceMs, load());
  }

  /** The 1-minute load average ({@code /proc/loadavg}), or "?" where there is none. */
  private static String load() {
    try {
      return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
    } catch (IOException e) {
      return "?";
    }
  }

  /** One product through OpenBLAS, on this state's operands (as {@link #gemm}). */
  void openblas(OpenBlas lib) {
    lib.sgemm(s.op() == TrainingGemms.Op.ATB, s.op() == TrainingGemms.Op.ABT, s.m(), s.n(), s.k(), a, b, c,
        s.accumulate());
  }

  /**
   * Checks that OpenBLAS, as {@link #openblas} calls it, computes the product {@link #gemm} does: both overwrite a C
   * of their own from this state's A and B, and every element must agree within 1e-4 of C's largest magnitude (the
   * same sums in another order).
   *
   * @throws IllegalStateException if they differ, or either holds NaN: the ratio would compare different work
   */
  void checkAgainst(OpenBlas lib) {
    boolean transA = s.op() == TrainingGemms.Op.ATB, transB = s.op() == TrainingGemms.Op.ABT;
    float[] ours = new float[c.length], theirs = new float[c.length];
    Gemm.gemm(transA, transB, s.m(), s.n(), s.k(), a, 0, transA ? s.m() : s.k(), b, 0, transB ? s.k() : s.n(), ours,
        0, s.n(), false);
    lib.sgemm(transA, transB, s.m(), s.n(), s.k(), a, b, theirs, false);
    double diff = 0, max = 0;
    for (int i = 0; i < ours.length; i++) {
      diff = Math.max(diff, Math.abs((double) ours[i] - theirs[i]));
      max = Math.max(max, Math.abs(theirs[i]));
    }
    if (!(diff <= 1e-4 * max)) { // also false for NaN
      throw new IllegalStateException(String.format(Locale.ROOT,
          "%s: OpenBLAS and Gemm differ by %.3g (largest |C| %.3g): not the same product", shape, diff, max));
    }
  }

  private static String json(String key, String mode, int threads, double usBest, double usMean) {
    double gflops = threads * Shape.parse(key).flops() / (usBest * 1e-6) / 1e9;
    return String.format(Locale.ROOT,
        "{\"key\": \"%s\", \"mode\": \"%s\", \"threads\": %d, \"us_best\": %.2f, \"us_mean\": %.2f, \"gflops\": %.2f}",
        key, mode, threads, usBest, usMean, gflops);
  }
}
