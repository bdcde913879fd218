package dev.taco.bench;

import dev.taco.codec.Codecs;
import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceTensor;
import dev.taco.collective.device.NcclTransport;
import dev.taco.collective.nccl.NcclCommunicator;
import dev.taco.collective.nccl.NcclDataType;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;

/**
 * TACO's compressed collectives against NCCL's bf16 ones on every visible GPU of one host, one JVM with a thread per
 * GPU (the two-GPU collective benchmark, docs/design.md §7; ready to run on a machine of two or more GPUs):
 * {@code java -cp "$CP" dev.taco.bench.GpuNcclCollectivesBench --link nvlink|no-p2p --out FILE [--command TEXT]}.
 * For bf16 tensors of 1, 4, 16, 64, 256 MiB ({@code rows x 4096}; all-gather: one rank's shard): the median of 20
 * samples (CUDA events on rank 0, after 3 warm-ups, every rank entering each sample together) of NCCL's bf16
 * collective and of TACO's ({@link DeviceCollectives} over NCCL, default plan, CUDA graphs), and TACO's relative L2
 * error on rank 0 against NCCL's fp32 collective of the same values. Prints an nccl-tests-style table; writes
 * {@code {"device", "command", "results": [{"link", "op", "ranks", "mib", "nccl_ms", "taco_ms", "speedup",
 * "taco_rel_error"}]}}. With one GPU it runs at world size 1 (a smoke test: nothing moves).
 */
public final class GpuNcclCollectivesBench {
  private GpuNcclCollectivesBench() {}

  static final int COLS = 4096;
  static final int SAMPLES = 20;
  static final int WARMUP = 3;
  static final int[] MIBS = {1, 4, 16, 64, 256};
  static final String[] OPS = {"all-reduce", "all-gather", "reduce-scatter"};

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws Exception {
    String out = null;
    String link = System.getenv("NCCL_P2P_DISABLE") != null ? "no-p2p" : "nvlink";
    String command = "bash bench/gpu-collectives-nccl.sh";
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--out" -> out = args[i + 1];
        case "--link" -> link = args[i + 1];
        case "--command" -> command = args[i + 1];
        default -> throw new IllegalArgumentException("unknown option " + args[i] + " (--out, --link, --command)");
      }
    }
    int n = Cuda.deviceCount();
    List<CudaContext> ctxs = new ArrayList<>();
    for (int d = 0; d < n; d++) ctxs.add(CudaContext.open(d));
    List<NcclCommunicator> comms = NcclCommunicator.initAll(ctxs, Duration.ofSeconds(120));
    Plan taco = Plan.of(Codecs.byName("taco"));
    System.out.printf("%d GPU(s) (%s), link %s, NCCL bf16 vs TACO %s%n", n, ctxs.get(0).name(), link, taco.describe());
    System.out.printf("%-14s %12s %12s %10s %9s %9s %10s %9s %9s %8s %10s%n", "op", "size(B)", "count", "nccl ms",
        "algbw", "busbw", "taco ms", "algbw", "busbw", "speedup", "rel err");
    List<String> rows = new ArrayList<>();
    String[] row = new String[1];
    CyclicBarrier barrier = new CyclicBarrier(n);
    for (String op : OPS) {
      for (int mib : MIBS) {
        double[][] result = new double[n][];
        List<Thread> threads = new ArrayList<>();
        Throwable[] failed = new Throwable[1];
        for (int r = 0; r < n; r++) {
          int rank = r;
          threads.add(Thread.ofPlatform().name("bench-rank-" + r).start(() -> {
            try {
              result[rank] = run(ctxs.get(rank), comms.get(rank), taco, op, mib, barrier);
            } catch (Throwable t) {
              failed[0] = t;
              barrier.reset();
            }
          }));
        }
        for (Thread t : threads) t.join();
        if (failed[0] != null) throw new IllegalStateException(op + " " + mib + " MiB failed: " + failed[0], failed[0]);
        double[] m = result[0];
        long bytes = (long) mib << 20;
        double factor = op.equals("all-reduce") ? 2.0 * (n - 1) / n : (n - 1.0) / n;
        long algBytes = op.equals("all-gather") ? bytes * n : bytes;
        System.out.printf(Locale.ROOT, "%-14s %12d %12d %10.4f %9.1f %9.1f %10.4f %9.1f %9.1f %8.2f %10.3e%n", op,
            algBytes, algBytes / 2, m[0], algBytes / (m[0] * 1e6), algBytes / (m[0] * 1e6) * factor, m[1],
            algBytes / (m[1] * 1e6), algBytes / (m[1] * 1e6) * factor, m[0] / m[1], m[2]);
        double speedup = m[0] / m[1]; // at world size 1 nothing moves: no ratio (JSON null)
        row[0] = String.format(Locale.ROOT, "{\"link\": \"%s\", \"op\": \"%s\", \"ranks\": %d, \"mib\": %d, "
            + "\"nccl_ms\": %.5f, \"taco_ms\": %.5f, \"speedup\": %s, \"taco_rel_error\": %.4e}", link, op, n, mib,
            m[0], m[1], Double.isFinite(speedup) ? String.format(Locale.ROOT, "%.3f", speedup) : "null", m[2]);
        rows.add(row[0]);
      }
    }
    for (NcclCommunicator c : comms) c.close();
    for (CudaContext c : ctxs) c.close();
    String json = "{\"device\": \"" + n + " x " + ctxs.get(0).name() + "\", \"command\": \""
        + command.replace("\"", "'")
        + "\", \"results\": [\n  " + String.join(",\n  ", rows) + "\n]}\n";
    if (out != null) {
      Path p = Path.of(out);
      if (p.getParent() != null) Files.createDirectories(p.getParent());
      Files.writeString(p, json);
      System.out.println("wrote " + p);
    }
  }

  /** One rank's samples: {median NCCL bf16 ms, median TACO ms, TACO's rel L2 error vs NCCL fp32} (rank 0's). */
  static double[] run(CudaContext ctx, NcclCommunicator comm, Plan plan, String op, int mib, CyclicBarrier barrier)
      throws Exception {
    int world = comm.worldSize();
    int rows = mib * 128;
    int outRows = op.equals("all-gather") ? rows * world : op.equals("reduce-scatter") ? rows / world : rows;
    long n = (long) rows * COLS;
    long outN = (long) outRows * COLS;
    SplittableRandom rnd = new SplittableRandom(31L * comm.rank() + mib);
    short[] x = new short[(int) n];
    float[] xf = new float[(int) n];
    for (int i = 0; i < n; i++) {
      x[i] = Bf16.encode((float) (rnd.nextGaussian() * (i % COLS % 97 == 5 ? 100 : 1)));
      xf[i] = Bf16.decode(x[i]);
    }
    ctx.makeCurrent();
    try (DeviceBuffer in = ctx.alloc(2 * n); DeviceBuffer work = ctx.alloc(2 * n);
        DeviceBuffer out = ctx.alloc(2 * outN);
        DeviceBuffer inF = ctx.alloc(4 * n); DeviceBuffer outF = ctx.alloc(4 * outN);
        CudaStream ns = ctx.createStream();
        CudaEvent a = ctx.createEvent(); CudaEvent b = ctx.createEvent();
        DeviceCollectives dc = new DeviceCollectives(new NcclTransport(comm))) {
      in.copyFromHost(x, 0, x.length, 0);
      inF.copyFromHost(xf, 0, xf.length, 0);
      double[] nccl = new double[SAMPLES];
      double[] tacoMs = new double[SAMPLES];
      for (int s = -WARMUP; s < SAMPLES; s++) {
        work.copyFrom(in, 2 * n);
        barrier.await();
        a.record(ns);
        switch (op) {
          case "all-reduce" -> comm.allReduce(work, work, n, NcclDataType.BFLOAT16, ns);
          case "all-gather" -> comm.allGather(work, out, n, NcclDataType.BFLOAT16, ns);
          default -> comm.reduceScatter(work, out, outN, NcclDataType.BFLOAT16, ns);
        }
        b.record(ns);
        comm.synchronize(ns);
        if (s >= 0) nccl[s] = a.elapsedMillisTo(b);
        work.copyFrom(in, 2 * n);
        barrier.await();
        DeviceTensor w = new DeviceTensor(work, true);
        DeviceTensor o = new DeviceTensor(out, true);
        a.record(dc.stream());
        switch (op) {
          case "all-reduce" -> dc.allReduce(plan, w, rows, COLS);
          case "all-gather" -> dc.allGather(plan, w, rows, COLS, o);
          default -> dc.reduceScatter(plan, w, rows, COLS, o);
        }
        b.record(dc.stream());
        comm.synchronize(dc.stream());
        if (s >= 0) tacoMs[s] = a.elapsedMillisTo(b);
      }
      short[] got = new short[(int) (op.equals("all-reduce") ? n : outN)];
      (op.equals("all-reduce") ? work : out).copyToHost(got, 0, got.length, 0);
      switch (op) {
        case "all-reduce" -> comm.allReduce(inF, inF, n, NcclDataType.FLOAT32, ns);
        case "all-gather" -> comm.allGather(inF, outF, n, NcclDataType.FLOAT32, ns);
        default -> comm.reduceScatter(inF, outF, outN, NcclDataType.FLOAT32, ns);
      }
      comm.synchronize(ns);
      float[] ref = new float[got.length];
      (op.equals("all-reduce") ? inF : outF).copyToHost(ref, 0, ref.length, 0);
      double e2 = 0, r2 = 0;
      for (int i = 0; i < ref.length; i++) {
        double d = Bf16.decode(got[i]) - ref[i];
        e2 += d * d;
        r2 += (double) ref[i] * ref[i];
      }
      return new double[] {GpuCollectivesBench.median(nccl), GpuCollectivesBench.median(tacoMs), Math.sqrt(e2 / r2)};
    }
  }
}
