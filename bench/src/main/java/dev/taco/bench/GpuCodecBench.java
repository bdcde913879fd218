package dev.taco.bench;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;

import dev.taco.codec.AbstractCodec;
import dev.taco.codec.Codecs;
import dev.taco.codec.Fp8Format;
import dev.taco.codec.PayloadHeader;
import dev.taco.codec.TacoCodec;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.GroupKernels;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.cuda.Dim3;
import dev.taco.kernels.cuda.Launcher;
import dev.taco.kernels.gpu.GpuTacoCodec;
import dev.taco.kernels.gpu.GroupTwoShotKernels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.function.IntConsumer;

/**
 * GPU check and benchmark of the fused TACO kernels (docs/design.md §5, §7). Run on the GPU machine by
 * {@code bench/gpu-codec.sh}: {@code java -cp "$CP" dev.taco.bench.GpuCodecBench --out FILE [--command TEXT]}.
 *
 * <ol>
 *   <li>Correctness, for a few shapes and configurations: the GPU body (fused and unfused compress of bf16 input)
 *       equals the CPU {@link TacoCodec} body of the same values widened to float32, byte for byte; GPU decompress
 *       (fp32) equals the CPU decode bit for bit, bf16 decompress its bf16 rounding, decompress-reduce the CPU
 *       decode with accumulate. One {@code PASS}/{@code FAIL} line each (with the mismatch count).
 *   <li>Timing, default codec (G = 64, Hadamard, E4M3) and bf16 input of 1, 16, 64 and 256 MiB ({@code rows x 4096}):
 *       median of 20 samples (CUDA events, after 3 warm-up samples) of: a device-to-device copy of the input bytes
 *       ({@code cuMemcpyDtoDAsync}; {@code copy_gbps} counts read + write), fused compress, fused decompress (to bf16),
 *       unfused compress, and fused compress with G = 256 without Hadamard (the per-site pick in training). Inputs
 *       rotate over at least 2 buffers and 128 MiB, so L2 (50 MiB) does not hold them; for sizes below 64 MiB a
 *       sample times {@code 64/MiB} (at most 16) back-to-back launches and divides, so launch gaps do not count.
 *       Effective bandwidth = (bytes read + bytes written) / time; its fraction of {@code copy_gbps}.
 *   <li>The 4-bit codecs' fused compress ({@code GroupTwoShotKernels.compressFp4}, one launch: {@code mxfp4} and
 *       {@code nvfp4}, Hadamard on and off, fp32 and bf16 input of 64 MiB, {@code rows x 4096}), checked first against
 *       the CPU codec's body on 64 x 4096 and 8 x 100 ({@code PASS}/{@code FAIL}), then timed as above beside a copy of
 *       the same input bytes: {@code fp4} in the JSON, target fraction of a copy >= 0.70.
 * </ol>
 * Prints a table, writes bench/results/gpu-codec.json ({@code {"device", "command", "sizes": [...]}}), exits 1 if a
 * check failed.
 */
public final class GpuCodecBench {
  private GpuCodecBench() {}

  static final int COLS = 4096;
  static final int SAMPLES = 20;
  static final int WARMUP = 3;
  static final double ANCHOR_MS = 0.669; // PyTorch-ops compress at 64 MiB, docs/design.md §7

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws Exception {
    String out = null;
    String command = "bash bench/gpu-codec.sh";
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--out" -> out = args[i + 1];
        case "--command" -> command = args[i + 1];
        default -> throw new IllegalArgumentException("unknown option " + args[i] + " (--out FILE, --command TEXT)");
      }
    }
    try (CudaContext ctx = CudaContext.open(0); CudaStream stream = ctx.createStream()) {
      System.out.println("device: " + ctx.name() + " (" + ctx.arch() + ", " + ctx.smCount() + " SMs)");
      int failed = 0;
      int[][] shapes = {{8, 3072, 64, 1, Fp8.E4M3}, {64, 4096, 64, 1, Fp8.E4M3}, {64, 4096, 256, 0, Fp8.E4M3},
          {32, 1024, 128, 1, Fp8.E5M2}, {256, 16384, 256, 1, Fp8.E4M3}, {6, 5120, 64, 1, Fp8.E4M3}};
      for (int[] s : shapes) {
        failed += check(ctx, stream, s[0], s[1], s[2], s[3] == 1, s[4]);
      }
      List<String> fp4 = new ArrayList<>();
      for (int kind : new int[] {GroupKernels.MXFP4, GroupKernels.NVFP4}) {
        for (boolean h : new boolean[] {true, false}) {
          for (boolean bf16 : new boolean[] {false, true}) {
            failed += checkFp4(ctx, stream, 64, COLS, kind, h, bf16) + checkFp4(ctx, stream, 8, 100, kind, h, bf16);
          }
        }
      }
      List<String> rows = new ArrayList<>();
      for (int mib : new int[] {1, 16, 64, 256}) {
        rows.add(time(ctx, stream, mib));
      }
      for (int kind : new int[] {GroupKernels.MXFP4, GroupKernels.NVFP4}) {
        for (boolean h : new boolean[] {true, false}) {
          for (boolean bf16 : new boolean[] {false, true}) {
            fp4.add(timeFp4(ctx, stream, kind, h, bf16));
          }
        }
      }
      String json = "{\"device\": \"" + ctx.name() + "\", \"command\": \"" + command.replace("\"", "'")
          + "\", \"config\": \"bf16 rows x 4096, G=64, Hadamard, E4M3 (g256_plain: G=256, no Hadamard)\", "
          + "\"checks_failed\": " + failed + ", \"sizes\": [\n  " + String.join(",\n  ", rows) + "\n], \"fp4\": [\n  "
          + String.join(",\n  ", fp4) + "\n]}\n";
      if (out != null) {
        Path p = Path.of(out);
        if (p.getParent() != null) {
          Files.createDirectories(p.getParent());
        }
        Files.writeString(p, json);
        System.out.println("wrote " + p);
      }
      System.out.println(failed == 0 ? "all GPU checks passed" : failed + " GPU check(s) FAILED");
      System.exit(failed == 0 ? 0 : 1);
    }
  }

  /** bf16 test values: gaussian, outlier channels (x 300), a group 2^-40 below its row, a zero group. */
  static short[] input(int rows, int cols, int g, long seed) {
    Random rnd = new Random(seed);
    short[] x = new short[rows * cols];
    for (int i = 0; i < x.length; i++) {
      int col = i % cols;
      double v = rnd.nextGaussian() * (col % 97 == 5 ? 300 : 1);
      int r = i / cols;
      if (r == 1 && col >= g && col < 2 * g) {
        v = Math.scalb(v, -40);
      }
      x[i] = Bf16.encode(r == 2 && col < g ? 0f : (float) v);
    }
    return x;
  }

  static int check(CudaContext ctx, CudaStream stream, int rows, int cols, int g, boolean had, int format) {
    String name = rows + "x" + cols + " G=" + g + " hadamard=" + had + " " + (format == Fp8.E4M3 ? "e4m3" : "e5m2");
    short[] xb = input(rows, cols, g, rows * 31L + cols + g);
    float[] x = widen(xb);
    TacoCodec cpu = new TacoCodec(g, format == Fp8.E4M3 ? Fp8Format.E4M3 : Fp8Format.E5M2, 1f, had);
    byte[] payload = new byte[cpu.encodedSize(rows, cols)];
    cpu.encode(x, 0, rows, cols, payload, 0);
    byte[] expected = Arrays.copyOfRange(payload, PayloadHeader.SIZE, payload.length);
    float[] decoded = new float[x.length];
    cpu.decode(payload, 0, payload.length, decoded, 0, false);
    float[] acc = new float[x.length];
    for (int i = 0; i < acc.length; i++) {
      acc[i] = (float) Math.sin(i);
    }
    float[] accExpected = acc.clone();
    cpu.decode(payload, 0, payload.length, accExpected, 0, true);

    int failed = 0;
    try (GpuTacoCodec gpu = new GpuTacoCodec(ctx, g, had, format);
        DeviceBuffer dx = ctx.alloc(2L * x.length);
        DeviceBuffer body = ctx.alloc(expected.length);
        DeviceBuffer scratch = ctx.alloc(GpuTacoCodec.unfusedScratchBytes(rows, cols, g));
        DeviceBuffer outF = ctx.alloc(4L * x.length);
        DeviceBuffer outB = ctx.alloc(2L * x.length)) {
      dx.copyFrom(xb);
      for (boolean unfused : new boolean[] {false, true}) {
        body.memset((byte) 0);
        if (unfused) {
          gpu.compressUnfused(dx, true, rows, cols, body, scratch, stream);
        } else {
          gpu.compress(dx, true, rows, cols, body, stream);
        }
        stream.synchronize();
        byte[] got = new byte[expected.length];
        body.copyTo(got);
        failed += report((unfused ? "unfused" : "fused") + " compress body == CPU TacoCodec body, " + name,
            mismatches(got, expected), expected.length);
      }
      body.copyFrom(expected);
      float[] f = new float[x.length];
      gpu.decompress(body, rows, cols, outF, false, stream);
      stream.synchronize();
      outF.copyTo(f);
      failed += report("decompress fp32 == CPU decode (bits), " + name, mismatches(f, decoded), f.length);
      short[] b = new short[x.length];
      gpu.decompress(body, rows, cols, outB, true, stream);
      stream.synchronize();
      outB.copyTo(b);
      int bad = 0;
      for (int i = 0; i < b.length; i++) {
        bad += b[i] == Bf16.encode(decoded[i]) ? 0 : 1;
      }
      failed += report("decompress bf16 == bf16(CPU decode), " + name, bad, b.length);
      outF.copyFrom(acc);
      gpu.decompressReduce(body, rows, cols, outF, stream);
      stream.synchronize();
      outF.copyTo(f);
      failed += report("decompress-reduce == acc + CPU decode (bits), " + name, mismatches(f, accExpected), f.length);
    } catch (RuntimeException e) {
      System.out.println("FAIL " + name + ": " + e);
      failed++;
    }
    return failed;
  }

  static int report(String what, long bad, long total) {
    System.out.println((bad == 0 ? "PASS " : "FAIL ") + what + ": " + bad + " of " + total + " differ");
    return bad == 0 ? 0 : 1;
  }

  static long mismatches(byte[] a, byte[] b) {
    long n = 0;
    for (int i = 0; i < a.length; i++) {
      n += a[i] == b[i] ? 0 : 1;
    }
    return n;
  }

  static long mismatches(float[] a, float[] b) {
    long n = 0;
    for (int i = 0; i < a.length; i++) {
      n += Float.floatToRawIntBits(a[i]) == Float.floatToRawIntBits(b[i]) ? 0 : 1;
    }
    return n;
  }

  /** Times one size; prints a table row and returns its JSON object. */
  static String time(CudaContext ctx, CudaStream stream, int mib) {
    int rows = mib * 128; // rows x 4096 bf16 = mib MiB
    long inBytes = (long) mib << 20;
    int nbuf = Math.max(2, 128 / mib);
    int reps = Math.max(1, Math.min(16, 64 / mib));
    long body = GpuTacoCodec.bodyBytes(rows, COLS, 64);
    long body256 = GpuTacoCodec.bodyBytes(rows, COLS, 256);
    List<DeviceBuffer> all = new ArrayList<>();
    try (GpuTacoCodec fused = new GpuTacoCodec(ctx, 64, true, Fp8.E4M3);
        GpuTacoCodec plain = new GpuTacoCodec(ctx, 256, false, Fp8.E4M3);
        CudaEvent start = ctx.createEvent(); CudaEvent end = ctx.createEvent()) {
      DeviceBuffer[] in = new DeviceBuffer[nbuf];
      DeviceBuffer[] out = new DeviceBuffer[nbuf];
      DeviceBuffer[] bodies = new DeviceBuffer[nbuf];
      short[] host = input(rows, COLS, 64, mib);
      for (int i = 0; i < nbuf; i++) {
        in[i] = track(all, ctx.alloc(inBytes));
        out[i] = track(all, ctx.alloc(inBytes));
        bodies[i] = track(all, ctx.alloc(body));
        in[i].copyFrom(host);
      }
      DeviceBuffer scratch = track(all, ctx.alloc(GpuTacoCodec.unfusedScratchBytes(rows, COLS, 64)));
      fused.compress(in[0], true, rows, COLS, bodies[0], stream); // encode once so decompress reads real codes
      stream.synchronize();
      for (int i = 1; i < nbuf; i++) {
        bodies[i].copyFrom(bodies[0], body);
      }
      Timer t = new Timer(stream, start, end, nbuf, reps);
      double copy = t.median(i -> out[i].copyFromAsync(in[i], inBytes, stream));
      double comp = t.median(i -> fused.compress(in[i], true, rows, COLS, bodies[i], stream));
      double dec = t.median(i -> fused.decompress(bodies[i], rows, COLS, out[i], true, stream));
      double unf = t.median(i -> fused.compressUnfused(in[i], true, rows, COLS, bodies[i], scratch, stream));
      double comp256 = t.median(i -> plain.compress(in[i], true, rows, COLS, bodies[i], stream));
      double copyGbps = 2.0 * inBytes / (copy * 1e6);
      double compFrac = (inBytes + body) / (comp * 1e6) / copyGbps;
      double decFrac = (inBytes + body) / (dec * 1e6) / copyGbps;
      double comp256Frac = (inBytes + body256) / (comp256 * 1e6) / copyGbps;
      System.out.printf(Locale.ROOT, "%4d MiB  copy %7.4f ms %6.0f GB/s | compress %7.4f ms %.2f | decompress %7.4f ms"
          + " %.2f | unfused %7.4f ms (%.1fx) | G256 plain %7.4f ms %.2f%n", mib, copy, copyGbps, comp, compFrac, dec,
          decFrac, unf, unf / comp, comp256, comp256Frac);
      if (mib == 64) {
        System.out.printf(Locale.ROOT, "64 MiB: fused compress %.1fx faster than the PyTorch-ops anchor (0.669 ms);"
            + " target: fraction >= 0.70, >= 15x%n", ANCHOR_MS / comp);
      }
      return String.format(Locale.ROOT, "{\"mib\": %d, \"rows\": %d, \"cols\": %d, \"compress_ms\": %.5f, "
          + "\"decompress_ms\": %.5f, \"unfused_compress_ms\": %.5f, \"copy_ms\": %.5f, \"copy_gbps\": %.1f, "
          + "\"compress_fraction_of_copy\": %.3f, \"decompress_fraction_of_copy\": %.3f, "
          + "\"compress_g256_plain_ms\": %.5f, \"compress_g256_plain_fraction_of_copy\": %.3f, "
          + "\"speedup_vs_pytorch_anchor\": %s, \"fused_over_unfused\": %.2f, \"copy_method\": "
          + "\"cuMemcpyDtoDAsync\", \"launches_per_sample\": %d, \"buffers_rotated\": %d}", mib, rows, COLS, comp, dec,
          unf, copy, copyGbps, compFrac, decFrac, comp256, comp256Frac,
          mib == 64 ? String.format(Locale.ROOT, "%.1f", ANCHOR_MS / comp) : "null", unf / comp, reps, nbuf);
    } finally {
      all.forEach(DeviceBuffer::close);
    }
  }

  /** The CPU codec of an E2M1 kind ({@code mxfp4}, {@code nvfp4}) with the rotation on or off. */
  static AbstractCodec fp4Codec(int kind, boolean hadamard) {
    return Codecs.byName((kind == GroupKernels.MXFP4 ? "mxfp4" : "nvfp4") + ":hadamard=" + (hadamard ? "on" : "off"));
  }

  /** One launch of the E2M1 fused compress of a whole {@code rows x cols} tensor. */
  static void compressFp4(Launcher k, DeviceBuffer x, DeviceBuffer body, int rows, int cols, int kind, boolean h,
      boolean bf16, CudaStream stream) {
    k.on(Dim3.of(rows), Dim3.of(GroupTwoShotKernels.fp4Threads(cols, kind)), stream).task("compressFp4",
        GroupTwoShotKernels::compressFp4, KERNEL_CONTEXT, x, x, body, 0, rows, rows, cols, kind, h, bf16);
  }

  /** The GPU body of {@link #compressFp4} against the CPU codec's, byte for byte; 1 if it differs. */
  static int checkFp4(CudaContext ctx, CudaStream stream, int rows, int cols, int kind, boolean h, boolean bf16) {
    AbstractCodec cpu = fp4Codec(kind, h);
    String name = cpu + " " + rows + "x" + cols + (bf16 ? " bf16" : " fp32");
    short[] xb = input(rows, cols, 32, rows * 17L + cols + kind);
    float[] x = widen(xb);
    byte[] payload = new byte[cpu.encodedSize(rows, cols)];
    cpu.encode(x, 0, rows, cols, payload, 0);
    byte[] expected = Arrays.copyOfRange(payload, PayloadHeader.SIZE, payload.length);
    try (DeviceBuffer dx = ctx.alloc((bf16 ? 2L : 4L) * x.length); DeviceBuffer body = ctx.alloc(expected.length)) {
      if (bf16) {
        dx.copyFrom(xb);
      } else {
        dx.copyFrom(x);
      }
      compressFp4(new Launcher(ctx), dx, body, rows, cols, kind, h, bf16, stream);
      stream.synchronize();
      byte[] got = new byte[expected.length];
      body.copyTo(got);
      return report("fused compress body == CPU " + name + " body", mismatches(got, expected), expected.length);
    } catch (RuntimeException e) {
      System.out.println("FAIL " + name + ": " + e);
      return 1;
    }
  }

  /** Times the E2M1 fused compress of 64 MiB of {@code rows x 4096}; prints a line and returns its JSON object. */
  static String timeFp4(CudaContext ctx, CudaStream stream, int kind, boolean h, boolean bf16) {
    long inBytes = 64L << 20;
    int rows = (int) (inBytes / ((bf16 ? 2 : 4) * COLS));
    long body = GroupTwoShotKernels.fp4BodyBytes(rows, COLS, kind, h);
    String codec = fp4Codec(kind, h).toString();
    List<DeviceBuffer> all = new ArrayList<>();
    Launcher k = new Launcher(ctx);
    try (CudaEvent start = ctx.createEvent(); CudaEvent end = ctx.createEvent()) {
      DeviceBuffer[] in = new DeviceBuffer[2];
      DeviceBuffer[] out = new DeviceBuffer[2];
      DeviceBuffer[] bodies = new DeviceBuffer[2];
      short[] host = input(rows, COLS, 32, 64);
      float[] wide = bf16 ? null : widen(host);
      for (int i = 0; i < 2; i++) {
        in[i] = track(all, ctx.alloc(inBytes));
        out[i] = track(all, ctx.alloc(inBytes));
        bodies[i] = track(all, ctx.alloc(body));
        if (bf16) {
          in[i].copyFrom(host);
        } else {
          in[i].copyFrom(wide);
        }
      }
      Timer t = new Timer(stream, start, end, 2, 1);
      double copy = t.median(i -> out[i].copyFromAsync(in[i], inBytes, stream));
      double comp = t.median(i -> compressFp4(k, in[i], bodies[i], rows, COLS, kind, h, bf16, stream));
      double copyGbps = 2.0 * inBytes / (copy * 1e6);
      double frac = (inBytes + body) / (comp * 1e6) / copyGbps;
      System.out.printf(Locale.ROOT, "64 MiB %-26s %s: copy %7.4f ms | fused compress %7.4f ms, %.2f of a copy"
          + " (target >= 0.70)%n", codec, bf16 ? "bf16" : "fp32", copy, comp, frac);
      return String.format(Locale.ROOT, "{\"codec\": \"%s\", \"input\": \"%s\", \"mib\": 64, \"rows\": %d, "
          + "\"cols\": %d, \"compress_ms\": %.5f, \"copy_ms\": %.5f, \"copy_gbps\": %.1f, \"body_bytes\": %d, "
          + "\"compress_fraction_of_copy\": %.3f}", codec, bf16 ? "bf16" : "fp32", rows, COLS, comp, copy, copyGbps,
          body, frac);
    } finally {
      all.forEach(DeviceBuffer::close);
    }
  }

  /** The fp32 values of bf16 values. */
  private static float[] widen(short[] b) {
    float[] f = new float[b.length];
    for (int i = 0; i < f.length; i++) {
      f[i] = Bf16.decode(b[i]);
    }
    return f;
  }

  private static DeviceBuffer track(List<DeviceBuffer> all, DeviceBuffer b) {
    all.add(b);
    return b;
  }

  /** Median time of an operation (argument: the buffer index), in ms per launch. */
  record Timer(CudaStream stream, CudaEvent start, CudaEvent end, int nbuf, int reps) {
    double median(IntConsumer op) {
      double[] ms = new double[SAMPLES];
      int next = 0;
      for (int s = -WARMUP; s < SAMPLES; s++) {
        start.record(stream);
        for (int r = 0; r < reps; r++) {
          op.accept(next);
          next = (next + 1) % nbuf;
        }
        end.record(stream);
        end.synchronize();
        if (s >= 0) {
          ms[s] = start.elapsedMillisTo(end) / reps;
        }
      }
      Arrays.sort(ms);
      return (ms[SAMPLES / 2 - 1] + ms[SAMPLES / 2]) / 2;
    }
  }
}
