package dev.taco.kernels.cuda;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.kernels.compiler.corpus.SimtCorpus;
import dev.taco.kernels.cpu.SimtEmulator;
import java.util.Random;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@code KernelContext}'s {@code cpAsync16}, {@code ldmatrixX4(Trans)} and {@code mmaBf16} on a real GPU (skipped with
 * the reason where there is none): {@link SimtCorpus#tensorCoreTile} over 64 blocks of random bf16 tiles against a
 * float64 product and against the emulator. Its CUDA C comes pre-translated in {@code .device/cuda/}
 * ({@code bench/gpu-prepare.sh} translates {@link SimtCorpus#kernels()} too).
 */
@Tag("gpu")
class TensorCoreGpuTest {
  @Test
  void cpAsyncLdmatrixAndMmaGiveTheProduct() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    long seed = System.nanoTime();
    Random rnd = new Random(seed);
    int blocks = 64;
    short[] a = SimtCorpus.randomBf16(rnd, 256 * blocks), b = SimtCorpus.randomBf16(rnd, 128 * blocks);
    float[] gpu = new float[128 * blocks], emulated = new float[128 * blocks];
    java.util.Arrays.fill(gpu, Float.NaN);
    try (CudaContext ctx = CudaContext.open(0); DeviceBuffer da = ctx.alloc(2L * a.length);
        DeviceBuffer db = ctx.alloc(2L * b.length); DeviceBuffer dc = ctx.alloc(4L * gpu.length)) {
      TaskGraph g = new TaskGraph("tensor-core tile")
          .transferToDevice(DataTransferMode.EVERY_EXECUTION, a, da)
          .transferToDevice(DataTransferMode.EVERY_EXECUTION, b, db);
      g.task("tile", SimtCorpus::tensorCoreTile, KERNEL_CONTEXT, da, db, dc).grid(WorkerGrid.of(blocks, 32));
      g.transferToHost(DataTransferMode.EVERY_EXECUTION, dc, gpu);
      try (ExecutionPlan plan = new ExecutionPlan(ctx, g.snapshot())) {
        plan.execute();
      }
    }
    SimtEmulator.launch(blocks, 32, ctx -> SimtCorpus.tensorCoreTile(ctx, a, b, emulated));
    double worst = 0;
    for (int blk = 0; blk < blocks; blk++) {
      for (int r = 0; r < 16; r++) {
        for (int col = 0; col < 8; col++) {
          double ref = SimtCorpus.tensorCoreTileReference(a, b, blk, r, col);
          int i = 128 * blk + r * 8 + col;
          double tol = 1e-5 * Math.max(1, Math.abs(ref)); // the tensor cores sum with their own rounding
          assertThat((double) gpu[i]).as("block %d C[%d][%d] on the GPU, seed %d", blk, r, col, seed)
              .isCloseTo(ref, org.assertj.core.data.Offset.offset(tol));
          assertThat((double) gpu[i]).as("against the emulator").isCloseTo(emulated[i],
              org.assertj.core.data.Offset.offset(2 * tol));
          worst = Math.max(worst, Math.abs(gpu[i] - ref) / Math.max(1, Math.abs(ref)));
        }
      }
    }
    System.out
        .println("tensor-core tile: " + blocks + " blocks, cp.async + ldmatrix + mma, worst error against float64 "
            + worst + " (seed " + seed + ")");
  }
}
