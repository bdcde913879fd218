package dev.taco.bench;

import dev.taco.kernels.Fp8;
import dev.taco.kernels.TacoKernels;
import dev.taco.kernels.cpu.ParallelKernels;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodType;
import java.util.Collection;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.OptionsBuilder;

/**
 * {@code @Parallel} kernels across cores (issue C part 4): the TACO encode kernel
 * ({@link TacoKernels#encodeGroups}, G = 64, Hadamard, E4M3) of one {@value #ROWS} x {@value #COLS} float32 tensor,
 * called directly (its {@code @Parallel} loop runs sequentially, one core) and through
 * {@link ParallelKernels#kernel} (the same loop split over every core), in the same run; the ratio is the speed-up.
 * Run through {@code bench/run-parallel.sh}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@State(Scope.Benchmark)
public class ParallelKernelBench {
  static final int ROWS = 1024;
  static final int COLS = 1024;
  static final int G = 64;

  float[] x;
  float[] work;
  int[] sat;
  byte[] out;
  MethodHandle parallel;

  /** Activation-like input, the row scales encoded once, and the multi-core kernel compiled. */
  @Setup(Level.Trial)
  public void setup() {
    SplittableRandom r = new SplittableRandom(2604_24088L);
    x = new float[ROWS * COLS];
    for (int i = 0; i < x.length; i++) {
      x[i] = (float) (r.nextGaussian() * (i % 97 == 3 ? 50 : 1));
    }
    work = new float[ROWS * COLS];
    sat = new int[ROWS * COLS / G];
    out = new byte[4 * ROWS + ROWS * COLS / G + ROWS * COLS];
    TacoKernels.rowScales(x, 0, ROWS, COLS, G, Fp8.E4M3, true, out, 0);
    parallel = ParallelKernels.kernel(TacoKernels.class, "encodeGroups", MethodType.methodType(void.class,
        float[].class, int.class, int.class, int.class, int.class, int.class, float.class, boolean.class,
        boolean.class, float[].class, int[].class, byte[].class, int.class, int.class, int.class));
  }

  /** The kernel called directly: one core. */
  @Benchmark
  public byte[] sequential() {
    TacoKernels.encodeGroups(x, 0, ROWS, COLS, G, Fp8.E4M3, 1f, true, true, work, sat, out, 0, 4 * ROWS,
        4 * ROWS + ROWS * COLS / G);
    return out;
  }

  /** The same kernel, its {@code @Parallel} loop over every core. */
  @Benchmark
  public byte[] allCores() throws Throwable {
    parallel.invokeExact(x, 0, ROWS, COLS, G, Fp8.E4M3, 1f, true, true, work, sat, out, 0, 4 * ROWS,
        4 * ROWS + ROWS * COLS / G);
    return out;
  }

  /** Runs both and prints the two times and their ratio. */
  public static void main(String[] args) throws Exception {
    Collection<RunResult> rs = new Runner(new OptionsBuilder().include(ParallelKernelBench.class.getName() + "\\.")
        .build()).run();
    double seq = 0;
    double par = 0;
    for (RunResult r : rs) {
      double us = r.getPrimaryResult().getScore();
      if (r.getParams().getBenchmark().endsWith(".sequential")) {
        seq = us;
      } else {
        par = us;
      }
    }
    System.out.printf(Locale.ROOT, "%nTacoKernels.encodeGroups, %d x %d float32, G=%d, Hadamard, E4M3; %d cores%n"
        + "sequential (direct call) %.0f us, @Parallel over all cores %.0f us: x%.2f%n", ROWS, COLS, G,
        Runtime.getRuntime().availableProcessors(), seq, par, seq / par);
  }
}
