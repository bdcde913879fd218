package dev.taco.bench;

import dev.taco.collective.CollectiveSites;
import dev.taco.collective.MirroredCommunicator;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DevicePricing;
import dev.taco.collective.device.DeviceSiteCollectives;
import dev.taco.collective.device.EmulatedTransport;
import dev.taco.collective.link.LinkProfile;
import dev.taco.collective.link.LinkProfiles;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.kernels.gpu.TwoShotGpuKernels;
import dev.taco.runtime.model.CudaOps;
import dev.taco.runtime.model.CudaTensorParallel;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
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
 * The end-to-end speed-up of TP training with compression, on one GPU under emulated links (docs/design.md §9): for
 * each model shape, TP size R and sequence parallelism on or off, rank 0 of a TP=R group ({@link EmulatedTransport}:
 * the real kernels, the bytes' flight a wire kernel held for the link model's time) trains with each codec, and for
 * each link profile the median wall time of a training step (forward, backward, gradient norm, AdamW) is taken after
 * the calibration steps. The same rank without TP communication gives t0; the Amdahl ceiling of a codec of byte ratio b
 * over {@code none}'s step t is {@code t / (t0 + (t - t0) b)}. Every figure is of an EMULATED link, and says so.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.GpuE2E [--out FILE] [--steps N] [--tp 2,4,8] [--sp false,true]
 * [--codecs none,taco,fp8-tensor,auto] [--links h200-nvlink-2,h200-nopeer-2,...] [--no-wire] D,L,H,T,B ...}
 * ({@code --no-wire}: without the wire kernel's accuracy table); writes
 * {@code {"device", "command", "emulated": true, "results": [{"profile", "tp", "sp", "hidden", "codec", "step_ms",
 * "gpu_ms", "nocomm_ms", "bytes_per_step", "speedup", "ceiling", "fraction_of_ceiling"}], "wire": [...]}}.
 */
public final class GpuE2E {
  private GpuE2E() {}

  /** Steps before timing: the first compiles the kernels, the calibration's follow. */
  static final int WARMUP = 4;

  /** One measured configuration. */
  record Row(String profile, int tp, boolean sp, int[] shape, String codec, double stepMs, double gpuMs,
      double nocommMs, long bytesPerStep, String plans) {}

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws Exception {
    String out = null;
    int steps = 8;
    List<Integer> tps = List.of(2, 4, 8);
    List<Boolean> sps = List.of(false, true);
    List<String> codecs = List.of("none", "taco", "fp8-tensor", "auto");
    List<String> links = LinkProfiles.BUILT_IN;
    List<int[]> shapes = new ArrayList<>();
    boolean wireCheck = true;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--no-wire" -> wireCheck = false;
        case "--out" -> out = args[++i];
        case "--steps" -> steps = Integer.parseInt(args[++i]);
        case "--tp" -> tps = Arrays.stream(args[++i].split(",")).map(Integer::valueOf).toList();
        case "--sp" -> sps = Arrays.stream(args[++i].split(",")).map(Boolean::valueOf).toList();
        case "--codecs" -> codecs = List.of(args[++i].split(","));
        case "--links" -> links = List.of(args[++i].split(","));
        default -> shapes.add(Arrays.stream(args[i].split(",")).mapToInt(Integer::parseInt).toArray());
      }
    }
    if (shapes.isEmpty()) shapes.add(new int[] {768, 12, 12, 1024, 8});
    List<LinkProfile> profiles = links.stream().map(LinkProfiles::byName).toList();
    List<Row> rows = new ArrayList<>();
    List<String> wire = new ArrayList<>();
    try (CudaContext ctx = CudaContext.open(0)) {
      if (wireCheck) wire.addAll(wireAccuracy(ctx));
      for (int[] s : shapes) {
        for (int tp : tps) {
          if (s[2] % tp != 0) {
            System.out.printf("skipped: TP=%d does not divide the %d heads of D=%d%n", tp, s[2], s[0]);
            continue;
          }
          for (boolean sp : sps) {
            double nocomm = measure(ctx, s, tp, sp, "none", false, List.of(profiles.get(0)), steps).get(0).stepMs();
            for (String codec : codecs) {
              for (Row r : measure(ctx, s, tp, sp, codec, true, profiles, steps)) {
                rows.add(new Row(r.profile, tp, sp, s, codec, r.stepMs, r.gpuMs, nocomm, r.bytesPerStep, r.plans));
                System.out.printf(Locale.ROOT, "emulated link %-14s D=%d T=%d B=%d TP=%d SP=%s %-10s step %.2f ms "
                    + "(gpu %.2f, no TP comm %.2f), %d B/step %s%n", r.profile, s[0], s[3], s[4], tp, sp, codec,
                    r.stepMs, r.gpuMs, nocomm, r.bytesPerStep, r.plans);
              }
              if (out != null) Files.writeString(Path.of(out), json(ctx, args, profiles, rows, wire)); // so far
            }
          }
        }
      }
      String json = json(ctx, args, profiles, rows, wire);
      if (out != null) Files.writeString(Path.of(out), json);
      System.out.print(json);
    }
  }

  private static String json(CudaContext ctx, String[] args, List<LinkProfile> profiles, List<Row> rows,
      List<String> wire) {
    return "{\"device\": \"" + ctx.name() + "\", \"command\": \"GpuE2E " + String.join(" ", args)
        + "\", \"emulated\": true, \"link_sources\": {" + sources(profiles) + "},\n \"results\": [\n  "
        + String.join(",\n  ", results(rows)) + "\n],\n \"wire\": [\n  " + String.join(",\n  ", wire) + "\n]}\n";
  }

  private static String sources(List<LinkProfile> profiles) {
    List<String> s = new ArrayList<>();
    for (LinkProfile p : profiles) s.add("\"" + p.name() + "\": \"" + p.source().replace("\"", "'") + "\"");
    return String.join(", ", s);
  }

  /** The results with each codec's speed-up over {@code none}'s step on the same profile, and its Amdahl ceiling. */
  static List<String> results(List<Row> rows) {
    Map<String, Row> none = new LinkedHashMap<>();
    for (Row r : rows) if (r.codec.equals("none")) none.put(key(r), r);
    List<String> out = new ArrayList<>();
    for (Row r : rows) {
      Row n = none.get(key(r));
      double speedup = n == null ? Double.NaN : n.stepMs / r.stepMs;
      double b = n == null ? Double.NaN : (double) r.bytesPerStep / n.bytesPerStep;
      double ceiling = n == null ? Double.NaN : n.stepMs / (r.nocommMs + (n.stepMs - r.nocommMs) * b);
      out.add(String.format(Locale.ROOT, "{\"profile\": \"%s\", \"tp\": %d, \"sp\": %s, \"hidden\": %d, \"layers\": %d,"
          + " \"heads\": %d, \"seq\": %d, \"micro_batch\": %d, \"codec\": \"%s\", \"step_ms\": %.4f, \"gpu_ms\": %.4f,"
          + " \"nocomm_ms\": %.4f, \"bytes_per_step\": %d, \"byte_ratio\": %s, \"speedup\": %s, \"ceiling\": %s,"
          + " \"fraction_of_ceiling\": %s, \"plans\": \"%s\"}", r.profile, r.tp, r.sp, r.shape[0], r.shape[1],
          r.shape[2], r.shape[3],
          r.shape[4], r.codec, r.stepMs, r.gpuMs, r.nocommMs, r.bytesPerStep, num(b), num(speedup), num(ceiling),
          num((speedup - 1) / (ceiling - 1)), r.plans));
    }
    return out;
  }

  /** A JSON number with 4 decimals, or null where there is none (no baseline; none's own fraction of its ceiling). */
  static String num(double v) {
    return Double.isFinite(v) ? String.format(Locale.ROOT, "%.4f", v) : "null";
  }

  private static String key(Row r) {
    return r.profile + "/" + r.tp + "/" + r.sp + "/" + Arrays.toString(r.shape);
  }

  /**
   * Rank 0 of a TP={@code tp} group of the shape {@code s} = (D, L, H, T, B) on an emulated link, trained with
   * {@code codec} (bf16, flash attention; TP collectives off unless {@code comm}): after {@link #WARMUP} steps, per
   * profile one more warm-up step and {@code steps} timed ones; the median wall time and GPU span of a step.
   */
  static List<Row> measure(CudaContext ctx, int[] s, int tp, boolean sp, String codec, boolean comm,
      List<LinkProfile> profiles, int steps) {
    GptConfig cfg = new GptConfig(256, s[3], s[1], s[2], s[0], tp, sp);
    int b = s[4];
    SplittableRandom rng = new SplittableRandom(1);
    int[] in = new int[b * s[3]], tgt = new int[in.length];
    for (int i = 0; i < in.length; i++) {
      in[i] = rng.nextInt(256);
      tgt[i] = rng.nextInt(256);
    }
    List<Row> out = new ArrayList<>();
    try (EmulatedTransport link = new EmulatedTransport(ctx, tp, profiles.get(0));
        DeviceCollectives dc = new DeviceCollectives(link);
        CudaOps ops = new CudaOps(ctx, dc.stream(), CudaOps.Precision.BF16);
        CudaEvent start = ctx.createEvent(); CudaEvent end = ctx.createEvent()) {
      CollectiveSites sites = new CollectiveSites(new MirroredCommunicator(tp), codec, 2, 0,
          TwoShotGpuKernels.MAX_COLS);
      DevicePricing pricing = new DevicePricing(ctx, tp, profiles.get(0));
      if (sites.auto()) sites.pricing(pricing);
      CudaTensorParallel tpc = CudaTensorParallel.of(ops, new DeviceSiteCollectives(dc, sites), comm);
      Gpt<DeviceBuffer> model = new Gpt<>(cfg, ops, tpc, 0, b, 1);
      int n = 0;
      for (int i = 0; i < WARMUP; i++) step(model, in, tgt, ++n);
      for (LinkProfile p : profiles) {
        link.link(p);
        if (sites.auto()) sites.reprice(pricing.withLink(p)); // auto chooses again for this link
        step(model, in, tgt, ++n);
        double[] wall = new double[steps], gpu = new double[steps];
        long bytes0 = tpc.bytesSent();
        for (int i = 0; i < steps; i++) {
          long t0 = System.nanoTime();
          start.record(ops.stream());
          step(model, in, tgt, ++n);
          end.record(ops.stream());
          end.synchronize();
          wall[i] = (System.nanoTime() - t0) / 1e6;
          gpu[i] = start.elapsedMillisTo(end);
        }
        Arrays.sort(wall);
        Arrays.sort(gpu);
        String plans = sites.plans().values().stream().map(c -> c.codec() + " " + c.layout())
            .distinct().sorted().collect(java.util.stream.Collectors.joining("; "));
        out.add(new Row(p.name(), tp, sp, s, codec, wall[steps / 2], gpu[steps / 2], Double.NaN,
            (tpc.bytesSent() - bytes0) / steps, plans));
      }
    }
    return out;
  }

  private static void step(Gpt<DeviceBuffer> model, int[] in, int[] tgt, int n) {
    model.trainStep(in, tgt);
    float norm = (float) Math.sqrt(model.gradSquaredNorm(true));
    model.update(1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, norm > 1f ? 1f / norm : 1f, n);
  }

  /**
   * The wire kernel against its target: one exchange of R = 8 slots of 2^k bytes per profile, alone on a stream, by
   * CUDA events (median of 9): {@code {"profile", "slot_bytes", "target_ms", "measured_ms", "error"}}.
   */
  static List<String> wireAccuracy(CudaContext ctx) {
    List<String> out = new ArrayList<>();
    dev.taco.kernels.cuda.SpinKernel spin = new dev.taco.kernels.cuda.SpinKernel(ctx);
    for (String name : List.of("h200-nopeer-2", "pcie5-8", "ib-ndr", "h100-nvlink-8")) {
      LinkProfile p = LinkProfiles.byName(name);
      try (EmulatedTransport t = new EmulatedTransport(ctx, 8, p); var stream = ctx.createStream();
          CudaEvent a = ctx.createEvent(); CudaEvent z = ctx.createEvent()) {
        for (long slot : new long[] {64L << 10, 1L << 20, 4L << 20, 16L << 20}) {
          DeviceBuffer send = ctx.alloc(8 * slot), recv = ctx.alloc(8 * slot);
          double[] ms = new double[9];
          for (int i = -1; i < ms.length; i++) {
            spin.enqueue(stream, 1_000_000); // the exchange enqueued before the GPU reaches it: events time the kernel
            a.record(stream);
            t.allToAll(send, recv, slot, stream);
            z.record(stream);
            z.synchronize();
            if (i >= 0) ms[i] = a.elapsedMillisTo(z);
          }
          Arrays.sort(ms);
          double target = t.phaseNanos(slot) / 1e6, got = ms[ms.length / 2];
          out.add(String.format(Locale.ROOT, "{\"profile\": \"%s\", \"slot_bytes\": %d, \"target_ms\": %.4f, "
              + "\"measured_ms\": %.4f, \"error\": %.4f}", name, slot, target, got, got / target - 1));
          System.out.printf(Locale.ROOT, "wire kernel, emulated link %s, 8 slots of %d B: target %.4f ms, measured "
              + "%.4f ms (%+.1f %%)%n", name, slot, target, got, 100 * (got / target - 1));
          send.close();
          recv.close();
        }
      }
    }
    return out;
  }
}
