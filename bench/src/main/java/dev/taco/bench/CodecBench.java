package dev.taco.bench;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Codecs;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
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
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

/**
 * CPU throughput of every codec (docs/design.md §3, §7): encode and decode of one {@value #ROWS} x
 * {@value #COLS} float32 activation tensor (Gaussian, with 1 % outlier channels scaled by 50), reported as GB/s of
 * <em>input</em> (float32 bytes, 4 MiB per call, 1 GB = 10^9 bytes) and as a ratio to a plain copy of the same
 * bytes ({@link System#arraycopy} of the float array) measured in the same run. Single-threaded: one codec call runs
 * in the calling thread (the SIMD kernels of {@link dev.taco.kernels.simd} unless {@code simd=false}). Run through
 * {@code bench/run-codec.sh}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Fork(value = 1, jvmArgsAppend = {"--add-modules", "jdk.incubator.vector"})
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
public class CodecBench {
  /** Tensor rows (tokens). */
  static final int ROWS = 1024;
  /** Tensor columns (hidden). */
  static final int COLS = 1024;
  /** Input bytes per call. */
  static final double BYTES = 4.0 * ROWS * COLS;

  /** The tensor and a same-size destination, shared by every benchmark (no codec parameter). */
  @State(Scope.Benchmark)
  public static class Data {
    float[] x;
    float[] y;

    /** Fills the activation-like tensor (fixed seed). */
    @Setup(Level.Trial)
    public void setup() {
      SplittableRandom r = new SplittableRandom(2604_24088L);
      x = new float[ROWS * COLS];
      y = new float[ROWS * COLS];
      for (int i = 0; i < x.length; i++) {
        x[i] = (float) r.nextGaussian();
      }
      for (int k = 0; k < COLS / 100; k++) {
        int c = r.nextInt(COLS);
        for (int row = 0; row < ROWS; row++) {
          x[row * COLS + c] *= 50;
        }
      }
    }
  }

  /** One codec (by spec) and its payload of {@link Data#x}. */
  @State(Scope.Benchmark)
  public static class CodecState {
    /** A spec accepted by {@link Codecs#byName}; the default list is {@link Codecs#names()}. */
    @Param({"fp32", "none", "fp8-tensor", "fp8-group", "int8-group", "int4-group", "hadamard-int8", "mxfp4", "nvfp4",
        "nccl-fp8", "nccl-fp8:e5m2", "taco", "taco:e5m2", "taco-no-ash", "taco-no-ds", "taco-no-hadamard"})
    public String codec;

    AbstractCodec c;
    byte[] payload;

    /** Builds the codec and encodes the tensor once (the decode input). */
    @Setup(Level.Trial)
    public void setup(Data d) {
      c = Codecs.byName(codec);
      payload = new byte[c.encodedSize(ROWS, COLS)];
      c.encode(d.x, 0, ROWS, COLS, payload, 0);
    }
  }

  /** Baseline: copy the 4 MiB float array. */
  @Benchmark
  public float[] copy(Data d) {
    System.arraycopy(d.x, 0, d.y, 0, d.x.length);
    return d.y;
  }

  /** Encode the tensor into the payload buffer. */
  @Benchmark
  public byte[] encode(Data d, CodecState s) {
    s.c.encode(d.x, 0, ROWS, COLS, s.payload, 0);
    return s.payload;
  }

  /**
   * The body checksum alone (CRC-32 over the payload body, what every decode computes before it may write): with the
   * copy, the least a decoder that validates before it writes can take, one read pass plus one write pass.
   */
  @Benchmark
  public long checksum(CodecState s) {
    java.util.zip.CRC32 crc = new java.util.zip.CRC32();
    crc.update(s.payload, dev.taco.codec.PayloadHeader.SIZE, s.payload.length - dev.taco.codec.PayloadHeader.SIZE);
    return crc.getValue();
  }

  /** Validate and decode the payload into the destination. */
  @Benchmark
  public float[] decode(Data d, CodecState s) {
    s.c.decode(s.payload, 0, s.payload.length, d.y, 0, false);
    return d.y;
  }

  /**
   * Runs the benchmark (fork 1, warmup and measurement as given) and prints a markdown table: codec, encode GB/s,
   * decode GB/s, each as a ratio to the copy. Arguments: {@code codecs=a;b} (default: {@link Codecs#names()}),
   * {@code warmup=N} and {@code measure=N} iterations of {@code time=MS} milliseconds (defaults 2, 3, 500), and
   * {@code simd=false} to measure the scalar reference kernels instead of the SIMD ones
   * ({@link dev.taco.kernels.simd.Simd}).
   *
   * @throws IllegalArgumentException for an unknown argument or codec, before anything runs
   */
  public static void main(String[] args) throws Exception {
    List<String> codecs = Codecs.names();
    int warm = 2;
    int meas = 3;
    int ms = 500;
    boolean simd = true;
    for (String arg : args) {
      if (arg.startsWith("codecs=")) {
        codecs = List.of(arg.substring(7).split(";"));
      } else if (arg.startsWith("warmup=")) {
        warm = Integer.parseInt(arg.substring(7));
      } else if (arg.startsWith("measure=")) {
        meas = Integer.parseInt(arg.substring(8));
      } else if (arg.startsWith("time=")) {
        ms = Integer.parseInt(arg.substring(5));
      } else if (arg.startsWith("simd=")) {
        simd = Boolean.parseBoolean(arg.substring(5));
      } else {
        throw new IllegalArgumentException("unknown argument " + arg
            + " (codecs=a;b warmup=N measure=N time=MS simd=true|false)");
      }
    }
    codecs.forEach(Codecs::byName); // an unknown codec is named here, before JMH's forks each fail on it
    Collection<RunResult> results = new Runner(new OptionsBuilder()
        .include(CodecBench.class.getName() + "\\.")
        .forks(1)
        .jvmArgsAppend("--add-modules", "jdk.incubator.vector", "-Dtaco.simd=" + simd)
        .warmupIterations(warm).warmupTime(TimeValue.milliseconds(ms))
        .measurementIterations(meas).measurementTime(TimeValue.milliseconds(ms))
        .param("codec", codecs.toArray(String[]::new))
        .build()).run();
    RunResult copy = null;
    for (RunResult r : results) {
      if (r.getParams().getBenchmark().endsWith(".copy")) {
        copy = r;
      }
    }
    double copyGbs = gbs(copy);
    StringBuilder t = new StringBuilder(String.format(Locale.ROOT,
        "%n%d x %d float32 (%.1f MiB) per call, %s kernels; copy (System.arraycopy) %.2f GB/s (%.1f ± %.1f us)%n%n",
        ROWS, COLS, BYTES / (1 << 20), simd ? "SIMD" : "scalar reference", copyGbs, copy.getPrimaryResult().getScore(),
        copy.getPrimaryResult().getScoreError()));
    t.append("| codec | encode GB/s | decode GB/s | encode / copy | decode / copy | encode us (± 99.9% CI) | "
        + "decode us (± 99.9% CI) | checksum us | two-pass bound / copy |\n|---|---|---|---|---|---|---|---|---|\n");
    for (String c : codecs) {
      RunResult e = find(results, "encode", c);
      RunResult d = find(results, "decode", c);
      double crcUs = find(results, "checksum", c).getPrimaryResult().getScore();
      double copyUs = copy.getPrimaryResult().getScore();
      // a decoder that checks the whole body before writing reads it once (at least the checksum's time) and then
      // writes the output (at least a copy's time): the highest decode / copy fraction it can reach
      t.append(String.format(Locale.ROOT,
          "| %s | %.3f | %.3f | %.4f | %.4f | %.0f ± %.0f | %.0f ± %.0f | %.0f | %.3f |%n",
          c, gbs(e), gbs(d), gbs(e) / copyGbs, gbs(d) / copyGbs, e.getPrimaryResult().getScore(),
          e.getPrimaryResult().getScoreError(), d.getPrimaryResult().getScore(), d.getPrimaryResult().getScoreError(),
          crcUs, copyUs / (copyUs + crcUs)));
    }
    System.out.println();
    System.out.print(t);
  }

  private static RunResult find(Collection<RunResult> rs, String method, String codec) {
    List<RunResult> hit = new ArrayList<>();
    for (RunResult r : rs) {
      if (r.getParams().getBenchmark().endsWith("." + method) && codec.equals(r.getParams().getParam("codec"))) {
        hit.add(r);
      }
    }
    return hit.getFirst();
  }

  /** GB/s of float32 input for a run scored in microseconds per call. */
  private static double gbs(RunResult r) {
    return BYTES / (r.getPrimaryResult().getScore() * 1e-6) / 1e9;
  }
}
