package dev.taco.bench;

import dev.taco.kernels.Gemm;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Random;
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
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.infra.Blackhole;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

/**
 * Square SGEMM C = A·B (n×n, row-major float[]): {@link Gemm#matmul} (Vector API, threaded) against the
 * textbook triple loop {@link Gemm#matmulNaive}. JMH reports ms/op; GFLOP/s = 2n³ / time, printed by
 * {@link #main}. Run through {@code bench/run-gemm.sh}.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 2)
public class GemmBench {
  /** OpenBLAS SGEMM (numpy) on these 2-core machines, n = 1024–2048 (docs/design.md §7). */
  static final double OPENBLAS_ANCHOR_GFLOPS = 185.0;

  @Param({"512", "1024"})
  public int n;

  /** The naive benchmark does nothing (returns at once) for n above this; lower it to skip slow runs. */
  @Param({"1024"})
  public int naiveMaxN;

  float[] a, b, c;

  @Setup(Level.Trial)
  public void setup() {
    Random r = new Random(1234);
    a = new float[n * n];
    b = new float[n * n];
    c = new float[n * n];
    for (int i = 0; i < n * n; i++) {
      a[i] = r.nextFloat() - 0.5f;
      b[i] = r.nextFloat() - 0.5f;
    }
    // The Vector API is very slow until C2 has compiled the micro-kernel (the first 512 call can take
    // seconds on a loaded 2-core box, longer than the 1 s warmup iterations): get it compiled untimed.
    float[] s = new float[64 * 64];
    for (int i = 0; i < 200; i++) Gemm.matmul(s, 0, s, 0, s.clone(), 0, 64, 64, 64, false);
  }

  @Benchmark
  public void vector(Blackhole bh) {
    Gemm.matmul(a, 0, b, 0, c, 0, n, n, n, false);
    bh.consume(c);
  }

  @Benchmark
  public void naive(Blackhole bh) {
    if (n > naiveMaxN) return;
    Gemm.matmulNaive(a, 0, b, 0, c, 0, n, n, n, false);
    bh.consume(c);
  }

  /**
   * Runs the benchmark (fork 1, warmup 2×1 s, measurement 3×2 s) and prints a markdown table with GFLOP/s,
   * vector/naive and the ratio to the OpenBLAS anchor. Arguments: {@code n=512,1024} to pick sizes,
   * {@code naiveMaxN=512} to skip the slow naive run at 1024, {@code anchor=GFLOPS} to replace the
   * 185 GFLOP/s anchor (e.g. by a numpy figure measured in the same run).
   */
  public static void main(String[] args) throws Exception {
    String sizes = "512,1024";
    String naiveMax = "1024";
    double anchor = OPENBLAS_ANCHOR_GFLOPS;
    for (String arg : args) {
      if (arg.startsWith("n=")) sizes = arg.substring(2);
      else if (arg.startsWith("naiveMaxN=")) naiveMax = arg.substring(10);
      else if (arg.startsWith("anchor=")) anchor = Double.parseDouble(arg.substring(7));
      else throw new IllegalArgumentException("unknown argument " + arg);
    }
    ChainedOptionsBuilder opt = new OptionsBuilder()
        .include(GemmBench.class.getName() + "\\.")
        .forks(1)
        .jvmArgsAppend("--add-modules", "jdk.incubator.vector")
        .warmupIterations(2).warmupTime(TimeValue.seconds(1))
        .measurementIterations(3).measurementTime(TimeValue.seconds(2))
        .param("n", sizes.split(","))
        .param("naiveMaxN", naiveMax);
    Collection<RunResult> results = new Runner(opt.build()).run();

    List<Integer> ns = new ArrayList<>();
    for (String s : sizes.split(",")) ns.add(Integer.parseInt(s.trim()));
    StringBuilder t = new StringBuilder();
    t.append("| n | method | ms/op (± 99.9% CI) | GFLOP/s | vector/naive | vs OpenBLAS ").append(fmt(anchor))
        .append(" GFLOP/s |\n");
    t.append("|---|---|---|---|---|---|\n");
    int naiveLimit = Integer.parseInt(naiveMax);
    for (int size : ns) {
      RunResult vec = find(results, "vector", size), nai = size > naiveLimit ? null : find(results, "naive", size);
      double gv = gflops(size, vec), gn = gflops(size, nai);
      t.append(row(size, "vector (Gemm.matmul)", vec, gv,
          Double.isNaN(gn) ? "—" : String.format(Locale.ROOT, "%.1fx", gv / gn), gv / anchor));
      t.append(row(size, "naive (triple loop)", nai, gn, "1.0x", gn / anchor));
    }
    System.out.println();
    System.out.print(t);
  }

  private static RunResult find(Collection<RunResult> rs, String method, int n) {
    for (RunResult r : rs) {
      String label = r.getParams().getBenchmark();
      if (label.endsWith("." + method) && Integer.parseInt(r.getParams().getParam("n")) == n) return r;
    }
    return null;
  }

  private static double gflops(int n, RunResult r) {
    if (r == null) return Double.NaN;
    double ms = r.getPrimaryResult().getScore();
    return 2.0 * n * n * n / (ms * 1e-3) / 1e9;
  }

  private static String row(int n, String name, RunResult r, double gf, String ratio, double vsAnchor) {
    if (r == null) return "| " + n + " | " + name + " | skipped | — | — | — |\n";
    double ms = r.getPrimaryResult().getScore(), err = r.getPrimaryResult().getScoreError();
    return String.format(Locale.ROOT, "| %d | %s | %.2f ± %.2f | %.2f | %s | %.3f |%n", n, name, ms, err, gf, ratio,
        vsAnchor);
  }

  private static String fmt(double x) {
    return String.format(Locale.ROOT, "%.0f", x);
  }
}
