package dev.taco.kernels.cuda;

import static dev.taco.kernels.cuda.TaskGraph.COMMUNICATION_LANE;
import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.codec.Fp8Format;
import dev.taco.codec.PayloadHeader;
import dev.taco.codec.TacoCodec;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.gpu.GpuTacoCodec;
import dev.taco.kernels.gpu.TacoGpuKernels;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/**
 * {@link TaskGraph} and {@link ExecutionPlan} on a real GPU (skipped with the reason where there is none): a two-lane
 * pipeline of two chunks (compress chunk i on lane 0, its body "on the wire" on lane 1, a device-to-device copy
 * standing in for the collective, compress chunk i+1 meanwhile, decompress after the wire) gives the CPU codec's body
 * bytes and decoded values bit for bit; the same graph captured into a CUDA graph gives the same results with one
 * launch per execution instead of four.
 *
 * <p>The kernels are {@link TacoGpuKernels} given as method references; on a GPU machine without a JDK their CUDA C
 * must be pre-translated into {@code .device/cuda/} ({@code bench/gpu-prepare.sh}, or
 * {@code KernelSources tornado-kernels/src/main/java .device/cuda dev.taco.kernels.gpu.TacoCudaSources}), read
 * relative to the working directory (or {@code -Dtaco.cuda.dir}).
 */
@Tag("gpu")
class TaskGraphGpuTest {
  static final int ROWS = 64;
  static final int COLS = 4096;
  static final int G = 64;
  static final long SEED = 20261201L;
  static final WorkerGrid ROW_GRID = WorkerGrid.of(ROWS, COLS / TacoGpuKernels.V);
  static final int BODY = (int) GpuTacoCodec.bodyBytes(ROWS, COLS, G);

  private static CudaContext ctx;

  @BeforeAll
  static void open() {
    if (Cuda.available()) {
      ctx = CudaContext.open(0);
    }
  }

  @AfterAll
  static void close() {
    if (ctx != null) {
      ctx.close();
    }
  }

  /** Gaussian rows with outlier channels (x 300), from a fixed, printed seed. */
  static float[] input(long seed) {
    Random rnd = new Random(seed);
    float[] x = new float[ROWS * COLS];
    for (int i = 0; i < x.length; i++) {
      x[i] = (float) (rnd.nextGaussian() * (i % COLS % 97 == 5 ? 300 : 1));
    }
    return x;
  }

  /** The device buffers and host arrays of the two-chunk pipeline, and its graph. */
  static final class Pipeline implements AutoCloseable {
    final List<DeviceBuffer> buffers = new ArrayList<>();
    final float[][] x = {input(SEED), input(SEED + 1)};
    final float[][] y = new float[2][ROWS * COLS];
    final byte[][] received = new byte[2][BODY];
    final ImmutableTaskGraph graph;

    Pipeline(CudaContext ctx) {
      TaskGraph g = new TaskGraph("pipeline");
      DeviceBuffer[] dx = new DeviceBuffer[2];
      DeviceBuffer[] body = new DeviceBuffer[2];
      DeviceBuffer[] recv = new DeviceBuffer[2];
      DeviceBuffer[] dy = new DeviceBuffer[2];
      for (int c = 0; c < 2; c++) {
        dx[c] = alloc(ctx, 4L * ROWS * COLS);
        body[c] = alloc(ctx, BODY);
        recv[c] = alloc(ctx, BODY);
        dy[c] = alloc(ctx, 4L * ROWS * COLS);
        g.transferToDevice(DataTransferMode.EVERY_EXECUTION, x[c], dx[c]);
      }
      for (int c = 0; c < 2; c++) { // compress 1 on lane 0 overlaps wire 0 on lane 1
        g.task("compress" + c, TacoGpuKernels::compress, KERNEL_CONTEXT, dx[c], dx[c], body[c], ROWS, COLS, G, true,
            Fp8.E4M3, false).grid(ROW_GRID)
            .step(new CopyStep("wire" + c, body[c], recv[c], true)).onLane(COMMUNICATION_LANE).after("compress" + c);
      }
      for (int c = 0; c < 2; c++) {
        g.task("decompress" + c, TacoGpuKernels::decompress, KERNEL_CONTEXT, recv[c], dy[c], dy[c], ROWS, COLS, G,
            true, Fp8.E4M3, false, false).grid(ROW_GRID).after("wire" + c);
      }
      for (int c = 0; c < 2; c++) {
        g.transferToHost(DataTransferMode.EVERY_EXECUTION, dy[c], y[c])
            .transferToHost(DataTransferMode.EVERY_EXECUTION, recv[c], received[c]);
      }
      graph = g.snapshot();
    }

    private DeviceBuffer alloc(CudaContext ctx, long bytes) {
      DeviceBuffer b = ctx.alloc(bytes);
      buffers.add(b);
      return b;
    }

    /** Asserts the CPU codec's body and decode for the current inputs. */
    void expectCpuResults() {
      TacoCodec cpu = new TacoCodec(G, Fp8Format.E4M3, 1f, true);
      for (int c = 0; c < 2; c++) {
        byte[] payload = new byte[cpu.encodedSize(ROWS, COLS)];
        cpu.encode(x[c], 0, ROWS, COLS, payload, 0);
        assertThat(received[c]).as("chunk %d body (seed %d)", c, SEED + c)
            .isEqualTo(Arrays.copyOfRange(payload, PayloadHeader.SIZE, payload.length));
        float[] decoded = new float[ROWS * COLS];
        cpu.decode(payload, 0, payload.length, decoded, 0, false);
        for (int i = 0; i < decoded.length; i++) {
          if (Float.floatToRawIntBits(y[c][i]) != Float.floatToRawIntBits(decoded[i])) {
            throw new AssertionError("chunk " + c + " element " + i + ": GPU " + y[c][i] + ", CPU " + decoded[i]
                + " (seed " + (SEED + c) + ")");
          }
        }
      }
    }

    /** New inputs in place (the graph holds the arrays). */
    void nextInputs(int round) {
      for (int c = 0; c < 2; c++) {
        System.arraycopy(input(SEED + 100 * round + c), 0, x[c], 0, x[c].length);
      }
    }

    @Override
    public void close() {
      buffers.forEach(DeviceBuffer::close);
    }
  }

  @Test
  void twoLanesWithCrossLaneDependenciesGiveTheCpuCodecsResults() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    try (Pipeline p = new Pipeline(ctx); ExecutionPlan plan = new ExecutionPlan(ctx, p.graph)) {
      assertThat(plan.graph().lanes()).isEqualTo(2);
      for (int round = 0; round < 3; round++) {
        p.nextInputs(round);
        plan.execute();
        p.expectCpuResults();
      }
      System.out.println("two-lane pipeline (" + plan.graph() + "), device ms of the last execution: "
          + plan.taskMillis());
      assertThat(plan.launches()).isEqualTo(3 * 4);
    }
  }

  @Test
  void captureAndReplayGiveTheEagerResultsWithOneLaunch() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
    try (Pipeline eager = new Pipeline(ctx); Pipeline replayed = new Pipeline(ctx);
        ExecutionPlan e = new ExecutionPlan(ctx, eager.graph);
        ExecutionPlan r = new ExecutionPlan(ctx, replayed.graph).withCudaGraph()) {
      for (int round = 0; round < 3; round++) {
        eager.nextInputs(round);
        replayed.nextInputs(round);
        e.execute();
        r.execute();
        for (int c = 0; c < 2; c++) {
          assertThat(replayed.received[c]).isEqualTo(eager.received[c]);
          assertThat(replayed.y[c]).isEqualTo(eager.y[c]);
        }
      }
      replayed.expectCpuResults();
      // 4 kernels, 2 wire copies, 2 host→device and 4 device→host copies; the fork and joins are edges
      assertThat(r.cudaGraphNodes()).isEqualTo(12);
      long eagerBefore = e.launches();
      long replayBefore = r.launches();
      int reps = 50;
      long t0 = System.nanoTime();
      for (int i = 0; i < reps; i++) {
        e.execute();
      }
      long t1 = System.nanoTime();
      for (int i = 0; i < reps; i++) {
        r.execute();
      }
      long t2 = System.nanoTime();
      assertThat((e.launches() - eagerBefore) / reps).isEqualTo(4);
      assertThat((r.launches() - replayBefore) / reps).isEqualTo(1);
      System.out.printf(Locale.ROOT, "per execution (host, incl. staging copies of %d MiB): eager %.1f µs, "
          + "CUDA graph %.1f µs%n", 2 * 2 * 4L * ROWS * COLS >> 20, (t1 - t0) / 1e3 / reps, (t2 - t1) / 1e3 / reps);
    }
  }
}
