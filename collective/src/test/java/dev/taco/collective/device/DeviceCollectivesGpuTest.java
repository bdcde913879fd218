package dev.taco.collective.device;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.codec.Codecs;
import dev.taco.collective.CollectiveException;
import dev.taco.collective.HostWire;
import dev.taco.collective.LocalGroup;
import dev.taco.collective.Plan;
import dev.taco.collective.TwoShot;
import dev.taco.collective.nccl.Nccl;
import dev.taco.collective.nccl.NcclCommunicator;
import dev.taco.kernels.Bf16;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The device collectives on a GPU against the host path ({@link HostWire}, the CPU codecs) for the same inputs, bit for
 * bit: {@code device-local} at R = 2, 4 and 8 (ranks as threads sharing GPU 0), every device plan, all-reduce,
 * all-gather and reduce-scatter, bf16 and fp32 tensors, shapes from 1 element to 256 MiB with rows not divisible by R,
 * cols not multiples of G or 8, several pipelined pieces; NCCL at world size 1 with CUDA-graph capture; and the
 * failures (a rank that throws or never comes, shapes that differ across ranks, NaN input, device out of memory).
 * Skipped, with the reason, where there is no GPU. The seed is printed; {@code -Dtaco.seed=N} repeats it.
 */
@Tag("gpu")
class DeviceCollectivesGpuTest {
  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());
  static CudaContext ctx; // the device of the helpers below (NcclFp8GpuTest sets its own)

  static final List<Plan> PLANS = List.of(Plan.EXACT, Plan.of(Codecs.byName("none")), Plan.of(Codecs.byName("taco")),
      Plan.of(Codecs.byName("taco:e5m2,g=128")), Plan.of(Codecs.byName("taco:g=256,hadamard=off")),
      Plan.of(Codecs.byName("taco:g=32")), Plan.of(Codecs.byName("int8-group")),
      Plan.of(Codecs.byName("int8-group:g=64")), Plan.of(Codecs.byName("fp8-tensor")), Plan.of(Codecs.byName("mxfp4")),
      Plan.of(Codecs.byName("mxfp4:hadamard=off")), Plan.of(Codecs.byName("nvfp4")),
      Plan.of(Codecs.byName("nvfp4:hadamard=on")));

  /** rows x cols: one element, rows not divisible by R, cols not a multiple of G / 8 / 32, several warps. */
  static final int[][] SHAPES = {{1, 1}, {3, 100}, {13, 333}, {40, 1000}, {64, 4096}};

  enum Op { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER }

  @BeforeAll
  static void open() {
    System.out.println("DeviceCollectivesGpuTest seed = " + SEED);
    if (Cuda.available()) ctx = CudaContext.open(0);
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  private static void assumeGpu() {
    assumeTrue(Cuda.available(), Cuda.unavailableReason());
  }

  /** bf16-representable values (so the bf16 and fp32 tensors hold the same numbers): outlier channels, zero rows. */
  static float[] input(long seed, int rank, int rows, int cols) {
    SplittableRandom rnd = new SplittableRandom(seed * 1_000_003L + rank * 7919L + rows * 31L + cols);
    float[] x = new float[rows * cols];
    for (int i = 0; i < x.length; i++) {
      int r = i / cols;
      double v = r % 11 == 7 ? 0 : rnd.nextGaussian() * Math.exp(rnd.nextGaussian()) * (i % cols % 37 == 3 ? 300 : 1);
      x[i] = Bf16.decode(Bf16.encode((float) v));
    }
    return x;
  }

  static DeviceTensor upload(float[] x, boolean bf16, long extraElements) {
    long n = x.length + extraElements;
    DeviceBuffer b = ctx.alloc(Math.max(16, n * (bf16 ? 2 : 4)));
    if (bf16) {
      short[] s = new short[x.length];
      for (int i = 0; i < x.length; i++) s[i] = Bf16.encode(x[i]);
      b.copyFromHost(s, 0, s.length, 0);
    } else {
      b.copyFromHost(x, 0, x.length, 0);
    }
    return new DeviceTensor(b, bf16);
  }

  static float[] download(DeviceTensor t, int n) {
    float[] out = new float[n];
    if (t.bf16()) {
      short[] s = new short[n];
      t.buffer().copyToHost(s, 0, n, 0);
      for (int i = 0; i < n; i++) out[i] = Bf16.decode(s[i]);
    } else {
      t.buffer().copyToHost(out, 0, n, 0);
    }
    return out;
  }

  /** One rank: the host path's output and the device's, for the same input. */
  static float[][] both(dev.taco.collective.Communicator comm, DeviceCollectives dc, Op op, Plan plan, int rows,
      int cols, boolean bf16, long seed) {
    int world = comm.worldSize();
    float[] x = input(seed, comm.rank(), rows, cols);
    HostWire hw = new HostWire(comm);
    int outRows = op == Op.ALL_GATHER ? world * rows : op == Op.REDUCE_SCATTER ? rows / world : rows;
    float[] host = op == Op.ALL_REDUCE ? x.clone() : new float[outRows * cols];
    switch (op) {
      case ALL_REDUCE -> TwoShot.allReduce(hw, plan, host, rows, cols);
      case ALL_GATHER -> TwoShot.allGather(hw, plan, x, rows, cols, host);
      case REDUCE_SCATTER -> TwoShot.reduceScatter(hw, plan, x, rows, cols, host);
    }
    DeviceTensor dx = upload(x, bf16, 0);
    DeviceTensor dout = op == Op.ALL_REDUCE ? dx
        : new DeviceTensor(ctx.alloc((long) outRows * cols * (bf16 ? 2 : 4)), bf16);
    try {
      switch (op) {
        case ALL_REDUCE -> dc.allReduce(plan, dx, rows, cols);
        case ALL_GATHER -> dc.allGather(plan, dx, rows, cols, dout);
        case REDUCE_SCATTER -> dc.reduceScatter(plan, dx, rows, cols, dout);
      }
      dc.synchronize();
      float[] dev = download(dout, outRows * cols);
      if (bf16) { // the device writes bf16: the host's fp32 values rounded to nearest even
        for (int i = 0; i < host.length; i++) host[i] = Bf16.decode(Bf16.encode(host[i]));
      }
      return new float[][] {host, dev};
    } finally {
      dx.buffer().close();
      if (dout != dx) dout.buffer().close();
    }
  }

  @ParameterizedTest(name = "device-local R={0}")
  @ValueSource(ints = {2, 4, 8})
  void deviceLocalEqualsTheHostPathBitForBit(int world) {
    assumeGpu();
    List<String> checked = new ArrayList<>();
    for (Plan plan : PLANS) {
      for (int[] shape : SHAPES) {
        for (Op op : Op.values()) {
          // int8-group and fp8-tensor have fp32 kernels only; fp8-tensor's scale covers a piece, so it runs as one
          // piece here to equal the host's one scale per chunk (GroupTwoShotKernels)
          String codec = plan.exact() ? "fp32" : plan.codec().name(); // the exact plan has no codec
          boolean baseline = codec.startsWith("int8") || codec.startsWith("fp8-tensor");
          boolean bf16 = !baseline && (shape[0] + op.ordinal()) % 2 == 0;
          long pieceBytes = codec.startsWith("fp8-tensor") ? Long.MAX_VALUE : 64 << 10;
          int rows = op == Op.REDUCE_SCATTER ? shape[0] * world : shape[0];
          int cols = shape[1];
          String where = plan.describe() + " " + op + " R=" + world + " " + rows + "x" + cols
              + (bf16 ? " bf16" : " fp32")
              + " seed " + SEED;
          List<float[][]> res = LocalGroup.run(world, comm -> {
            try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
                DeviceCollectives dc = new DeviceCollectives(t, pieceBytes, false, false)) { // 64 KiB: pipelined
              return both(comm, dc, op, plan, rows, cols, bf16, SEED);
            }
          });
          for (int r = 0; r < world; r++) {
            assertThat(res.get(r)[1]).as(where + " rank " + r).isEqualTo(res.get(r)[0]);
          }
          checked.add(where);
        }
      }
    }
    System.out
        .println("device-local R=" + world + ": " + checked.size() + " collectives bit-identical to the host path");
  }

  @Test
  void releasingAPlanFreesWhatWasBuiltForItAndItBuildsAgain() {
    // what a recalibrated collective site does with its superseded plan (CudaOps.allReduce)
    assumeGpu();
    Plan taco = Plan.of(Codecs.byName("taco"));
    List<int[]> counts = LocalGroup.run(2, comm -> {
      try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
          DeviceCollectives dc = new DeviceCollectives(t, 64 << 10, false, false)) {
        int[] c = new int[4];
        float[][] first = both(comm, dc, Op.ALL_REDUCE, taco, 13, 333, false, SEED);
        both(comm, dc, Op.ALL_REDUCE, Plan.EXACT, 13, 333, false, SEED);
        c[0] = dc.builtCollectives();
        c[1] = dc.release(taco);
        c[2] = dc.builtCollectives();
        float[][] again = both(comm, dc, Op.ALL_REDUCE, taco, 13, 333, false, SEED);
        c[3] = dc.builtCollectives();
        assertThat(again[1]).as("rank %d: rebuilt after release", comm.rank()).isEqualTo(again[0])
            .isEqualTo(first[1]);
        return c;
      }
    });
    for (int[] c : counts) {
      assertThat(c).as("built before, released, built after release, built after rebuilding (each rank)")
          .containsExactly(2, 1, 1, 2);
    }
  }

  @Test
  void layoutsAndLargeTensorsEqualTheHostPath() {
    assumeGpu();
    int[] perm = new int[1000];
    for (int j = 0; j < perm.length; j++) perm[j] = (j * 601) % perm.length;
    Plan taco = Plan.of(Codecs.byName("taco"));
    record Case(Plan plan, int rows, int cols, boolean bf16) {}
    List<Case> cases = List.of(new Case(taco.permuted(perm), 24, 1000, true),
        new Case(taco.tokenAxis(), 40, 1000, false),
        // 256 MiB of bf16, 32768 x 4096: the largest size of the benchmark
        new Case(taco, 32768, 4096, true), new Case(Plan.EXACT, 32768, 4096, true));
    for (Case c : cases) {
      String where = c.plan().describe() + " " + c.rows() + "x" + c.cols() + " seed " + SEED;
      List<float[][]> res = LocalGroup.run(2, comm -> {
        try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
            DeviceCollectives dc = new DeviceCollectives(t)) {
          return both(comm, dc, Op.ALL_REDUCE, c.plan(), c.rows(), c.cols(), c.bf16(), SEED);
        }
      });
      for (int r = 0; r < 2; r++) {
        assertThat(java.util.Arrays.equals(res.get(r)[1], res.get(r)[0])).as(where + " rank " + r).isTrue();
      }
    }
  }

  @Test
  void ncclAtWorldSizeOneIsTheIdentityAndReplaysItsCudaGraph() {
    assumeTrue(Cuda.available() && Nccl.available(), Cuda.unavailableReason() + "; " + Nccl.unavailableReason());
    try (NcclCommunicator nccl = NcclCommunicator.init(ctx, 0, 1, Nccl.get().uniqueId(), Duration.ofSeconds(60));
        DeviceCollectives dc = new DeviceCollectives(new NcclTransport(nccl))) {
      float[] x = input(SEED, 0, 16, 1000);
      Plan taco = Plan.of(Codecs.byName("taco"));
      DeviceTensor dx = upload(x, false, 0);
      DeviceTensor out = upload(new float[x.length], false, 0);
      for (int i = 0; i < 3; i++) { // the first call captures, the others replay
        dc.allReduce(taco, dx, 16, 1000);
        dc.allGather(taco, dx, 16, 1000, out);
      }
      dc.synchronize();
      assertThat(download(dx, x.length)).as("one rank: nothing is quantised").isEqualTo(x);
      assertThat(download(out, x.length)).isEqualTo(x);
      assertThat(nccl.failure()).isNull();
      dx.buffer().close();
      out.buffer().close();
    }
  }

  @Test
  void anNcclCallCapturedIntoACudaGraphReplaysWithFreshInputsAndIsWatchedAtLaunch() {
    assumeTrue(Cuda.available() && Nccl.available(), Cuda.unavailableReason() + "; " + Nccl.unavailableReason());
    int n = 4099;
    try (NcclCommunicator nccl = NcclCommunicator.init(ctx, 0, 1, Nccl.get().uniqueId(), Duration.ofSeconds(60));
        DeviceBuffer send = ctx.alloc(4L * n); DeviceBuffer recv = ctx.alloc(4L * n)) {
      float[] in = new float[n];
      float[] out = new float[n];
      dev.taco.kernels.cuda.TaskGraph g = new dev.taco.kernels.cuda.TaskGraph("nccl-capture")
          .transferToDevice(dev.taco.kernels.cuda.DataTransferMode.EVERY_EXECUTION, in, send)
          .step(dev.taco.kernels.cuda.TaskGraph.Step.of("nccl-all-gather", true,
              st -> nccl.allGather(send, recv, n, dev.taco.collective.nccl.NcclDataType.FLOAT32, st)))
          .transferToHost(dev.taco.kernels.cuda.DataTransferMode.EVERY_EXECUTION, recv, out);
      try (dev.taco.kernels.cuda.ExecutionPlan plan = new dev.taco.kernels.cuda.ExecutionPlan(ctx, g.snapshot())
          .withCudaGraph()) {
        SplittableRandom rnd = new SplittableRandom(SEED);
        for (int i = 0; i < 3; i++) {
          for (int j = 0; j < n; j++) in[j] = (float) rnd.nextGaussian();
          plan.execute();
          nccl.watch("captured all-gather", plan.lane(0));
          assertThat(out).as("execution " + i + " (the first captures, the others replay)").isEqualTo(in);
        }
        assertThat(plan.cudaGraphNodes()).as("the capture holds the NCCL call's nodes").isPositive();
        nccl.synchronize(plan.lane(0));
        assertThat(nccl.failure()).isNull();
      }
    }
  }

  @Test
  void aRankThatThrowsOrNeverComesFailsThePeersClearly() {
    assumeGpu();
    Plan taco = Plan.of(Codecs.byName("taco"));
    assertThatThrownBy(() -> LocalGroup.run(4, comm -> {
      if (comm.rank() == 2) throw new IllegalStateException("rank 2 broke on purpose");
      try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
          DeviceCollectives dc = new DeviceCollectives(t)) {
        return both(comm, dc, Op.ALL_REDUCE, taco, 8, 256, true, SEED);
      }
    })).hasMessageContaining("rank 2 broke on purpose")
        .satisfies(e -> assertThat(e.getSuppressed()).isNotEmpty().allSatisfy(
            s -> assertThat(s).isInstanceOf(CollectiveException.class).hasMessageContaining("rank 2 failed")));
    long[] failedAfter = new long[1];
    long t0 = System.nanoTime();
    assertThatThrownBy(() -> LocalGroup.run(2, Duration.ofSeconds(2), comm -> {
      if (comm.rank() == 1) {
        Thread.sleep(4000); // stops: never enters the collective
        return null;
      }
      try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
          DeviceCollectives dc = new DeviceCollectives(t)) {
        DeviceTensor dx = upload(input(SEED, 0, 8, 256), true, 0);
        dc.allReduce(taco, dx, 8, 256);
        return null;
      } catch (CollectiveException e) {
        failedAfter[0] = System.nanoTime() - t0;
        throw e;
      }
    })).isInstanceOf(CollectiveException.class).hasMessageContaining("timed out after 2.0 s");
    assertThat(failedAfter[0] / 1e9).as("rank 0 failed within the timeout, not after the sleeper").isBetween(1.9, 3.5);
  }

  @Test
  void shapesThatDifferAcrossRanksAreAClearErrorOnEveryRank() {
    assumeGpu();
    Plan taco = Plan.of(Codecs.byName("taco"));
    for (boolean check : new boolean[] {false, true}) {
      assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
        int rows = comm.rank() == 0 ? 8 : 16;
        try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
            DeviceCollectives dc = new DeviceCollectives(t, DeviceCollectives.DEFAULT_PIECE_BYTES, false, check)) {
          DeviceTensor dx = upload(input(SEED, comm.rank(), rows, 512), true, 0);
          dc.allReduce(taco, dx, rows, 512);
          dc.synchronize();
          return null;
        }
      })).as("check mode " + check).isInstanceOf(CollectiveException.class)
          .hasMessageContaining("disagree on the collective (this rank calls all-reduce")
          .hasMessageContaining("another calls a different collective"); // device-local checks every call
    }
  }

  @Test
  void nanInputGivesNanRowsAndLeavesTheOtherRowsAsTheHostComputesThem() {
    assumeGpu();
    Plan taco = Plan.of(Codecs.byName("taco"));
    int rows = 16, cols = 512, bad = 5;
    List<float[][]> res = LocalGroup.run(2, comm -> {
      float[] x = input(SEED, comm.rank(), rows, cols);
      float[] clean = x.clone();
      if (comm.rank() == 1) x[bad * cols + 17] = Float.NaN;
      java.util.Arrays.fill(clean, bad * cols, (bad + 1) * cols, 0f);
      float[] host = clean.clone();
      TwoShot.allReduce(new HostWire(comm), taco, host, rows, cols);
      try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
          DeviceCollectives dc = new DeviceCollectives(t)) {
        DeviceTensor dx = upload(x, false, 0);
        dc.allReduce(taco, dx, rows, cols);
        dc.synchronize();
        float[] dev = download(dx, x.length);
        dx.buffer().close();
        return new float[][] {host, dev};
      }
    });
    for (float[][] r : res) {
      for (int i = 0; i < rows * cols; i++) {
        if (i / cols == bad) assertThat(r[1][i]).as("element " + i + " of the NaN row").isNaN();
        else assertThat(r[1][i]).as("element " + i).isEqualTo(r[0][i]);
      }
    }
  }

  @Test
  void deviceOutOfMemoryIsAClearErrorNamingTheCollective() {
    assumeGpu();
    ctx.makeCurrent();
    long free = ctx.driver().memGetInfo()[0];
    DeviceTensor x = upload(new float[16], true, (1L << 30) - 16); // a 2 GiB bf16 tensor: 1 Gi elements
    DeviceBuffer hog = ctx.alloc(Math.max(1L << 20, free - (2L << 30) - (512L << 20)));
    try {
      assertThatThrownBy(() -> LocalGroup.run(2, comm -> {
        try (DeviceLocalTransport t = new DeviceLocalTransport(ctx, comm);
            DeviceCollectives dc = new DeviceCollectives(t)) {
          dc.allReduce(Plan.EXACT, x, 1 << 16, 1 << 14);
          return null;
        }
      })).isInstanceOf(DeviceOutOfMemoryException.class).hasMessageContaining("all-reduce of 65536 x 16384")
          .hasMessageContaining("out of memory").hasMessageContaining("MiB free");
    } finally {
      hog.close();
      x.buffer().close();
    }
  }
}
