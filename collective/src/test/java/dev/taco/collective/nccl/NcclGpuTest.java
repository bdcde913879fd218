package dev.taco.collective.nccl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowableOfType;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.taco.collective.CollectiveException;
import dev.taco.kernels.cuda.Cuda;
import dev.taco.kernels.cuda.CudaContext;
import dev.taco.kernels.cuda.CudaStream;
import dev.taco.kernels.cuda.SpinKernel;
import dev.taco.kernels.cuda.DeviceBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestMethodOrder;

/**
 * NCCL on real GPUs: every op on fp32 / bf16 / uint8 with random integer inputs against exact expectations (at world
 * size 1 on device 0, and with {@code initAll} over every visible device), {@code fromEnvironment}, NCCL's error
 * strings, abort, and a watchdog that fires on a collective stuck behind a spinning kernel. Skipped, with the reason,
 * where there is no GPU or no libnccl. Self-contained (the JUnit console launcher runs it without Maven); the seed is
 * printed and can be fixed with {@code -Dtaco.seed=N}.
 */
@Tag("gpu")
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
class NcclGpuTest {
  private static final Duration INIT = Duration.ofSeconds(60);
  private static final int COUNT = 4099; // odd: no power-of-two luck

  private static final long SEED = Long.getLong("taco.seed", System.nanoTime());
  private static CudaContext ctx;

  @BeforeAll
  static void open() {
    System.out.println("NcclGpuTest seed = " + SEED + " (-Dtaco.seed=" + SEED + " repeats it)");
    if (ready()) ctx = CudaContext.open(0);
  }

  @AfterAll
  static void close() {
    if (ctx != null) ctx.close();
  }

  private static boolean ready() {
    return Nccl.available() && Cuda.available();
  }

  private static void assumeGpu() {
    assumeTrue(ready(), () -> Nccl.unavailableReason() + "; " + Cuda.unavailableReason());
  }

  private static NcclCommunicator single(Duration opTimeout) {
    return NcclCommunicator.init(ctx, 0, 1, Nccl.get().uniqueId(), INIT, opTimeout);
  }

  // ------------------------------------------------------------------ every op, exact

  @Test
  @Order(1)
  void everyOpAtWorldSizeOne() throws Exception {
    assumeGpu();
    try (NcclCommunicator c = single(NcclCommunicator.DEFAULT_TIMEOUT)) {
      assertThat(c.rank()).isZero();
      assertThat(c.worldSize()).isEqualTo(1);
      assertThat(c.cudaDevice()).isZero();
      checkEveryOp(List.of(c));
      assertThat(c.failure()).isNull();
    }
  }

  @Test
  @Order(2)
  void initAllOverEveryVisibleDevice() throws Exception {
    assumeGpu();
    List<CudaContext> devices = new ArrayList<>();
    for (int d = 0; d < Cuda.deviceCount(); d++) devices.add(d == 0 ? ctx : CudaContext.open(d));
    System.out.println("initAll over " + devices.size() + " device(s)");
    List<NcclCommunicator> comms = NcclCommunicator.initAll(devices, INIT);
    try {
      assertThat(comms).hasSize(devices.size());
      for (int r = 0; r < comms.size(); r++) {
        assertThat(comms.get(r).rank()).isEqualTo(r);
        assertThat(comms.get(r).worldSize()).isEqualTo(devices.size());
        assertThat(comms.get(r).cudaDevice()).isEqualTo(devices.get(r).ordinal());
      }
      checkEveryOp(comms);
    } finally {
      onEveryRank(comms, NcclCommunicator::close); // finalize is collective: every rank at once
      for (CudaContext d : devices) if (d != ctx) d.close();
    }
    assertThat(comms).allSatisfy(c -> assertThat(c.failure()).as("clean close").isNull());
  }

  @Test
  @Order(3)
  void fromEnvironmentAtWorldSizeOne() {
    assumeGpu();
    Map<String, String> env = Map.of("RANK", "0", "WORLD_SIZE", "1", "MASTER_PORT",
        String.valueOf(RendezvousTest.freePort()));
    try (NcclCommunicator c = NcclCommunicator.fromEnvironment(env, INIT);
        CudaStream st = c.context().createStream();
        DeviceBuffer b = c.context().alloc(64L * 4)) {
      assertThat(c.rank()).isZero();
      assertThat(c.worldSize()).isEqualTo(1);
      assertThat(c.cudaDevice()).isZero();
      float[] x = new float[64];
      for (int i = 0; i < x.length; i++) x[i] = i - 7;
      b.copyFrom(x);
      c.context().synchronize();
      c.allReduce(b, b, 64, NcclDataType.FLOAT32, st);
      c.synchronize(st);
      float[] y = new float[64];
      b.copyTo(y);
      assertThat(y).containsExactly(x);
    }
  }

  // ------------------------------------------------------------------ errors, abort, watchdog

  @Test
  @Order(4)
  void ncclErrorsCarryTheErrorStringAndAbortTheCommunicator() throws Exception {
    assumeGpu();
    Nccl nccl = Nccl.get();
    NcclException nullComm = catchThrowableOfType(NcclException.class, () -> nccl.commCount(0));
    assertThat(nullComm).as("ncclCommCount(NULL) fails").isNotNull();
    assertThat(nullComm.result()).isEqualTo(Nccl.INVALID_ARGUMENT);
    assertThat(nullComm).hasMessageStartingWith("ncclCommCount failed: ncclInvalidArgument (4): "
        + nccl.errorString(Nccl.INVALID_ARGUMENT));
    assertThat(nccl.errorString(Nccl.INVALID_ARGUMENT)).contains("invalid argument");
    System.out.println("null comm: " + nullComm.getMessage());

    try (NcclCommunicator c = single(NcclCommunicator.DEFAULT_TIMEOUT);
        CudaStream st = ctx.createStream();
        DeviceBuffer b = ctx.alloc(64)) {
      assertThatThrownBy(() -> c.broadcast(b, b, 16, NcclDataType.FLOAT32, 1, st))
          .as("a root out of range is refused before NCCL, leaving the communicator healthy")
          .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("root 1 outside [0, 1)");
      assertThat(c.failure()).isNull();

      NcclException badRoot = catchThrowableOfType(NcclException.class,
          () -> nccl.broadcast(b.pointer(), b.pointer(), 16, NcclDataType.FLOAT32, 5, c.handle(), st.handle()));
      assertThat(badRoot).as("ncclBroadcast with root 5 of 1 fails").isNotNull();
      System.out.println("bad root: " + badRoot.getMessage());
      assertThat(badRoot.call()).isEqualTo("ncclBroadcast");
      assertThat(badRoot.result()).isEqualTo(Nccl.INVALID_ARGUMENT);
      assertThat(badRoot.errorString()).isEqualTo(nccl.errorString(Nccl.INVALID_ARGUMENT));
      assertThat(badRoot.lastError()).contains("invalid root 5");
      assertThat(badRoot).hasMessageStartingWith("ncclBroadcast failed: ncclInvalidArgument (4): invalid argument");

      // A non-blocking communicator keeps the error as its state: the watchdog sees it and aborts.
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(2);
      while (c.failure() == null && System.nanoTime() < deadline) Thread.sleep(5);
      System.out.println("failure: " + c.failure());
      assertThat(c.failure()).startsWith("rank 0: NCCL async error ncclInvalidArgument (4): ")
          .endsWith(": communicator aborted");
      assertThatThrownBy(() -> c.allReduce(b, b, 16, NcclDataType.FLOAT32, st))
          .isInstanceOf(CollectiveException.class).hasMessage(c.failure());
    }
  }

  @Test
  @Order(5)
  void abortThenFurtherUseFailsClearly() {
    assumeGpu();
    NcclCommunicator closedOne;
    try (NcclCommunicator c = single(NcclCommunicator.DEFAULT_TIMEOUT);
        CudaStream st = ctx.createStream();
        DeviceBuffer b = ctx.alloc(64)) {
      c.allReduce(b, b, 16, NcclDataType.FLOAT32, st);
      c.synchronize(st);
      assertThat(c.failure()).isNull();
      c.abort("test abort");
      String expected = "rank 0: test abort: communicator aborted";
      assertThat(c.failure()).isEqualTo(expected);
      assertThat(c.handle()).as("ncclCommAbort freed it").isZero();
      assertThatThrownBy(() -> c.allReduce(b, b, 16, NcclDataType.FLOAT32, st))
          .isInstanceOf(CollectiveException.class).hasMessage(expected);
      assertThatThrownBy(() -> c.allToAll(b, b, 8, st)).isInstanceOf(CollectiveException.class).hasMessage(expected);
      assertThatThrownBy(() -> c.synchronize(st)).isInstanceOf(CollectiveException.class).hasMessage(expected);
      c.abort("a second abort changes nothing");
      assertThat(c.failure()).isEqualTo(expected);
    }
    try (NcclCommunicator c = single(NcclCommunicator.DEFAULT_TIMEOUT)) {
      closedOne = c;
    }
    assertThat(closedOne.failure()).as("finalize + destroy, no abort").isNull();
    try (CudaStream st = ctx.createStream()) {
      assertThatThrownBy(() -> closedOne.allReduce(0, 0, 0, NcclDataType.UINT8, st))
          .isInstanceOf(IllegalStateException.class).hasMessage("rank 0: communicator is closed");
    }
  }

  @Test
  @Order(99)
  void aRankThreadThatStopsMakesTheOtherFailWithinItsTimeout() throws Exception {
    assumeGpu();
    assumeTrue(Cuda.deviceCount() >= 2, "needs two GPUs: NCCL takes one rank per GPU");
    UniqueId id = Nccl.get().uniqueId();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try (CudaContext other = CudaContext.open(1)) {
      Future<NcclCommunicator> f0 = pool
          .submit(() -> NcclCommunicator.init(ctx, 0, 2, id, INIT, Duration.ofSeconds(2)));
      Future<NcclCommunicator> f1 = pool.submit(() -> NcclCommunicator.init(other, 1, 2, id, INIT,
          Duration.ofSeconds(2)));
      List<NcclCommunicator> comms = List.of(f0.get(90, TimeUnit.SECONDS), f1.get(90, TimeUnit.SECONDS));
      try (CudaStream st = ctx.createStream();
          DeviceBuffer send = ctx.alloc(1024L * 4);
          DeviceBuffer recv = ctx.alloc(1024L * 4)) {
        long t0 = System.nanoTime();
        comms.get(0).allReduce(send, recv, 1024, NcclDataType.FLOAT32, st); // rank 1's thread never comes
        CollectiveException e = catchThrowableOfType(CollectiveException.class, () -> comms.get(0).synchronize(st));
        double seconds = (System.nanoTime() - t0) / 1e9;
        System.out.printf("rank 0 failed %.3f s after its all-reduce: %s%n", seconds,
            e == null ? null : e.getMessage());
        assertThat(e).as("synchronize throws").isNotNull()
            .hasMessageContaining("rank 0: allReduce(count=1024, fp32) not complete after 2.0 s");
        assertThat(seconds).as("about the 2 s timeout").isBetween(1.9, 6.0);
      } finally {
        onEveryRank(comms, NcclCommunicator::close);
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test
  @Order(100) // last: the spinning kernel holds the GPU for 3 s
  void theWatchdogAbortsACollectiveStuckBehindASpinningKernel() throws Exception {
    assumeGpu();
    SpinKernel spin = new SpinKernel(ctx);
    try (CudaStream st = ctx.createStream();
        DeviceBuffer send = ctx.alloc(1024L * 4);
        DeviceBuffer recv = ctx.alloc(1024L * 4)) {
      try (NcclCommunicator c = single(Duration.ofSeconds(1))) {
        spin.enqueue(st, 3_000_000_000L);
        long t0 = System.nanoTime();
        c.allReduce(send, recv, 1024, NcclDataType.FLOAT32, st);
        CollectiveException e = catchThrowableOfType(CollectiveException.class, () -> c.synchronize(st));
        assertThat(e).as("synchronize throws").isNotNull();
        double seconds = (System.nanoTime() - t0) / 1e9;
        System.out.printf("watchdog fired after %.3f s: %s%n", seconds, e.getMessage());
        String expected = "rank 0: allReduce(count=1024, fp32) not complete after 1.0 s: communicator aborted "
            + "(watchdog)";
        assertThat(e).hasMessage(expected);
        assertThat(seconds).as("aborted about 1 s after the enqueue, not after the 3 s spin").isBetween(0.9, 2.5);
        assertThat(c.failure()).isEqualTo(expected);
        assertThatThrownBy(() -> c.allReduce(send, recv, 1024, NcclDataType.FLOAT32, st))
            .isInstanceOf(CollectiveException.class).hasMessage(expected);
      }
      st.synchronize(); // let the spin end before the buffers go
    }
  }

  // ------------------------------------------------------------------ helpers

  /** Something one rank does with its communicator. */
  @FunctionalInterface
  interface RankWork {
    void run(NcclCommunicator c) throws Exception;
  }

  /** Runs {@code work} on one thread per communicator (ranks must enter collectives together). */
  private static void onEveryRank(List<NcclCommunicator> comms, RankWork work) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(comms.size());
    try {
      List<Future<?>> fs = new ArrayList<>();
      for (NcclCommunicator c : comms) {
        fs.add(pool.submit(() -> {
          work.run(c);
          return null;
        }));
      }
      for (Future<?> f : fs) f.get(120, TimeUnit.SECONDS);
    } finally {
      pool.shutdownNow();
    }
  }

  /**
   * The types whose sums of the small integers {@link #inputs} draws are exact; NCCL's FP8 types round at every hop
   * (NcclFp8GpuTest checks them against the emulation of that arithmetic).
   */
  static final List<NcclDataType> EXACT_TYPES = List.of(NcclDataType.UINT8, NcclDataType.FLOAT32,
      NcclDataType.BFLOAT16);

  /** Every op on every exact type, on one thread per communicator of {@code comms} (all ranks of one group). */
  private static void checkEveryOp(List<NcclCommunicator> comms) throws Exception {
    for (NcclDataType t : EXACT_TYPES) {
      int[][] in = inputs(t, comms.size(), SEED);
      onEveryRank(comms, c -> checkRank(c, t, in, SEED));
    }
  }

  /**
   * Every rank's inputs for type {@code t}: {@code n * COUNT} random integers a rank, small enough to sum exactly;
   * the same on every rank (and in every process) for the same seed.
   */
  static int[][] inputs(NcclDataType t, int n, long seed) {
    Random rnd = new Random(seed * 31 + t.ordinal());
    int[][] in = new int[n][n * COUNT];
    int lo = t == NcclDataType.UINT8 ? 0 : t == NcclDataType.BFLOAT16 ? -16 : -1000;
    int hi = t == NcclDataType.UINT8 ? 255 / n : t == NcclDataType.BFLOAT16 ? 16 : 1000;
    for (int[] row : in) for (int i = 0; i < row.length; i++) row[i] = lo + rnd.nextInt(hi - lo + 1);
    return in;
  }

  /** Every op of rank {@code c} on type {@code t} against the exact results from every rank's inputs {@code in}. */
  static void checkRank(NcclCommunicator c, NcclDataType t, int[][] in, long seed) {
    int n = c.worldSize();
    int r = c.rank();
    int root = n - 1;
    String who = "rank " + r + ", " + t.label() + ", seed " + seed;
    CudaContext cx = c.context();
    long bytes = (long) COUNT * t.bytes();
    try (CudaStream st = cx.createStream();
        DeviceBuffer send = cx.alloc(n * bytes);
        DeviceBuffer recv = cx.alloc(n * bytes)) {
      send.copyFromHost(encode(in[r], t), 0, n * COUNT, 0);

      run(c, st, recv, () -> c.allReduce(send, recv, COUNT, t, st));
      assertThat(read(recv, COUNT, t)).as("allReduce, " + who).containsExactly(expected(in, (q, i) -> true, 0));

      recv.copyFrom(send, bytes);
      cx.synchronize();
      c.allReduce(recv, recv, COUNT, t, st);
      c.synchronize(st);
      assertThat(read(recv, COUNT, t)).as("in-place allReduce, " + who)
          .containsExactly(expected(in, (q, i) -> true, 0));

      run(c, st, recv, () -> c.allGather(send, recv, COUNT, t, st));
      int[] gathered = new int[n * COUNT];
      for (int q = 0; q < n; q++) System.arraycopy(in[q], 0, gathered, q * COUNT, COUNT);
      assertThat(read(recv, n * COUNT, t)).as("allGather, " + who).containsExactly(gathered);

      run(c, st, recv, () -> c.reduceScatter(send, recv, COUNT, t, st));
      assertThat(read(recv, COUNT, t)).as("reduceScatter, " + who)
          .containsExactly(expected(in, (q, i) -> true, r * COUNT));

      run(c, st, recv, () -> c.broadcast(send, recv, COUNT, t, root, st));
      assertThat(read(recv, COUNT, t)).as("broadcast, " + who)
          .containsExactly(expected(in, (q, i) -> q == root, 0));

      run(c, st, recv, () -> c.allToAll(send, recv, bytes, st));
      int[] exchanged = new int[n * COUNT];
      for (int q = 0; q < n; q++) System.arraycopy(in[q], r * COUNT, exchanged, q * COUNT, COUNT);
      assertThat(read(recv, n * COUNT, t)).as("allToAll, " + who).containsExactly(exchanged);
    }
  }

  /** Which (rank, index) terms a sum includes. */
  @FunctionalInterface
  interface Terms {
    boolean include(int rank, int index);
  }

  /** {@code COUNT} sums over ranks q of {@code in[q][offset + i]} where {@code terms} says so. */
  private static int[] expected(int[][] in, Terms terms, int offset) {
    int[] e = new int[COUNT];
    for (int q = 0; q < in.length; q++) {
      for (int i = 0; i < COUNT; i++) if (terms.include(q, i)) e[i] += in[q][offset + i];
    }
    return e;
  }

  /** Poisons {@code recv}, runs the op, waits for it. */
  private static void run(NcclCommunicator c, CudaStream st, DeviceBuffer recv, Runnable op) {
    recv.memset((byte) 0x55);
    c.context().synchronize(); // the synchronous copies and memsets are on the legacy stream
    op.run();
    c.synchronize(st);
  }

  private static Object encode(int[] v, NcclDataType t) {
    switch (t) {
      case FLOAT32 -> {
        float[] a = new float[v.length];
        for (int i = 0; i < v.length; i++) a[i] = v[i];
        return a;
      }
      case BFLOAT16 -> {
        short[] a = new short[v.length];
        for (int i = 0; i < v.length; i++) a[i] = (short) (Float.floatToRawIntBits(v[i]) >>> 16);
        return a;
      }
      default -> {
        byte[] a = new byte[v.length];
        for (int i = 0; i < v.length; i++) a[i] = (byte) v[i];
        return a;
      }
    }
  }

  /** Reads {@code n} elements as integers; a non-integral float reads as {@link Integer#MIN_VALUE}. */
  private static int[] read(DeviceBuffer b, int n, NcclDataType t) {
    int[] v = new int[n];
    switch (t) {
      case FLOAT32 -> {
        float[] a = new float[n];
        b.copyToHost(a, 0, n, 0);
        for (int i = 0; i < n; i++) v[i] = integral(a[i]);
      }
      case BFLOAT16 -> {
        short[] a = new short[n];
        b.copyToHost(a, 0, n, 0);
        for (int i = 0; i < n; i++) v[i] = integral(Float.intBitsToFloat((a[i] & 0xffff) << 16));
      }
      default -> {
        byte[] a = new byte[n];
        b.copyToHost(a, 0, n, 0);
        for (int i = 0; i < n; i++) v[i] = a[i] & 0xff;
      }
    }
    return v;
  }

  private static int integral(float f) {
    return f == Math.rint(f) ? (int) f : Integer.MIN_VALUE;
  }
}
