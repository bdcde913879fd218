package dev.taco.runtime.model;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.collective.Communicator;
import dev.taco.collective.LocalGroup;
import dev.taco.codec.Codecs;
import dev.taco.collective.Plan;
import dev.taco.collective.device.DeviceCollectives;
import dev.taco.collective.device.DeviceSiteCollectives;
import dev.taco.collective.device.DeviceLocalTransport;
import dev.taco.collective.device.DeviceOutOfMemoryException;
import dev.taco.kernels.cuda.Cublas;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The GPU backend ({@link CudaOps}, fp32 mode) against the CPU runtime ({@link CpuOps}) on a small GPT at TP = 1
 * (skipped with the reason where there is no GPU or no cuBLAS): the same weights and fresh random tokens (seed
 * {@code -Dtaco.seed}, printed), then for three steps the loss, every parameter tensor's gradient and the gradient norm
 * must agree within {@link #BOUND} relative (the L2 norm of the difference over the CPU tensor's L2 norm, per tensor),
 * and the parameters after AdamW with clipping, both updated from the CPU's gradients, bit for bit. The GEMMs and the
 * row reductions differ in summation order (cuBLAS against the Vector-API GEMM; a warp per row against a loop); the
 * formulas are the same. In bf16 mode (GEMM inputs rounded to bf16) the bound is {@link #BF16_LOSS} on the loss and
 * {@link #BF16_GRAD} relative L2 on the whole gradient (measured values printed). At TP = 2 and 4, ranks as threads sharing the GPU ({@code device-local}) with exact collectives give the
 * TP = 1 loss and gradients within the same bound; a TACO-compressed TP = 2 step stays finite and within 1 % (loss) and
 * 10 % (gradients, relative L2) of the exact one. The fp32 and bf16 comparisons run the attention in 4 causal blocks
 * ({@link CudaOps#causalBlock}), the others in one.
 */
@Tag("gpu")
class GptCudaGpuTest {
  static final double BOUND = 1e-4;
  /** bf16 mode: relative error of the loss against the CPU's fp32 step. */
  static final double BF16_LOSS = 1e-2;
  /** bf16 mode: relative L2 error of the whole gradient against the CPU's fp32 step. */
  static final double BF16_GRAD = 2e-2;
  static final long SEED = Long.getLong("taco.seed", System.nanoTime());
  static final int B = 3;
  static final GptConfig CFG = new GptConfig(256, 64, 2, 4, 64, 1);

  private static CudaContext ctx;

  @BeforeAll
  static void open() {
    if (Cuda.available() && Cublas.available()) {
      ctx = CudaContext.open(0);
      System.out.println("GptCudaGpuTest on " + ctx + ", seed " + SEED);
    }
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  static void assumeGpu() {
    assumeTrue(ctx != null, Cuda.unavailableReason() + "; " + Cublas.unavailableReason());
  }

  static int[][] batch(SplittableRandom rng) {
    int[] in = new int[B * CFG.seqLength()], tgt = new int[in.length];
    for (int i = 0; i < in.length; i++) {
      in[i] = rng.nextInt(CFG.vocabSize());
      tgt[i] = rng.nextInt(CFG.vocabSize());
    }
    return new int[][] {in, tgt};
  }

  static double relL2(float[] got, float[] want, int off, int n) {
    double d = 0, w = 0;
    for (int i = off; i < off + n; i++) {
      assertThat(Float.isFinite(got[i])).as("element %d is finite (%s)", i, got[i]).isTrue();
      double e = (double) got[i] - want[i];
      d += e * e;
      w += (double) want[i] * want[i];
    }
    return Math.sqrt(d) / Math.max(Math.sqrt(w), Double.MIN_NORMAL);
  }

  static void assertTensorsClose(String what, ParameterTensors layout, float[] got, float[] want) {
    for (ParameterTensors.Tensor t : layout.tensors()) {
      double e = relL2(got, want, t.offset(), t.size(1));
      assertThat(e).as("%s of %s: relative L2 error", what, t.name()).isLessThanOrEqualTo(BOUND);
    }
  }

  @Test
  void forwardBackwardAndAdamWMatchTheCpu() {
    assumeGpu();
    SplittableRandom rng = new SplittableRandom(SEED);
    long weights = rng.nextLong();
    List<Object> unused = LocalGroup.run(1, (Communicator comm) -> {
      Gpt<float[]> cpu = Gpt.cpu(CFG, comm, B, weights);
      try (CudaOps ops = new CudaOps(ctx)) {
        ops.causalBlockMinimum(16); // T = 64 in 4 causal blocks: the block-triangular attention GEMMs against the CPU
        assertThat(ops.causalBlock(CFG.seqLength())).isEqualTo(16);
        Gpt<DeviceBuffer> gpu = Gpt.gpu(CFG, ops, B, weights);
        int n = cpu.layout().size();
        for (int step = 1; step <= 3; step++) {
          int[][] data = batch(rng);
          cpu.zeroGrad();
          gpu.zeroGrad();
          float lc = cpu.forward(data[0], data[1]);
          float lg = gpu.forward(data[0], data[1]);
          assertThat((double) Math.abs(lg - lc) / lc).as("step %d: relative loss error (gpu %s, cpu %s)", step, lg, lc)
              .isLessThanOrEqualTo(BOUND);
          cpu.backward();
          gpu.backward();
          float[] gg = ops.toHost(new View<>(gpu.grads(), 0), n);
          assertTensorsClose("step " + step + " gradient", cpu.layout(), gg, cpu.grads());
          for (boolean all : new boolean[] {true, false}) {
            double nc = cpu.gradSquaredNorm(all), ng = gpu.gradSquaredNorm(all);
            assertThat(Math.abs(ng - nc) / nc).as("step %d: squared norm (replicated %s)", step, all)
                .isLessThanOrEqualTo(BOUND);
          }
          // AdamW maps a gradient to about ±lr whatever its size, so gradients at rounding level (the key biases',
          // zero in exact arithmetic: softmax ignores a shift of every score) would flip signs between GEMM orders.
          // Both backends therefore update from the CPU's gradients: the same float operations, the same bits.
          ops.copyToDevice(cpu.grads(), gpu.grads());
          float scale = (float) Math.min(1.0, 0.5 / Math.sqrt(cpu.gradSquaredNorm(true))); // clipping at norm 0.5
          cpu.update(3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, scale, step);
          gpu.update(3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, scale, step);
          float[] pg = ops.toHost(new View<>(gpu.params(), 0), n);
          for (int i = 0; i < n; i++) {
            if (Float.floatToRawIntBits(pg[i]) != Float.floatToRawIntBits(cpu.params()[i])) {
              throw new AssertionError(
                  "step " + step + ": parameter " + i + " after AdamW is " + pg[i] + " on the GPU, "
                      + cpu.params()[i] + " on the CPU (same gradients: the bits must agree)");
            }
          }
        }
      }
      return null;
    });
    assertThat(unused).hasSize(1);
  }

  @Test
  void aStepReplayedAsACudaGraphComputesWhatTheEagerStepComputes() {
    assumeGpu();
    SplittableRandom rng = new SplittableRandom(SEED ^ 0x6AL);
    try (CudaOps eager = new CudaOps(ctx, CudaOps.Precision.BF16);
        CudaOps graphed = new CudaOps(ctx, CudaOps.Precision.BF16)) {
      Gpt<DeviceBuffer> a = Gpt.gpu(CFG, eager, B, 11), g = Gpt.gpu(CFG, graphed, B, 11);
      int n = a.layout().size();
      boolean bits = true;
      for (int step = 1; step <= 5; step++) {
        int[][] data = batch(rng);
        if (step == 4) g.forward(batch(rng)[0], batch(rng)[1]); // an evaluation in between overwrites the token copies
        a.zeroGrad();
        float la = a.forward(data[0], data[1]);
        a.backward();
        float lg = g.trainStep(data[0], data[1]);
        assertThat((double) Math.abs(lg - la) / la).as("step %d: loss (graph %s, eager %s)", step, lg, la)
            .isLessThanOrEqualTo(1e-6);
        float[] ga = eager.toHost(new View<>(a.grads(), 0), n), gg = graphed.toHost(new View<>(g.grads(), 0), n);
        assertThat(relL2(gg, ga, 0, n)).as("step %d: gradients, relative L2", step).isLessThanOrEqualTo(1e-6);
        bits &= Float.floatToRawIntBits(lg) == Float.floatToRawIntBits(la) && java.util.Arrays.equals(gg, ga);
        a.update(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, step);
        g.update(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, step);
      }
      System.out.println("graph replay vs eager step: bit-identical " + bits + ", " + graphed.graphLaunches()
          + " graph launches");
      assertThat(graphed.graphLaunches()).as("steps 2 to 5 ran as one graph each").isEqualTo(4);
      int[][] bad = batch(rng);
      bad[0][3] = CFG.vocabSize();
      assertThatThrownBy(() -> g.trainStep(bad[0], bad[1])).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("tokens[3] = 256");
    }
  }

  @Test
  void bf16ModeStaysWithinItsDocumentedBound() {
    assumeGpu();
    SplittableRandom rng = new SplittableRandom(SEED ^ 0xBF16L);
    long weights = rng.nextLong();
    int[][] data = batch(rng);
    List<Object> unused = LocalGroup.run(1, (Communicator comm) -> {
      Gpt<float[]> cpu = Gpt.cpu(CFG, comm, B, weights);
      try (CudaOps ops = new CudaOps(ctx, CudaOps.Precision.BF16)) {
        ops.causalBlockMinimum(16); // 4 causal blocks
        assertThat(ops.precision()).isEqualTo(CudaOps.Precision.BF16);
        Gpt<DeviceBuffer> gpu = Gpt.gpu(CFG, ops, B, weights);
        cpu.zeroGrad();
        gpu.zeroGrad();
        float lc = cpu.forward(data[0], data[1]);
        float lg = gpu.forward(data[0], data[1]);
        cpu.backward();
        gpu.backward();
        int n = cpu.layout().size();
        float[] gg = ops.toHost(new View<>(gpu.grads(), 0), n);
        double lossErr = Math.abs(lg - lc) / lc, gradErr = relL2(gg, cpu.grads(), 0, n), worst = 0;
        String worstName = "";
        for (ParameterTensors.Tensor t : cpu.layout().tensors()) {
          double e = relL2(gg, cpu.grads(), t.offset(), t.size(1));
          if (e > worst) {
            worst = e;
            worstName = t.name();
          }
        }
        System.out.printf("bf16 mode vs CPU fp32: loss %.3e, gradient %.3e relative L2, worst tensor %s %.3e%n",
            lossErr, gradErr, worstName, worst);
        assertThat(lossErr).as("bf16 loss (gpu %s, cpu %s)", lg, lc).isLessThanOrEqualTo(BF16_LOSS);
        assertThat(gradErr).as("bf16 gradient, relative L2").isLessThanOrEqualTo(BF16_GRAD);
        assertThat(gradErr).as("bf16 really rounds the GEMM inputs").isGreaterThan(BOUND / 10);
      }
      return null;
    });
    assertThat(unused).hasSize(1);
  }

  /** Loss and gradients (scattered into the full layout) of one forward + backward at TP = r on this GPU. */
  static float[] tpGradients(GptConfig base, int r, Plan plan, long weights, int[][] data, float[] loss) {
    GptConfig cfg = base.withTp(r);
    float[] full = new float[new ParameterTensors(base.withTp(1), 0).fullSize()];
    List<Float> losses = LocalGroup.run(r, (Communicator comm) -> {
      ctx.makeCurrent();
      try (DeviceLocalTransport link = new DeviceLocalTransport(ctx, comm);
          DeviceCollectives dc = new DeviceCollectives(link);
          CudaOps ops = new CudaOps(ctx, r == 1 ? null : dc.stream(), CudaOps.Precision.FP32)) {
        CudaTensorParallel tp = r == 1 ? CudaTensorParallel.alone(ops)
            : CudaTensorParallel.of(ops, new DeviceSiteCollectives(dc, plan), true);
        Gpt<DeviceBuffer> gpu = new Gpt<>(cfg, ops, tp, comm.rank(), B, weights);
        gpu.zeroGrad();
        float l = gpu.forward(data[0], data[1]);
        gpu.backward();
        float[] g = ops.toHost(new View<>(gpu.grads(), 0), gpu.layout().size());
        synchronized (full) {
          for (ParameterTensors.Tensor t : gpu.layout().tensors()) {
            for (int i = 0; i < t.size(r); i++) full[t.fullIndex(i, comm.rank(), r)] = g[t.offset() + i];
          }
        }
        return l;
      }
    });
    if (cfg.sequenceSharded()) { // each rank's loss is over its 1/R of the tokens
      double mean = 0;
      for (float l : losses) mean += l / (double) r;
      loss[0] = (float) mean;
      return full;
    }
    for (float l : losses) assertThat(l).as("every rank's loss").isEqualTo(losses.get(0));
    loss[0] = losses.get(0);
    return full;
  }

  @ParameterizedTest
  @ValueSource(ints = {2, 4})
  void tensorParallelRanksSharingTheGpuGiveTheTp1Gradients(int r) {
    assumeGpu();
    SplittableRandom rng = new SplittableRandom(SEED + r);
    long weights = rng.nextLong();
    int[][] data = batch(rng);
    float[] l1 = new float[1], lr = new float[1];
    float[] ref = tpGradients(CFG, 1, Plan.EXACT, weights, data, l1);
    float[] got = tpGradients(CFG, r, Plan.EXACT, weights, data, lr);
    assertThat((double) Math.abs(lr[0] - l1[0]) / l1[0]).as("TP=%d loss vs TP=1", r).isLessThanOrEqualTo(BOUND);
    assertTensorsClose("TP=" + r + " gradient", new ParameterTensors(CFG, 0), got, ref);
  }

  /**
   * Sequence parallelism on the GPU backend (device-local all-gathers and reduce-scatters, the exact all-reduce of the
   * replicated gradients) gives the TP = 1 loss and gradients, as on the CPU.
   */
  @ParameterizedTest
  @ValueSource(ints = {2, 4})
  void sequenceParallelRanksSharingTheGpuGiveTheTp1Gradients(int r) {
    assumeGpu();
    SplittableRandom rng = new SplittableRandom(SEED + 7 * r);
    long weights = rng.nextLong();
    int[][] data = batch(rng);
    GptConfig sp = new GptConfig(256, CFG.seqLength(), CFG.numLayers(), CFG.numHeads(), CFG.hiddenSize(), 1, true);
    float[] l1 = new float[1], lr = new float[1];
    float[] ref = tpGradients(CFG, 1, Plan.EXACT, weights, data, l1);
    float[] got = tpGradients(sp, r, Plan.EXACT, weights, data, lr);
    assertThat((double) Math.abs(lr[0] - l1[0]) / l1[0]).as("SP TP=%d loss vs TP=1", r).isLessThanOrEqualTo(BOUND);
    assertTensorsClose("SP TP=" + r + " gradient", new ParameterTensors(CFG, 0), got, ref);
  }

  @Test
  void aTacoCompressedTp2StepStaysFiniteAndClose() {
    assumeGpu();
    GptConfig wide = new GptConfig(256, 64, 1, 8, 1024, 1); // the GPU taco kernels take rows of a multiple of 1024
    SplittableRandom rng = new SplittableRandom(SEED ^ 0x7AC0L);
    long weights = rng.nextLong();
    int[][] data = batch(rng);
    float[] le = new float[1], lt = new float[1];
    float[] exact = tpGradients(wide, 2, Plan.EXACT, weights, data, le);
    float[] taco = tpGradients(wide, 2, Plan.of(Codecs.byName("taco")), weights, data, lt);
    assertThat((double) Math.abs(lt[0] - le[0]) / le[0]).as("taco loss vs exact").isLessThanOrEqualTo(1e-2);
    assertThat(relL2(taco, exact, 0, exact.length)).as("taco gradients vs exact, relative L2").isLessThanOrEqualTo(0.1);
  }

  @Test
  void theTimedBackendComputesTheSameStepAndTimesEveryCategory() {
    assumeGpu();
    int[][] data = batch(new SplittableRandom(SEED ^ 5));
    try (CudaOps plain = new CudaOps(ctx); CudaOps timed = new CudaOps(ctx);
        OpTimes timer = OpTimes.of(timed, CudaTensorParallel.alone(timed))) {
      Gpt<DeviceBuffer> a = Gpt.gpu(CFG, plain, B, 9), b = new Gpt<>(CFG, timer.ops(), timer.tp(), 0, B, 9);
      float la = a.forward(data[0], data[1]), lb = b.forward(data[0], data[1]);
      a.backward();
      b.backward();
      b.update(1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1f, 1);
      timer.collect();
      assertThat(lb).isEqualTo(la);
      assertThat(timed.toHost(new View<>(b.grads(), 0), 1000)).containsExactly(plain.toHost(new View<>(a.grads(), 0),
          1000));
      java.util.Map<String, Double> t = timer.totals();
      System.out.println("one step by category (ms): " + t);
      assertThat(t.get("gemm")).isPositive();
      assertThat(t.get("attention")).isPositive();
      assertThat(t.get("other_kernels")).isPositive();
      assertThat(t.get("optimizer")).isPositive();
      assertThat(t.get("tp_collectives")).isGreaterThanOrEqualTo(0.0);
    }
  }

  @Test
  void tokenOutsideTheVocabularyIsRefusedNamingIt() {
    assumeGpu();
    try (CudaOps ops = new CudaOps(ctx)) {
      Gpt<DeviceBuffer> gpu = Gpt.gpu(CFG, ops, B, 1);
      int[][] data = batch(new SplittableRandom(SEED));
      data[0][7] = CFG.vocabSize();
      assertThatThrownBy(() -> gpu.forward(data[0], data[1])).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("tokens[7] = 256").hasMessageContaining("[0, 256)");
    }
  }

  @Test
  void anArenaLargerThanTheDeviceIsOutOfMemoryWithItsSize() {
    assumeGpu();
    try (CudaOps ops = new CudaOps(ctx)) {
      assertThatThrownBy(() -> ops.alloc(1L << 40)).isInstanceOf(DeviceOutOfMemoryException.class)
          .hasMessageContaining("4096.000 GiB").hasMessageContaining("--micro-batch-size");
    }
  }
}
