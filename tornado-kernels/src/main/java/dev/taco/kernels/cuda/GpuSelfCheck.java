package dev.taco.kernels.cuda;

import dev.taco.kernels.Bf16;
import dev.taco.kernels.Fp8;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The CUDA backend's checks on a real GPU, runnable without a JDK or Maven ({@code tornado-kernels/gpu-check.sh}
 * on the device machine) and called by the GPU JUnit tests ({@code CudaGpuTest}), which skip without a GPU.
 *
 * <p>Each check returns a one-line detail or throws; {@link #main(String[])} prints {@code PASS name: detail}
 * or {@code FAIL name: error} per check, then {@code N passed, M failed}, and exits 1 if any failed (2 if
 * CUDA is unavailable).
 *
 * <p>Usage: {@code java -cp "$CP" dev.taco.kernels.cuda.GpuSelfCheck [--device N] [--only name,name]}.
 */
public final class GpuSelfCheck {
  /** A vector add and an empty kernel, {@code extern "C"} so their names survive. */
  public static final String VECTOR_ADD_SRC = """
      extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                            float* __restrict__ c, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) c[i] = a[i] + b[i];
      }
      extern "C" __global__ void empty_kernel() {}
      """;

  /** Converts fp32 to bf16 (RNE) and to FP8 E4M3 (RNE, saturating to ±448) with the CUDA headers. */
  public static final String CONVERT_SRC = """
      #include <cuda_bf16.h>
      #include <cuda_fp8.h>
      extern "C" __global__ void convert(const float* __restrict__ x, unsigned short* __restrict__ bf,
                                         unsigned char* __restrict__ e4m3, int n) {
          int i = blockIdx.x * blockDim.x + threadIdx.x;
          if (i < n) {
              __nv_bfloat16 h = __float2bfloat16_rn(x[i]);
              bf[i] = __bfloat16_as_ushort(h);
              e4m3[i] = (unsigned char) __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
          }
      }
      """;

  private GpuSelfCheck() {}

  /** A named check. */
  @FunctionalInterface
  public interface Check {
    /**
     * @param ctx the device context
     * @return a one-line detail
     * @throws Exception on failure
     */
    String run(CudaContext ctx) throws Exception;
  }

  /** @return the checks in the order {@link #main} runs them */
  public static Map<String, Check> checks() {
    Map<String, Check> m = new LinkedHashMap<>();
    m.put("device", GpuSelfCheck::device);
    m.put("round-trip", GpuSelfCheck::roundTrip);
    m.put("nvrtc-cache", GpuSelfCheck::nvrtcCache);
    m.put("nvrtc-error", GpuSelfCheck::nvrtcError);
    m.put("vector-add", GpuSelfCheck::vectorAdd);
    m.put("headers-bf16-fp8", GpuSelfCheck::headersBf16Fp8);
    m.put("task-graph", GpuSelfCheck::taskGraph);
    m.put("cuda-graph", GpuSelfCheck::cudaGraph);
    m.put("copy-bandwidth", GpuSelfCheck::copyBandwidth);
    m.put("launch-overhead", GpuSelfCheck::launchOverhead);
    m.put("launch-error", GpuSelfCheck::launchError);
    return m;
  }

  /**
   * Runs the checks on one device.
   *
   * @param args {@code --device N} (default 0), {@code --only a,b} (default all)
   */
  public static void main(String[] args) {
    int device = 0;
    List<String> only = null;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--device" -> device = Integer.parseInt(args[++i]);
        case "--only" -> only = Arrays.asList(args[++i].split(","));
        default -> {
          System.err.println("usage: GpuSelfCheck [--device N] [--only name,name]; checks: " + checks().keySet());
          System.exit(64);
        }
      }
    }
    if (!Cuda.available()) {
      System.out.println("FAIL cuda-available: " + Cuda.unavailableReason());
      System.out.println("0 passed, 1 failed");
      System.exit(2);
    }
    int pass = 0;
    int fail = 0;
    try (CudaContext ctx = CudaContext.open(device)) {
      for (Map.Entry<String, Check> e : checks().entrySet()) {
        if (only != null && !only.contains(e.getKey())) continue;
        long t0 = System.nanoTime();
        try {
          String detail = e.getValue().run(ctx);
          System.out.printf(Locale.ROOT, "PASS %s: %s [%.0f ms]%n", e.getKey(), detail, (System.nanoTime() - t0) / 1e6);
          pass++;
        } catch (Throwable t) {
          System.out.printf(Locale.ROOT, "FAIL %s: %s%n", e.getKey(), t);
          t.printStackTrace(System.out);
          fail++;
          try {
            ctx.synchronize();
          } catch (CudaException sticky) {
            System.out
                .println("FAIL context-after-" + e.getKey() + ": " + sticky.getMessage() + " (sticky error; stopping)");
            fail++;
            break;
          }
        }
        System.out.flush();
      }
    }
    System.out.println(pass + " passed, " + fail + " failed");
    System.exit(fail == 0 ? 0 : 1);
  }

  private static void require(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  // ------------------------------------------------------------------ checks

  /**
   * @param ctx the context
   * @return name, architecture, SM count, memory and driver version
   */
  public static String device(CudaContext ctx) {
    int v = ctx.driver().driverVersion();
    require(ctx.smCount() > 0 && ctx.computeCapabilityMajor() >= 3, "implausible device properties");
    return String.format(Locale.ROOT,
        "%s, %s, %d SMs, %.1f GiB, driver CUDA %d.%d, max %d threads/block, %d KiB smem opt-in",
        ctx.name(), ctx.arch(), ctx.smCount(), ctx.totalMemoryBytes() / (double) (1L << 30), v / 1000, (v % 1000) / 10,
        ctx.maxThreadsPerBlock(), ctx.maxSharedBytesPerBlockOptin() >> 10);
  }

  /**
   * Random float/short/byte data through device memory and back: synchronous copies, device-to-device,
   * pinned async copies and memset; all bit-exact.
   *
   * @param ctx the context
   * @return sizes checked
   */
  public static String roundTrip(CudaContext ctx) {
    SplittableRandom rnd = new SplittableRandom(1);
    int n = (5 << 20) + 3; // crosses the 8 MiB staging chunk
    float[] f = new float[n];
    for (int i = 0; i < n; i++) f[i] = Float.intBitsToFloat(rnd.nextInt());
    short[] s = new short[n];
    for (int i = 0; i < n; i++) s[i] = (short) rnd.nextInt();
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) b[i] = (byte) rnd.nextInt();
    try (DeviceBuffer d1 = ctx.alloc(4L * n); DeviceBuffer d2 = ctx.alloc(4L * n);
        PinnedBuffer p = ctx.allocPinned(4L * n); CudaStream st = ctx.createStream()) {
      d1.copyFrom(f);
      float[] back = new float[n];
      d1.copyTo(back);
      requireBits(f, back, "float HtoD/DtoH");
      d2.copyFrom(d1, 4L * n);
      Arrays.fill(back, 0f);
      d2.copyTo(back);
      requireBits(f, back, "float DtoD");

      d1.copyFrom(s);
      short[] sb = new short[n];
      d1.copyTo(sb);
      require(Arrays.equals(s, sb), "short round trip differs");
      d1.copyFrom(b);
      byte[] bb = new byte[n];
      d1.copyTo(bb);
      require(Arrays.equals(b, bb), "byte round trip differs");

      // offsets: elements [7, 7+1000) of f to byte 64 of d1, back into [100, 1100) of a fresh array
      d1.copyFromHost(f, 7, 1000, 64);
      float[] part = new float[1200];
      d1.copyToHost(part, 100, 1000, 64);
      requireBits(Arrays.copyOfRange(f, 7, 1007), Arrays.copyOfRange(part, 100, 1100), "offset copies");

      // pinned async: f → pinned → d2 (async) → d1 (async DtoD) → pinned → array
      p.write(0, f);
      d2.copyFromAsync(p, 0, 0, 4L * n, st);
      d1.memsetAsync((byte) 0, st);
      d1.copyFromAsync(d2, 4L * n, st);
      PinnedBuffer q = ctx.allocPinned(4L * n);
      try (q) {
        d1.copyToAsync(q, 0, 0, 4L * n, st);
        st.synchronize();
        Arrays.fill(back, 0f);
        q.read(0, back);
      }
      requireBits(f, back, "pinned async");

      d1.memset((byte) 0);
      d1.copyTo(bb);
      for (byte x : bb) require(x == 0, "memset left a non-zero byte");
    }
    return "float/short/byte n=" + n + " sync, offset, DtoD, pinned async, memset: bit-exact";
  }

  private static void requireBits(float[] a, float[] b, String what) {
    require(a.length == b.length, what + ": length");
    for (int i = 0; i < a.length; i++) {
      if (Float.floatToRawIntBits(a[i]) != Float.floatToRawIntBits(b[i])) {
        throw new AssertionError(
            what + ": element " + i + " differs: " + Integer.toHexString(Float.floatToRawIntBits(a[i]))
                + " vs " + Integer.toHexString(Float.floatToRawIntBits(b[i])));
      }
    }
  }

  /**
   * NVRTC compile into a fresh cache: the first call compiles (miss), the second is a hit and much faster.
   *
   * @param ctx the context
   * @return NVRTC version, compile time, hit time, PTX size
   * @throws IOException if the temporary cache directory cannot be made
   */
  public static String nvrtcCache(CudaContext ctx) throws IOException {
    Path dir = Files.createTempDirectory("taco-ptx-check");
    PtxCache cache = new PtxCache(dir);
    long t0 = System.nanoTime();
    String ptx = Nvrtc.compileCached(VECTOR_ADD_SRC, "vector_add.cu", ctx.computeArch(), List.of(), cache);
    long t1 = System.nanoTime();
    String again = Nvrtc.compileCached(VECTOR_ADD_SRC, "vector_add.cu", ctx.computeArch(), List.of(), cache);
    long t2 = System.nanoTime();
    require(ptx.equals(again), "cached PTX differs");
    require(cache.misses() == 1 && cache.hits() == 1,
        "expected 1 miss and 1 hit, got " + cache.misses() + "/" + cache.hits());
    require(ptx.contains(".entry vector_add"), "PTX lacks .entry vector_add");
    try (CudaModule m = ctx.loadModule(ptx)) {
      m.function("vector_add");
      m.function("empty_kernel");
    }
    deleteTree(dir);
    return String.format(Locale.ROOT, "%s (%s): compile %.1f ms, cache hit %.2f ms, %d bytes PTX for %s, options %s",
        Nvrtc.get().versionString(), Nvrtc.get().libraryName(), (t1 - t0) / 1e6, (t2 - t1) / 1e6, ptx.length(),
        ctx.computeArch(), Nvrtc.defaultOptions(ctx.computeArch()));
  }

  /**
   * A source with a type error → {@link NvrtcException} carrying the compile log.
   *
   * @param ctx the context
   * @return the first log line
   */
  public static String nvrtcError(CudaContext ctx) {
    String bad = "extern \"C\" __global__ void broken(float* x) { x[0] = undefined_name; }\n";
    try {
      Nvrtc.get().compile(bad, "broken.cu", ctx.computeArch(), List.of());
    } catch (NvrtcException e) {
      require(e.code() == 6, "expected NVRTC_ERROR_COMPILATION (6), got " + e.code());
      require(e.log().contains("undefined_name"), "log does not name the undefined identifier: " + e.log());
      return e.errorString() + ", log: " + e.log().lines().filter(l -> !l.isBlank()).findFirst().orElse("");
    }
    throw new AssertionError("compiling a broken kernel did not throw");
  }

  /**
   * Vector add via NVRTC on random inputs against a float64 CPU reference: float addition is correctly
   * rounded, so every element must equal {@code (float) ((double) a + (double) b)}.
   *
   * @param ctx the context
   * @return n, kernel time, max error
   */
  public static String vectorAdd(CudaContext ctx) {
    int n = 3_000_017;
    SplittableRandom rnd = new SplittableRandom(2);
    float[] a = new float[n];
    float[] b = new float[n];
    for (int i = 0; i < n; i++) {
      a[i] = (float) (rnd.nextGaussian() * Math.pow(2, rnd.nextInt(-20, 20)));
      b[i] = (float) (rnd.nextGaussian() * Math.pow(2, rnd.nextInt(-20, 20)));
    }
    float[] c = new float[n];
    float ms;
    try (CudaModule m = ctx.compileModule(VECTOR_ADD_SRC, "vector_add.cu");
        DeviceBuffer da = ctx.alloc(4L * n); DeviceBuffer db = ctx.alloc(4L * n); DeviceBuffer dc = ctx.alloc(4L * n);
        CudaStream st = ctx.createStream(); CudaEvent e0 = ctx.createEvent(); CudaEvent e1 = ctx.createEvent()) {
      da.copyFrom(a);
      db.copyFrom(b);
      CudaFunction f = m.function("vector_add");
      e0.record(st);
      f.launch(Dim3.cover(n, 256), Dim3.of(256), 0, st, da, db, dc, n);
      e1.record(st);
      st.synchronize();
      ms = e0.elapsedMillisTo(e1);
      dc.copyTo(c);
    }
    double maxErr = 0;
    int wrong = 0;
    for (int i = 0; i < n; i++) {
      double ref = (double) a[i] + (double) b[i];
      maxErr = Math.max(maxErr, Math.abs(c[i] - ref));
      if (Float.floatToRawIntBits(c[i]) != Float.floatToRawIntBits((float) ref)) wrong++;
    }
    require(wrong == 0, wrong + " of " + n + " elements differ from the correctly rounded sum");
    return String.format(Locale.ROOT, "n=%d exact vs float64 reference (max |c - (a+b)| = %.3g), kernel %.3f ms", n,
        maxErr, ms);
  }

  /**
   * {@code cuda_bf16.h} and {@code cuda_fp8.h} under NVRTC, and their conversions against the project's
   * Java {@link Bf16#encode(float)} and {@link Fp8#encodeE4M3(float)} on finite inputs spanning the ranges.
   *
   * @param ctx the context
   * @return mismatch counts
   */
  public static String headersBf16Fp8(CudaContext ctx) {
    int n = 1 << 20;
    SplittableRandom rnd = new SplittableRandom(3);
    float[] x = new float[n];
    for (int i = 0; i < n; i++) {
      float v;
      do {
        v = switch (i % 4) {
          case 0 -> Float.intBitsToFloat(rnd.nextInt()); // any finite
          case 1 -> (float) (rnd.nextGaussian() * Math.pow(2, rnd.nextInt(-12, 10))); // FP8 range incl. subnormals
          case 2 -> (float) (rnd.nextDouble(-500, 500)); // around E4M3 max (448)
          default -> Float.intBitsToFloat(rnd.nextInt(0, 0x00800000) | (rnd.nextBoolean() ? 0x80000000 : 0)); // fp32 subnormals
        };
      } while (!Float.isFinite(v));
      x[i] = v;
    }
    short[] bf = new short[n];
    byte[] e4 = new byte[n];
    try (CudaModule m = ctx.compileModule(CONVERT_SRC, "convert.cu");
        DeviceBuffer dx = ctx.alloc(4L * n); DeviceBuffer dbf = ctx.alloc(2L * n); DeviceBuffer de4 = ctx.alloc(n)) {
      dx.copyFrom(x);
      m.function("convert").launch(Dim3.cover(n, 256), Dim3.of(256), 0, null, dx, dbf, de4, n);
      ctx.synchronize();
      dbf.copyTo(bf);
      de4.copyTo(e4);
    }
    int badBf = 0;
    int badE4 = 0;
    String firstBad = "";
    for (int i = 0; i < n; i++) {
      if (bf[i] != Bf16.encode(x[i])) {
        if (badBf++ == 0)
          firstBad += String.format(Locale.ROOT, " bf16(%s): gpu %04x java %04x;", x[i], bf[i], Bf16.encode(x[i]));
      }
      if (e4[i] != Fp8.encodeE4M3(x[i])) {
        if (badE4++ == 0)
          firstBad += String.format(Locale.ROOT, " e4m3(%s): gpu %02x java %02x;", x[i], e4[i], Fp8.encodeE4M3(x[i]));
      }
    }
    require(badBf == 0 && badE4 == 0,
        "GPU vs Java conversions differ: bf16 " + badBf + ", e4m3 " + badE4 + " of " + n + ":" + firstBad);
    return "n=" + n + " finite inputs: bf16 RNE and e4m3 satfinite identical to dev.taco.kernels.Bf16/Fp8";
  }

  /**
   * Vector add through a two-lane {@link TaskGraph} run by an {@link ExecutionPlan}: a FIRST_EXECUTION input on
   * lane 0, an EVERY_EXECUTION input changed between executions on lane 1, the add on lane 0 after it (a cross-lane
   * event), an EVERY_EXECUTION output, and per-task event timing.
   *
   * @param ctx the context
   * @return executions and task time
   */
  public static String taskGraph(CudaContext ctx) {
    int n = 1_000_003;
    float[] a = new float[n];
    float[] b = new float[n];
    float[] c = new float[n];
    for (int i = 0; i < n; i++) a[i] = i * 0.5f;
    float ms;
    try (CudaModule m = ctx.compileModule(VECTOR_ADD_SRC, "vector_add.cu");
        DeviceBuffer da = ctx.alloc(4L * n); DeviceBuffer db = ctx.alloc(4L * n); DeviceBuffer dc = ctx.alloc(4L * n);
        ExecutionPlan plan = new ExecutionPlan(ctx, new TaskGraph("vadd")
            .transferToDevice(DataTransferMode.FIRST_EXECUTION, a, da)
            .transferToDevice(DataTransferMode.EVERY_EXECUTION, b, db).onLane(TaskGraph.COMMUNICATION_LANE)
            .prebuiltTask("add", m.function("vector_add"), da, db, dc, n).grid(WorkerGrid.cover(n, 128))
            .after("toDevice1")
            .transferToHost(DataTransferMode.EVERY_EXECUTION, dc, c)
            .snapshot())) {
      for (int round = 0; round < 3; round++) {
        for (int i = 0; i < n; i++) b[i] = round * 1000f + i % 7;
        if (round == 1) Arrays.fill(a, -1f); // FIRST_EXECUTION: the device keeps the first a
        plan.execute();
        for (int i = 0; i < n; i++) {
          float want = i * 0.5f + (round * 1000f + i % 7);
          if (c[i] != want) throw new AssertionError("round " + round + " element " + i + ": " + c[i] + " != " + want);
        }
      }
      ms = plan.taskMillis("add");
      require(ms > 0, "task time not positive: " + ms);
      require(plan.executions() == 3 && plan.launches() == 3,
          "executions/launches " + plan.executions() + "/" + plan.launches());
    }
    return String.format(Locale.ROOT, "3 executions on 2 lanes correct, FIRST_EXECUTION honoured, task 'add' %.3f ms",
        ms);
  }

  /**
   * A chain of 16 small vector adds ({@code x += b}, ping-pong between two buffers) run eagerly and captured into a
   * CUDA graph ({@link ExecutionPlan#withCudaGraph()}): the same results, one {@code cuGraphLaunch} per execution
   * instead of 16 {@code cuLaunchKernel}, and the host time per execution of each.
   *
   * @param ctx the context
   * @return host µs per execution, eager and replayed
   */
  public static String cudaGraph(CudaContext ctx) {
    int n = 4096;
    int chain = 16;
    int reps = 200;
    float[] b = new float[n];
    for (int i = 0; i < n; i++) b[i] = i % 5;
    try (CudaModule m = ctx.compileModule(VECTOR_ADD_SRC, "vector_add.cu");
        DeviceBuffer db = ctx.alloc(4L * n); DeviceBuffer x0 = ctx.alloc(4L * n); DeviceBuffer x1 = ctx.alloc(4L * n)) {
      CudaFunction add = m.function("vector_add");
      float[][] out = new float[2][n];
      double[] micros = new double[2];
      for (int mode = 0; mode < 2; mode++) {
        TaskGraph g = new TaskGraph("chain").transferToDevice(DataTransferMode.FIRST_EXECUTION, b, db);
        x0.memset((byte) 0);
        for (int k = 0; k < chain; k++) {
          g.prebuiltTask("add" + k, add, k % 2 == 0 ? x0 : x1, db, k % 2 == 0 ? x1 : x0, n)
              .grid(WorkerGrid.cover(n, 256));
        }
        g.transferToHost(DataTransferMode.EVERY_EXECUTION, x0, out[mode]);
        try (ExecutionPlan plan = new ExecutionPlan(ctx, g.snapshot())) {
          if (mode == 1) plan.withCudaGraph();
          plan.execute();
          long launchesBefore = plan.launches();
          long t0 = System.nanoTime();
          for (int r = 0; r < reps; r++) plan.execute();
          micros[mode] = (System.nanoTime() - t0) / 1e3 / reps;
          long perExecution = (plan.launches() - launchesBefore) / reps;
          require(perExecution == (mode == 0 ? chain : 1), "launches per execution " + perExecution);
          if (mode == 1) require(plan.cudaGraphNodes() >= chain, "captured " + plan.cudaGraphNodes() + " nodes");
        }
      }
      for (int i = 0; i < n; i++) {
        float want = (1 + reps) * chain * (float) (i % 5);
        if (out[0][i] != want || out[1][i] != want) {
          throw new AssertionError(
              "element " + i + ": eager " + out[0][i] + ", replayed " + out[1][i] + ", want " + want);
        }
      }
      return String.format(Locale.ROOT, "%d chained adds: eager %d launches, %.1f µs/execution; CUDA graph 1 launch, "
          + "%.1f µs/execution (host), same results", chain, chain, micros[0], micros[1]);
    }
  }

  /**
   * Device-to-device copy of 256 MiB timed with events; median of 20; bandwidth counts bytes read plus
   * written (docs/design.md §7 anchor: 4278 GB/s on an H200).
   *
   * @param ctx the context
   * @return median time and GB/s
   */
  public static String copyBandwidth(CudaContext ctx) {
    long bytes = 256L << 20;
    int reps = 20;
    float[] t = new float[reps];
    try (DeviceBuffer src = ctx.alloc(bytes); DeviceBuffer dst = ctx.alloc(bytes); CudaStream st = ctx.createStream();
        CudaEvent e0 = ctx.createEvent(); CudaEvent e1 = ctx.createEvent()) {
      src.memsetAsync((byte) 1, st);
      for (int i = 0; i < 3; i++) dst.copyFromAsync(src, bytes, st);
      for (int i = 0; i < reps; i++) {
        e0.record(st);
        dst.copyFromAsync(src, bytes, st);
        e1.record(st);
        e1.synchronize();
        t[i] = e0.elapsedMillisTo(e1);
      }
    }
    Arrays.sort(t);
    double ms = (t[reps / 2 - 1] + t[reps / 2]) / 2.0;
    double gbps = 2.0 * bytes / (ms * 1e-3) / 1e9;
    require(gbps > 100, "implausibly low copy bandwidth " + gbps + " GB/s");
    return String.format(Locale.ROOT,
        "256 MiB DtoD median %.3f ms (min %.3f, max %.3f) = %.0f GB/s read+write (%.2f of the 4278 GB/s anchor)",
        ms, t[0], t[reps - 1], gbps, gbps / 4278);
  }

  /**
   * Host cost of one {@code cuLaunchKernel} of an empty kernel (1 block of 32 threads), median over 20
   * batches of 2000 launches, through direct mapping and through the interface mapping.
   *
   * @param ctx the context
   * @return µs per launch for both mappings
   */
  public static String launchOverhead(CudaContext ctx) {
    try (CudaModule m = ctx.compileModule(VECTOR_ADD_SRC, "vector_add.cu"); CudaStream st = ctx.createStream()) {
      CudaFunction f = m.function("empty_kernel");
      KernelArgs none = new KernelArgs();
      Dim3 g = Dim3.of(1);
      Dim3 b = Dim3.of(32);
      double direct = medianMicros(st, () -> f.launch(g, b, 0, st, none));
      CudaDriver d = ctx.driver();
      long fh = f.handle();
      long sh = st.handle();
      double viaInterface = medianMicros(st, () -> d.launchKernelInterfaceMapped(fh, 1, 32, 0, sh, null));
      require(direct > 0 && viaInterface > 0 && Double.isFinite(direct) && Double.isFinite(viaInterface),
          "launch times must be positive and finite, got " + direct + " and " + viaInterface + " µs");
      return String.format(Locale.ROOT,
          "median %.2f µs/launch direct mapping, %.2f µs/launch interface mapping (docs/design.md §5: 5-6 vs 7.4)",
          direct, viaInterface);
    }
  }

  private static double medianMicros(CudaStream st, Runnable launch) {
    int batches = 20;
    int per = 2000;
    for (int i = 0; i < per; i++) launch.run(); // warm-up (JIT, driver)
    st.synchronize();
    double[] us = new double[batches];
    for (int k = 0; k < batches; k++) {
      long t0 = System.nanoTime();
      for (int i = 0; i < per; i++) launch.run();
      long t1 = System.nanoTime();
      st.synchronize();
      us[k] = (t1 - t0) / 1e3 / per;
    }
    Arrays.sort(us);
    return (us[batches / 2 - 1] + us[batches / 2]) / 2;
  }

  /**
   * A launch with 2048 threads per block (over the 1024 limit) must throw {@link CudaException} naming
   * {@code cuLaunchKernel} and the driver's error string, and leave the context usable.
   *
   * @param ctx the context
   * @return the exception message
   */
  public static String launchError(CudaContext ctx) {
    try (CudaModule m = ctx.compileModule(VECTOR_ADD_SRC, "vector_add.cu")) {
      CudaFunction f = m.function("empty_kernel");
      try {
        f.launch(Dim3.of(1), Dim3.of(2048), 0, null);
        ctx.synchronize();
      } catch (CudaException e) {
        require(e.call().equals("cuLaunchKernel"), "call is " + e.call());
        require(e.code() == 1 && e.errorName().equals("CUDA_ERROR_INVALID_VALUE"), "unexpected code " + e.getMessage());
        require(!e.errorString().isBlank() && e.getMessage().contains(e.errorString()),
            "message lacks the error string");
        try (DeviceBuffer probe = ctx.alloc(1024)) {
          probe.memset((byte) 7);
          ctx.synchronize();
        }
        return e.getMessage() + "; context still usable";
      }
    }
    throw new AssertionError("launch with 2048 threads per block did not throw");
  }

  private static void deleteTree(Path dir) {
    try (var s = Files.walk(dir)) {
      List<Path> all = new ArrayList<>(s.toList());
      java.util.Collections.reverse(all);
      for (Path p : all) Files.deleteIfExists(p);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
