package dev.taco.bench;

import dev.taco.collective.CollectiveKind;

import dev.taco.codec.Codecs;
import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceTensor;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * The device collectives' per-rank GPU time on ONE GPU (docs/design.md §4, §7):
 * {@code java -cp "$CP" dev.taco.bench.GpuCollectivesBench --out FILE [--command TEXT] [--links 270,29,50]}.
 *
 * <p>For bf16 tensors of 1, 4, 16, 64 and 256 MiB ({@code rows x 4096}) and R = 2, 4, 8, with the default TACO plan
 * (E4M3, G = 64, Hadamard): the kernels rank 0 runs in a compressed all-reduce (compress the R-1 peers' chunks,
 * decompress-reduce-recompress its own, decompress all R; in pipelined pieces of at least 16 MiB), all-gather (of a {@code rows x
 * 4096} shard per rank) and reduce-scatter: {@code kernel_ms} is the GPU time of that rank's whole sequence (CUDA
 * events around it on its stream, a 5 ms spin kernel ahead of each sample so the host has enqueued every launch before
 * the GPU gets to it), beside the sum of each kernel's own event times ({@link DeviceCollectives#lastTaskMillis},
 * which also counts every kernel's launch latency inside the GPU, a few µs each) and its split by kind; median
 * over 20 samples after 3 warm-ups, inputs rotated over at least 128 MiB so L2 does not hold them. The peers' payloads
 * come from a {@link LoopbackTransport} (this rank's own payloads, copied once), so no other rank and no copy competes
 * for the GPU; the copies a {@code device-local} exchange makes ((R-1) slots per exchange) are timed apart as
 * {@code moves_ms} (back-to-back device-to-device copies of the same sizes). Beside each: the HBM
 * traffic floor of the kernel sequence at the device-to-device copy bandwidth measured in the same run, and a labelled
 * projection ({@link LinkProjection}) of TACO's collective against NCCL's bf16 one over links of the given bus
 * bandwidths. Prints an nccl-tests-style table and writes bench/results/gpu-collectives-1gpu.json's form.
 */
public final class GpuCollectivesBench {
  private GpuCollectivesBench() {}

  /** Spins ahead of each sample (so the host has enqueued every launch before the GPU gets to it). */
  private static dev.taco.kernels.cuda.SpinKernel spin;

  static final int COLS = 4096;
  static final int SAMPLES = 20;
  static final int WARMUP = 3;
  static final int[] MIBS = {1, 4, 16, 64, 256};
  static final int[] RANKS = {2, 4, 8};
  static final CollectiveKind[] OPS = CollectiveKind.values();

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws Exception {
    String out = null;
    String command = "bash bench/gpu-collectives.sh";
    double[] links = {270, 29, 50};
    for (int i = 0; i + 1 < args.length; i += 2) {
      switch (args[i]) {
        case "--out" -> out = args[i + 1];
        case "--command" -> command = args[i + 1];
        case "--links" -> links = Arrays.stream(args[i + 1].split(",")).mapToDouble(Double::parseDouble).toArray();
        default -> throw new IllegalArgumentException("unknown option " + args[i] + " (--out FILE, --command TEXT,"
            + " --links GBPS,...)");
      }
    }
    Plan plan = Plan.of(Codecs.byName("taco"));
    try (CudaContext ctx = CudaContext.open(0)) {
      spin = new dev.taco.kernels.cuda.SpinKernel(ctx);
      double copyGbps = copyBandwidth(ctx);
      System.out.printf(Locale.ROOT, "device: %s, D2D copy %.0f GB/s (256 MiB, read + write); plan %s%n", ctx.name(),
          copyGbps, plan.describe());
      System.out.printf("%-14s %5s %6s %10s %10s %8s %10s %12s%s%n", "op", "ranks", "MiB", "kernel ms", "floor ms",
          "floor/k", "moves ms", "wire B/rank", projectionHeader(links));
      List<String> rows = new ArrayList<>();
      for (CollectiveKind op : OPS) {
        for (int r : RANKS) {
          for (int mib : MIBS) {
            rows.add(measure(ctx, plan, op, r, mib, copyGbps, links, DeviceCollectives.DEFAULT_PIECE_BYTES));
          }
        }
      }
      System.out.println("the same without pipelining (one piece per rank chunk), and in 4 MiB pieces:");
      for (int mib : new int[] {64, 256}) {
        rows.add(measure(ctx, plan, CollectiveKind.ALL_REDUCE, 2, mib, copyGbps, links, Long.MAX_VALUE));
        rows.add(measure(ctx, plan, CollectiveKind.ALL_REDUCE, 2, mib, copyGbps, links, 4L << 20));
      }
      String json = "{\"device\": \"" + ctx.name() + "\", \"command\": \"" + command.replace("\"", "'")
          + "\", \"copy_gbps\": " + String.format(Locale.ROOT, "%.1f", copyGbps) + ", \"plan\": \"" + plan.describe()
          + "\", \"cols\": " + COLS + ", \"piece_bytes\": " + DeviceCollectives.DEFAULT_PIECE_BYTES
          + ", \"note\": \"kernel_ms: GPU time of one rank's kernel sequence (median of " + SAMPLES
          + ", CUDA events around"
          + " it; kernel_sum_ms: the sum of each kernel's own events); moves_ms: the"
          + " device-local copies of its exchanges, apart; floor_ms: the kernels' HBM bytes at copy_gbps; projected: NOT"
          + " measured, bytes per rank over the link's bus bandwidth (nccl-tests definition), TACO serial (kernels +"
          + " wire)\", \"results\": [\n  " + String.join(",\n  ", rows) + "\n]}\n";
      if (out != null) {
        Path p = Path.of(out);
        if (p.getParent() != null) Files.createDirectories(p.getParent());
        Files.writeString(p, json);
        System.out.println("wrote " + p);
      }
    }
  }

  private static String projectionHeader(double[] links) {
    StringBuilder b = new StringBuilder();
    for (double l : links) b.append(String.format(Locale.ROOT, " | %4.0f GB/s: nccl ms  taco ms  x", l));
    return b.toString();
  }

  /** Median device time of a 256 MiB {@code cuMemcpyDtoDAsync}, as read + write bandwidth. */
  static double copyBandwidth(CudaContext ctx) {
    long bytes = 256L << 20;
    try (DeviceBuffer a = ctx.alloc(bytes); DeviceBuffer b = ctx.alloc(bytes); CudaStream s = ctx.createStream();
        CudaEvent start = ctx.createEvent(); CudaEvent end = ctx.createEvent()) {
      a.memset((byte) 1);
      double[] ms = new double[SAMPLES];
      for (int i = -WARMUP; i < SAMPLES; i++) {
        start.record(s);
        b.copyFromAsync(a, bytes, s);
        end.record(s);
        end.synchronize();
        if (i >= 0) ms[i] = start.elapsedMillisTo(end);
      }
      return 2.0 * bytes / (median(ms) * 1e6);
    }
  }

  /** One row: op at R ranks on a {@code mib} MiB bf16 tensor; prints it and returns its JSON object. */
  static String measure(CudaContext ctx, Plan plan, CollectiveKind op, int world, int mib, double copyGbps,
      double[] links,
      long pieceBytes) {
    int rows = mib * 128; // rows x 4096 bf16 = mib MiB (all-gather: one rank's shard)
    long tensor = (long) rows * COLS * 2;
    int nbuf = (int) Math.max(2, Math.min(64, (128L << 20) / tensor));
    List<DeviceBuffer> buffers = new ArrayList<>();
    try (LoopbackTransport t = new LoopbackTransport(ctx, world);
        DeviceCollectives dc = new DeviceCollectives(t, pieceBytes, false, false);
        CudaEvent first = ctx.createEvent(); CudaEvent last = ctx.createEvent()) {
      DeviceTensor[] in = new DeviceTensor[nbuf];
      DeviceTensor[] outs = new DeviceTensor[nbuf];
      short[] host = input(rows, mib);
      long outBytes = op == CollectiveKind.ALL_GATHER ? tensor * world
          : op == CollectiveKind.REDUCE_SCATTER ? tensor / world : 0;
      for (int i = 0; i < nbuf; i++) {
        in[i] = new DeviceTensor(track(buffers, ctx.alloc(tensor)), true);
        in[i].buffer().copyFromHost(host, 0, host.length, 0);
        outs[i] = outBytes == 0 ? in[i] : new DeviceTensor(track(buffers, ctx.alloc(outBytes)), true);
      }
      double[] kernel = new double[SAMPLES];
      double[] sequence = new double[SAMPLES];
      double[] moves = new double[SAMPLES];
      double[][] kinds = new double[3][SAMPLES]; // compress, reduce, decompress
      long bytesBefore = 0;
      for (int s = -WARMUP; s < SAMPLES; s++) {
        int i = Math.floorMod(s, nbuf);
        bytesBefore = dc.bytesSent();
        spin.enqueue(dc.stream(), 5_000_000L);
        first.record(dc.stream());
        switch (op) {
          case ALL_REDUCE -> dc.allReduce(plan, in[i], rows, COLS);
          case ALL_GATHER -> dc.allGather(plan, in[i], rows, COLS, outs[i]);
          default -> dc.reduceScatter(plan, in[i], rows, COLS, outs[i]);
        }
        last.record(dc.stream());
        dc.synchronize();
        if (s >= 0) {
          sequence[s] = first.elapsedMillisTo(last);
          double k = 0;
          for (Map.Entry<String, Float> e : dc.lastTaskMillis().entrySet()) {
            String n = e.getKey();
            if (n.startsWith("all-to-all") || n.startsWith("all-gather")) {
              continue; // no-ops after the first execution (LoopbackTransport)
            }
            k += e.getValue();
            kinds[n.startsWith("compress") ? 0 : n.startsWith("reduce") ? 1 : 2][s] += e.getValue();
          }
          kernel[s] = k;
        }
      }
      long wire = dc.bytesSent() - bytesBefore;
      int perCall = t.slotBytes().size() / (SAMPLES + WARMUP);
      double movesMs = moves(ctx, world, t.slotBytes().subList(0, perCall));
      Arrays.fill(moves, movesMs);
      double k = median(sequence);
      double kernelSum = median(kernel);
      double floor = floorBytes(op, world, rows, plan) / (copyGbps * 1e6);
      StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "%-14s %5d %6d %10.4f %10.4f %8.2f %10.4f %12d",
          op, world, mib, k, floor, floor / k, median(moves), wire));
      List<String> proj = new ArrayList<>();
      for (double l : links) {
        LinkProjection p = LinkProjection.of(l, LinkProjection.ncclBytesPerRank(op, world, tensor), wire, k);
        line.append(String.format(Locale.ROOT, " | %14.4f %8.4f %5.2f", p.ncclBf16Ms(), p.tacoMs(), p.speedup()));
        proj.add(String.format(Locale.ROOT, "{\"link_gbps\": %.0f, \"nccl_bf16_ms\": %.5f, \"taco_ms\": %.5f, "
            + "\"taco_overlapped_ms\": %.5f, \"speedup\": %.3f}", l, p.ncclBf16Ms(), p.tacoMs(), p.tacoOverlappedMs(),
            p.speedup()));
      }
      System.out.println(line);
      if (op == CollectiveKind.ALL_REDUCE && world == 2 && mib == 64
          && pieceBytes == DeviceCollectives.DEFAULT_PIECE_BYTES) {
        System.out.printf(Locale.ROOT,
            "acceptance: all-reduce kernels at 64 MiB, R = 2: %.4f ms per rank (target <= 0.15;"
                + " floor %.4f); sum of the kernels' own event times %.4f: compress %.4f,"
                + " decompress-reduce-recompress %.4f, decompress %.4f%n",
            k, floor, kernelSum, median(kinds[0]), median(kinds[1]), median(kinds[2]));
      }
      return String.format(Locale.ROOT, "{\"op\": \"%s\", \"ranks\": %d, \"mib\": %d, \"piece_bytes\": %s, "
          + "\"rows\": %d, \"cols\": %d, "
          + "\"kernel_ms\": %.5f, \"kernel_sum_ms\": %.5f, \"compress_ms\": %.5f, \"reduce_ms\": %.5f, "
          + "\"decompress_ms\": %.5f, "
          + "\"floor_ms\": %.5f, \"moves_ms\": %.5f, \"wire_bytes_per_rank\": %d, "
          + "\"nccl_bf16_bytes_per_rank\": %d, \"projected\": [%s]}", op, world, mib,
          pieceBytes == Long.MAX_VALUE ? "null" : String.valueOf(pieceBytes), rows, COLS, k, kernelSum,
          median(kinds[0]),
          median(kinds[1]), median(kinds[2]), floor, median(moves), wire, LinkProjection.ncclBytesPerRank(op, world,
              tensor),
          String.join(", ", proj));
    } finally {
      buffers.forEach(DeviceBuffer::close);
    }
  }

  /** Median device time of the copies of one collective's exchanges: slots of each size, back to back. */
  static double moves(CudaContext ctx, int world, List<Long> slots) {
    long max = slots.stream().mapToLong(Long::longValue).max().orElse(16);
    try (DeviceBuffer a = ctx.alloc(max); DeviceBuffer b = ctx.alloc(max); CudaStream s = ctx.createStream();
        CudaEvent start = ctx.createEvent(); CudaEvent end = ctx.createEvent()) {
      a.memset((byte) 3);
      double[] ms = new double[SAMPLES];
      for (int i = -WARMUP; i < SAMPLES; i++) {
        spin.enqueue(s, 2_000_000L);
        start.record(s);
        for (long bytes : slots) {
          for (int p = 1; p < world; p++) {
            b.copyFromAsync(a, bytes, s);
          }
        }
        end.record(s);
        end.synchronize();
        if (i >= 0) ms[i] = start.elapsedMillisTo(end);
      }
      return median(ms);
    }
  }

  /**
   * Bytes the kernels of one rank read and write in device memory, each input read once and each output written once:
   * bf16 tensor rows in and out, payloads (headerless bodies) in and out.
   */
  static double floorBytes(CollectiveKind op, int world, int rows, Plan plan) {
    double elems = (double) rows * COLS;
    double p = dev.taco.kernels.gpu.TwoShotGpuKernels.bodyBytes(8, COLS, plan.codec().groupSize()) / (8.0 * COLS);
    return switch (op) {
      // compress R-1 chunks (read bf16, write payloads); reduce (own bf16 + R-1 payloads in, one payload out);
      // decompress R payloads into the whole bf16 tensor
      case ALL_REDUCE -> (world - 1) * elems / world * (2 + p) + elems / world * (2 + (world - 1) * p + p)
          + elems * (p + 2);
      // compress the shard, decompress R shards
      case ALL_GATHER -> elems * (2 + p) + world * elems * (p + 2);
      // compress R-1 chunks; reduce own chunk + R-1 payloads into the bf16 shard
      default -> (world - 1) * elems / world * (2 + p) + elems / world * (2 + (world - 1) * p + 2);
    };
  }

  /** Gaussian bf16 values with outlier channels (x 100), fixed seed per size. */
  static short[] input(int rows, int seed) {
    SplittableRandom rnd = new SplittableRandom(seed);
    short[] x = new short[rows * COLS];
    for (int i = 0; i < x.length; i++) {
      x[i] = Bf16.encode((float) (rnd.nextGaussian() * (i % COLS % 97 == 5 ? 100 : 1)));
    }
    return x;
  }

  private static DeviceBuffer track(List<DeviceBuffer> all, DeviceBuffer b) {
    all.add(b);
    return b;
  }

  static double median(double[] a) {
    double[] s = a.clone();
    Arrays.sort(s);
    return (s[(s.length - 1) / 2] + s[s.length / 2]) / 2;
  }
}
