package dev.taco.bench;

import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaEvent;
import dev.taco.kernels.cuda.DeviceBuffer;
import dev.taco.runtime.model.CudaOps;
import dev.taco.runtime.model.CudaTensorParallel;
import dev.taco.runtime.model.Gpt;
import dev.taco.runtime.model.GptConfig;
import dev.taco.runtime.model.OpTimes;
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
 * Times one training step of the GPU backend ({@link CudaOps}, TP = 1) per model shape, as
 * {@code ../shared/tools/torch_gpt_step.py} times PyTorch's (docs/design.md §7): vocabulary 256, embeddings, tied LM
 * head, cross-entropy, AdamW with global-norm clipping. A step is {@code Gpt.trainStep} (zero-grad, forward, backward:
 * one CUDA graph from the third step on; the loss comes back to the host), the gradient norm (back to the host) and the
 * update: what {@code taco train} does. Median of
 * {@link #SAMPLES} steps by CUDA events on the backend's stream after {@link #WARMUP} warm-up steps (the first compiles
 * the kernels).
 *
 * <p>A second pass of the same steps through {@link OpTimes} gives the breakdown per category and per operation.
 *
 * <p>{@code java -cp "$CP" dev.taco.bench.GpuTrainStep [--out FILE] [--precision bf16|fp32] [--causal-block-min N]
 * [--no-flash] D,L,H,T,B ...} (bf16 by default: {@link CudaOps.Precision}; {@code --causal-block-min}: see
 * {@link CudaOps#causalBlockMinimum}, e.g. 1000000 for the one-block attention; {@code --no-flash}: attention as GEMMs
 * even where {@link CudaOps#flashAttention(int)} would take flash attention); writes {@code {"device", "mode", "results": [{"hidden", "layers", "heads",
 * "seq", "micro_batch", "tp", "ms", "breakdown", "operations"}]}}.
 */
public final class GpuTrainStep {
  private GpuTrainStep() {}

  static final int SAMPLES = 10;
  static final int WARMUP = 3;
  /** {@code --causal-block-min}: the backend's smallest causal attention block (0: its default). */
  static int causalBlockMin;
  /** {@code --no-flash}: attention as GEMMs over (B,NH,T,T) matrices instead of flash attention. */
  static boolean noFlash;

  /** Entry point; see the class doc. */
  public static void main(String[] args) throws Exception {
    String out = null;
    CudaOps.Precision precision = CudaOps.Precision.BF16;
    causalBlockMin = 0;
    List<int[]> shapes = new ArrayList<>();
    for (int i = 0; i < args.length; i++) {
      if (args[i].equals("--out")) out = args[++i];
      else if (args[i].equals("--precision")) precision = CudaOps.Precision.valueOf(args[++i].toUpperCase(Locale.ROOT));
      else if (args[i].equals("--causal-block-min")) causalBlockMin = Integer.parseInt(args[++i]);
      else if (args[i].equals("--no-flash")) noFlash = true;
      else shapes.add(Arrays.stream(args[i].split(",")).mapToInt(Integer::parseInt).toArray());
    }
    if (shapes.isEmpty()) shapes.add(new int[] {128, 4, 4, 128, 8});
    List<String> rows = new ArrayList<>();
    try (CudaContext ctx = CudaContext.open(0)) {
      for (int[] s : shapes) {
        double ms = time(ctx, precision, s, null, null);
        Map<String, Double> parts = new LinkedHashMap<>(), ops = new LinkedHashMap<>();
        time(ctx, precision, s, parts, ops);
        System.out.printf(Locale.ROOT, "D=%d L=%d H=%d T=%d B=%d: %.3f ms/step; per step by CUDA events: %s; by "
            + "operation: %s%n", s[0], s[1], s[2], s[3], s[4], ms, parts, ops);
        rows.add(String.format(Locale.ROOT, "{\"hidden\": %d, \"layers\": %d, \"heads\": %d, \"seq\": %d, "
            + "\"micro_batch\": %d, \"tp\": 1, \"causal_block_min\": %d, \"attention\": \"%s\", \"ms\": %.4f, "
            + "\"breakdown\": {%s}, \"operations\": {%s}}", s[0], s[1], s[2], s[3], s[4], causalBlockMin,
            attention(ctx, precision, s), ms, json(parts), json(ops)));
      }
      String json = "{\"device\": \"" + ctx.name() + "\", \"mode\": \"" + precision + " (CudaOps)\", \"results\": [\n  "
          + String.join(",\n  ", rows) + "\n]}\n";
      if (out != null) Files.writeString(Path.of(out), json);
      System.out.print(json);
    }
  }

  /** How the shape's attention runs: {@code flash}, or {@code gemm} ((B,NH,T,T) matrices). */
  private static String attention(CudaContext ctx, CudaOps.Precision precision, int[] s) {
    return !noFlash && CudaOps.flashAttention(precision, s[0] / s[2], ctx.computeCapabilityMajor()) ? "flash" : "gemm";
  }

  private static String json(Map<String, Double> m) {
    StringBuilder b = new StringBuilder();
    m.forEach((k, v) -> b.append(b.isEmpty() ? "" : ", ").append(String.format(Locale.ROOT, "\"%s\": %.4f", k, v)));
    return b.toString();
  }

  /**
   * Median step time in ms of the shape {@code s} = (D, L, H, T, B); with {@code parts} non-null, the steps run
   * through {@link OpTimes} instead and {@code parts} / {@code ops} get each category's / operation's mean ms per step
   * (the events around every operation cost a little, so the headline figure comes from a run without them).
   */
  static double time(CudaContext ctx, CudaOps.Precision precision, int[] s, Map<String, Double> parts,
      Map<String, Double> ops) {
    int d = s[0], layers = s[1], heads = s[2], t = s[3], b = s[4];
    GptConfig cfg = new GptConfig(256, t, layers, heads, d, 1);
    SplittableRandom rng = new SplittableRandom(1);
    int[] in = new int[b * t], tgt = new int[b * t];
    for (int i = 0; i < in.length; i++) {
      in[i] = rng.nextInt(256);
      tgt[i] = rng.nextInt(256);
    }
    try (CudaOps backend = new CudaOps(ctx, precision); CudaEvent start = ctx.createEvent();
        CudaEvent end = ctx.createEvent();
        OpTimes timer = parts == null ? null : OpTimes.of(backend, CudaTensorParallel.alone(backend))) {
      if (causalBlockMin > 0) backend.causalBlockMinimum(causalBlockMin);
      if (noFlash) backend.flashAttention(false);
      Gpt<DeviceBuffer> model = timer == null ? Gpt.gpu(cfg, backend, b, 1)
          : new Gpt<>(cfg, timer.ops(), timer.tp(), 0, b, 1);
      double[] ms = new double[SAMPLES];
      for (int i = -WARMUP; i < SAMPLES; i++) {
        start.record(backend.stream());
        model.trainStep(in, tgt); // from the third step on one CUDA graph (not under OpTimes)
        float norm = (float) Math.sqrt(model.gradSquaredNorm(true));
        model.update(1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, norm > 1f ? 1f / norm : 1f, i + WARMUP + 1);
        end.record(backend.stream());
        end.synchronize();
        if (i >= 0) ms[i] = start.elapsedMillisTo(end);
        if (timer != null) {
          timer.collect();
          if (i == -1) timer.reset(); // the warm-up steps do not count
        }
      }
      if (timer != null) {
        timer.totals().forEach((k, v) -> parts.put(k, v / SAMPLES));
        timer.methods().forEach((k, v) -> ops.put(k, v / SAMPLES));
      }
      Arrays.sort(ms);
      return ms[SAMPLES / 2];
    }
  }
}
