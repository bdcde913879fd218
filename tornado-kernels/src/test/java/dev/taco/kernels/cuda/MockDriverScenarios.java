package dev.taco.kernels.cuda;

import static dev.taco.kernels.cuda.TaskGraph.COMMUNICATION_LANE;
import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.jna.NativeLibrary;
import com.sun.jna.Pointer;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * {@link ExecutionPlan} against the mock driver of {@link MockDriverTest}, in the child JVM that test starts (the
 * process-wide {@link CudaDriver} is the mock there): each scenario asserts the results the mock's CPU kernels compute
 * and the exact sequence of stream-ordered driver calls the mock logged. {@link #main} prints {@code PASS name} or
 * {@code FAIL name: error} per scenario. The kernels are {@link LaneKernels}, translated on the spot.
 */
final class MockDriverScenarios {
  private MockDriverScenarios() {}

  static final int N = 1000;
  static final WorkerGrid GRID = WorkerGrid.cover(N, 256);

  /** @return the scenarios in the order {@link #main} runs them */
  static Map<String, MockScenarios.Scenario> scenarios() {
    Map<String, MockScenarios.Scenario> m = new LinkedHashMap<>();
    m.put("two-lanes-wait-across-lanes", MockDriverScenarios::twoLanes);
    m.put("one-lane-needs-no-events", MockDriverScenarios::oneLane);
    m.put("capture-then-one-graph-launch", MockDriverScenarios::captureReplay);
    m.put("first-execution-transfers-before-capture", MockDriverScenarios::firstExecutionUnderCapture);
    m.put("uncapturable-graphs-refused", MockDriverScenarios::uncapturable);
    m.put("failed-capture-ends-capture", MockDriverScenarios::failedCapture);
    m.put("mock-requires-join", MockDriverScenarios::mockRequiresJoin);
    m.put("enqueue-without-host-sync", MockDriverScenarios::enqueue);
    m.put("host-copy-waits-for-its-dma", MockDriverScenarios::hostCopyWaits);
    m.put("grid-scheduler", MockDriverScenarios::grids);
    m.put("modules-cached-per-context", MockDriverScenarios::modulesCached);
    m.put("close-idempotent", MockDriverScenarios::close);
    m.put("other-contexts-refused", MockDriverScenarios::otherContexts);
    m.put("launcher-launches-at-once", MockDriverScenarios::launcher);
    return m;
  }

  public static void main(String[] args) {
    MockScenarios.runAndExit(scenarios(), MockDriverScenarios::clearLog);
  }

  // ------------------------------------------------------------------ the mock's log

  private static NativeLibrary mock() {
    return NativeLibrary.getInstance(System.getProperty("taco.libcuda"));
  }

  static String log() {
    return mock().getFunction("mock_log").invokeString(new Object[0], false);
  }

  static void clearLog() {
    mock().getFunction("mock_log_clear").invokeVoid(new Object[0]);
  }

  static int id(long handle) {
    return mock().getFunction("mock_id").invokeInt(new Object[] {new Pointer(handle)});
  }

  /**
   * The log since the last {@link #clearLog()} without timing-event records, streams named by the plan's lanes
   * ({@code L0}, {@code L1}) and events {@code E1, E2, ...} in order of first appearance.
   */
  static String calls(ExecutionPlan plan) {
    Map<String, String> streams = new HashMap<>();
    for (int l = 0; l < plan.graph().lanes(); l++) {
      streams.put("s" + id(plan.lane(l).handle()), "L" + l);
    }
    Map<String, String> events = new HashMap<>();
    String text = log().lines().filter(l -> !l.startsWith("time ") && !l.startsWith("capture time "))
        .collect(Collectors.joining("\n", "", "\n"));
    Matcher m = Pattern.compile("\\b([se]\\d+)\\b").matcher(text);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String tok = m.group(1);
      String named = tok.startsWith("s") ? streams.getOrDefault(tok, tok)
          : events.computeIfAbsent(tok, t -> "E" + (events.size() + 1));
      m.appendReplacement(out, named);
    }
    m.appendTail(out);
    return out.toString();
  }

  // ------------------------------------------------------------------ graphs

  /** Device buffers of {@code N} floats, closed together. */
  static final class Buffers implements AutoCloseable {
    final DeviceBuffer x;
    final DeviceBuffer y;
    final DeviceBuffer z;
    final DeviceBuffer c;

    Buffers(CudaContext ctx) {
      x = ctx.alloc(4L * N);
      y = ctx.alloc(4L * N);
      z = ctx.alloc(4L * N);
      c = ctx.alloc(4L * N);
    }

    @Override
    public void close() {
      x.close();
      y.close();
      z.close();
      c.close();
    }
  }

  static float[] ramp(float scale) {
    float[] v = new float[N];
    for (int i = 0; i < N; i++) {
      v[i] = (i % 17) * scale;
    }
    return v;
  }

  /** {@code c = 3 x + x}: scale on lane 0, the wire (y → z) on lane 1 after it, add on lane 0 after the wire. */
  static ImmutableTaskGraph pipeline(Buffers b, float[] x, float[] c) {
    return new TaskGraph("pipeline")
        .transferToDevice(DataTransferMode.EVERY_EXECUTION, x, b.x)
        .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
        .step(new CopyStep("wire", b.y, b.z, true)).onLane(COMMUNICATION_LANE).after("scale")
        .task("add", LaneKernels::add, KERNEL_CONTEXT, b.z, b.x, b.c, N).grid(GRID).after("wire")
        .transferToHost(DataTransferMode.EVERY_EXECUTION, b.c, c)
        .snapshot();
  }

  static void expectFourX(float[] x, float[] c) {
    for (int i = 0; i < N; i++) {
      assertThat(c[i]).as("c[%d]", i).isEqualTo(4 * x[i]);
    }
  }

  static final String EAGER_CALLS = """
      record E1 L0
      wait L1 E1
      htod L0
      launch scale g=4 b=256 L0
      record E2 L0
      wait L1 E2
      dtod L1
      record E3 L1
      wait L0 E3
      launch add g=4 b=256 L0
      dtoh L0
      sync L0
      """;

  // ------------------------------------------------------------------ scenarios

  static void twoLanes(CudaContext ctx) {
    float[] x = ramp(1f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx); ExecutionPlan plan = new ExecutionPlan(ctx, pipeline(b, x, c))) {
      plan.execute();
      expectFourX(x, c);
      // the fork from lane 0, one event per cross-lane dependency, no join (lane 0 already waited on the wire)
      assertThat(calls(plan)).isEqualTo("module-load scale\nmodule-load add\n" + EAGER_CALLS);
      clearLog();
      x[5] = 100f;
      plan.execute();
      expectFourX(x, c);
      assertThat(calls(plan)).isEqualTo(EAGER_CALLS);
      assertThat(plan.launches()).isEqualTo(4);
      assertThat(plan.taskMillis()).containsOnlyKeys("scale", "wire", "add").allSatisfy((k, ms) -> assertThat(ms)
          .isPositive());
      assertThatThrownBy(() -> plan.taskMillis("toDevice0")).isInstanceOf(IllegalArgumentException.class);
      assertThatThrownBy(() -> plan.cudaGraphNodes()).isInstanceOf(IllegalStateException.class);
    }
  }

  static void oneLane(CudaContext ctx) {
    float[] x = ramp(2f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx); ExecutionPlan plan = new ExecutionPlan(ctx, new TaskGraph("one")
        .transferToDevice(DataTransferMode.EVERY_EXECUTION, x, b.x)
        .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
        .task("add", LaneKernels::add, KERNEL_CONTEXT, b.y, b.x, b.c, N).grid(GRID).after("scale")
        .transferToHost(DataTransferMode.EVERY_EXECUTION, b.c, c)
        .snapshot())) {
      plan.execute();
      expectFourX(x, c);
      assertThat(calls(plan)).isEqualTo("""
          htod L0
          launch scale g=4 b=256 L0
          launch add g=4 b=256 L0
          dtoh L0
          sync L0
          """);
    }
  }

  static void captureReplay(CudaContext ctx) {
    float[] x = ramp(1f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx);
        ExecutionPlan plan = new ExecutionPlan(ctx, pipeline(b, x, c)).withCudaGraph()) {
      plan.execute();
      expectFourX(x, c);
      assertThat(calls(plan)).isEqualTo("""
          begin-capture L0 mode=1
          capture record E1 L0
          capture wait L1 E1
          capture htod L0
          capture launch scale g=4 b=256 L0
          capture record E2 L0
          capture wait L1 E2
          capture dtod L1
          capture record E3 L1
          capture wait L0 E3
          capture launch add g=4 b=256 L0
          capture dtoh L0
          end-capture L0 nodes=5
          instantiate nodes=5
          graph-launch L0 nodes=5
          sync L0
          """);
      for (int round = 0; round < 3; round++) {
        clearLog();
        for (int i = 0; i < N; i++) {
          x[i] = -(round + 1) * (i % 13); // the captured copies read the staging buffers, refilled per execution
        }
        plan.execute();
        expectFourX(x, c);
        assertThat(calls(plan)).isEqualTo("graph-launch L0 nodes=5\nsync L0\n");
      }
      assertThat(plan.launches()).isEqualTo(4);
      assertThat(plan.cudaGraphNodes()).isEqualTo(5);
      assertThatThrownBy(() -> plan.taskMillis("scale")).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("CUDA-graph replay");
    }
  }

  static void firstExecutionUnderCapture(CudaContext ctx) {
    float[] a = ramp(1f);
    float[] x = ramp(10f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx); ExecutionPlan plan = new ExecutionPlan(ctx, new TaskGraph("weights")
        .transferToDevice(DataTransferMode.FIRST_EXECUTION, a, b.y).onLane(COMMUNICATION_LANE)
        .transferToDevice(DataTransferMode.EVERY_EXECUTION, x, b.x)
        .task("add", LaneKernels::add, KERNEL_CONTEXT, b.y, b.x, b.c, N).grid(GRID).after("toDevice0")
        .transferToHost(DataTransferMode.EVERY_EXECUTION, b.c, c)
        .snapshot()).withCudaGraph(CudaGraph.CaptureMode.GLOBAL)) {
      plan.execute();
      assertThat(calls(plan)).isEqualTo("""
          htod L0
          begin-capture L0 mode=0
          capture htod L0
          capture launch add g=4 b=256 L0
          capture dtoh L0
          end-capture L0 nodes=3
          instantiate nodes=3
          graph-launch L0 nodes=3
          sync L0
          """);
      float[] first = a.clone();
      java.util.Arrays.fill(a, -7f); // FIRST_EXECUTION: the device keeps the first a
      x[3] = 1000f;
      plan.execute();
      for (int i = 0; i < N; i++) {
        assertThat(c[i]).isEqualTo(first[i] + x[i]);
      }
    }
  }

  static void uncapturable(CudaContext ctx) {
    try (Buffers b = new Buffers(ctx)) {
      ImmutableTaskGraph barrier = new TaskGraph("barrier")
          .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
          .step(new CopyStep("barrier", b.y, b.z, false)).onLane(COMMUNICATION_LANE).after("scale")
          .snapshot();
      try (ExecutionPlan plan = new ExecutionPlan(ctx, barrier)) {
        assertThatThrownBy(plan::withCudaGraph).isInstanceOf(IllegalStateException.class)
            .hasMessageContaining("task graph 'barrier' cannot be captured into a CUDA graph: step 'barrier' is not "
                + "capturable");
        plan.execute(); // eagerly it runs
      }
      ImmutableTaskGraph once = new TaskGraph("once")
          .transferToHost(DataTransferMode.FIRST_EXECUTION, b.c, new float[N]).snapshot();
      try (ExecutionPlan plan = new ExecutionPlan(ctx, once)) {
        assertThatThrownBy(plan::withCudaGraph).hasMessageContaining("FIRST_EXECUTION device→host transfer 'toHost0'");
      }
      ImmutableTaskGraph late = new TaskGraph("late")
          .step(new CopyStep("w", b.x, b.y, true))
          .transferToDevice(DataTransferMode.FIRST_EXECUTION, new float[N], b.x).after("w").snapshot();
      try (ExecutionPlan plan = new ExecutionPlan(ctx, late)) {
        assertThatThrownBy(plan::withCudaGraph).hasMessageContaining("cannot run after [w]");
      }
    }
  }

  static void failedCapture(CudaContext ctx) {
    try (Buffers b = new Buffers(ctx); ExecutionPlan plan = new ExecutionPlan(ctx, new TaskGraph("fails")
        .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
        .step(TaskGraph.Step.of("broken", true, stream -> {
          throw new IllegalStateException("collective failed");
        })).onLane(COMMUNICATION_LANE).after("scale")
        .snapshot()).withCudaGraph()) {
      assertThatThrownBy(plan::execute).isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("collective failed");
      assertThat(plan.lane(0).isCapturing()).isFalse();
      assertThat(plan.lane(1).isCapturing()).isFalse();
      assertThat(log()).contains("begin-capture").contains("end-capture");
      plan.lane(0).synchronize(); // usable again
    }
  }

  /** The mock enforces what the plan's join guarantees: a forked stream must be joined before the capture ends. */
  static void mockRequiresJoin(CudaContext ctx) {
    try (Buffers b = new Buffers(ctx); CudaStream s0 = ctx.createStream(); CudaStream s1 = ctx.createStream();
        CudaEvent fork = ctx.createSyncEvent()) {
      s0.beginCapture(CudaGraph.CaptureMode.THREAD_LOCAL);
      fork.record(s0);
      s1.waitEvent(fork);
      b.y.copyFromAsync(b.x, 4L * N, s1);
      assertThatThrownBy(s0::endCapture).isInstanceOf(CudaException.class)
          .hasMessageContaining("CUDA_ERROR_STREAM_CAPTURE_UNJOINED");
      assertThat(s0.isCapturing()).isFalse();
    }
  }

  static void enqueue(CudaContext ctx) {
    float[] x = ramp(1f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx)) {
      b.x.copyFrom(x);
      ImmutableTaskGraph device = new TaskGraph("device")
          .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
          .step(new CopyStep("wire", b.y, b.z, true)).onLane(COMMUNICATION_LANE).after("scale")
          .task("add", LaneKernels::add, KERNEL_CONTEXT, b.z, b.x, b.c, N).grid(GRID).after("wire")
          .snapshot();
      for (boolean graph : new boolean[] {false, true}) {
        try (ExecutionPlan plan = new ExecutionPlan(ctx, device)) {
          if (graph) {
            plan.withCudaGraph();
          }
          b.c.memset((byte) 0);
          clearLog();
          plan.enqueue();
          plan.enqueue();
          assertThat(log()).doesNotContain("sync");
          plan.lane(0).synchronize();
          b.c.copyTo(c);
          expectFourX(x, c);
        }
      }
      try (ExecutionPlan plan = new ExecutionPlan(ctx, pipeline(b, x, c))) {
        assertThatThrownBy(plan::enqueue).isInstanceOf(IllegalStateException.class)
            .hasMessageContaining("enqueue() cannot run 'toHost0'").hasMessageContaining("need execute()");
      }
      try (ExecutionPlan plan = new ExecutionPlan(ctx, new TaskGraph("in")
          .transferToDevice(DataTransferMode.EVERY_EXECUTION, x, b.x).snapshot())) {
        plan.enqueue(); // the first execution may stage its input
        assertThatThrownBy(plan::enqueue).hasMessageContaining("enqueue() cannot run 'toDevice0'");
        plan.execute(); // waits for the enqueued one before refilling the staging buffer
      }
    }
  }

  /**
   * A copy from a host array ends by synchronising the legacy stream (s0), where the driver's DMA of a pageable copy
   * may still be in flight when {@code cuMemcpyHtoD} returns; an empty copy touches nothing.
   */
  static void hostCopyWaits(CudaContext ctx) {
    float[] x = ramp(1f);
    try (Buffers b = new Buffers(ctx)) {
      clearLog();
      b.x.copyFromHost(x, 0, 0, 0);
      assertThat(log()).isEmpty();
      b.x.copyFrom(x);
      assertThat(log()).isEqualTo("sync s0\n");
      float[] back = new float[N];
      b.x.copyTo(back);
      assertThat(back).isEqualTo(x);
    }
  }

  static void grids(CudaContext ctx) {
    try (Buffers b = new Buffers(ctx)) {
      ImmutableTaskGraph g = new TaskGraph("grids")
          .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
          .task("add", LaneKernels::add, KERNEL_CONTEXT, b.y, b.x, b.c, N)
          .snapshot();
      try (ExecutionPlan plan = new ExecutionPlan(ctx, g)) {
        assertThatThrownBy(plan::execute).isInstanceOf(IllegalStateException.class)
            .hasMessageContaining("task 'add' of graph 'grids' has no grid");
      }
      try (ExecutionPlan plan = new ExecutionPlan(ctx, g).withGridScheduler(new GridScheduler("addd", GRID))) {
        assertThatThrownBy(plan::execute).hasMessageContaining("names 'addd', which is no kernel task");
      }
      try (ExecutionPlan plan = new ExecutionPlan(ctx, g)
          .withGridScheduler(new GridScheduler("add", WorkerGrid.of(1, 2048)))) {
        assertThatThrownBy(plan::execute).isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("more than 1024 threads per block");
      }
      try (ExecutionPlan plan = new ExecutionPlan(ctx, g).withGridScheduler(new GridScheduler("add", GRID)
          .setWorkerGrid("scale", WorkerGrid.of(8, 128)))) {
        clearLog();
        plan.execute();
        assertThat(calls(plan)).isEqualTo("launch scale g=8 b=128 L0\nlaunch add g=4 b=256 L0\nsync L0\n");
        assertThatThrownBy(() -> plan.withGridScheduler(new GridScheduler()))
            .isInstanceOf(IllegalStateException.class).hasMessageContaining("before the first execution");
        assertThatThrownBy(plan::withCudaGraph).isInstanceOf(IllegalStateException.class);
      }
    }
  }

  static void modulesCached(CudaContext ctx) {
    try (Buffers b = new Buffers(ctx)) {
      ImmutableTaskGraph g = new TaskGraph("again")
          .task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N).grid(GRID)
          .snapshot();
      try (ExecutionPlan p1 = new ExecutionPlan(ctx, g); ExecutionPlan p2 = new ExecutionPlan(ctx, g)) {
        p1.execute();
        p2.execute();
      }
      assertThat(log().lines().filter(l -> l.startsWith("module-load"))).hasSizeLessThanOrEqualTo(1);
      assertThat(ctx.kernel(g.kernelRequest("scale"))).isSameAs(ctx.kernel(g.kernelRequest("scale")));
      clearLog();
      String spin = "extern \"C\" __global__ void spin(long long ns) {}";
      CudaFunction f = ctx.function(spin, "spin.cu", "spin");
      assertThat(ctx.function(spin, "spin.cu", "spin")).isSameAs(f);
      assertThat(log().lines().filter(l -> l.startsWith("module-load"))).hasSize(1);
    }
  }

  static void close(CudaContext ctx) {
    float[] x = ramp(1f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx)) {
      ExecutionPlan plan = new ExecutionPlan(ctx, pipeline(b, x, c)).withCudaGraph();
      plan.execute();
      clearLog();
      plan.close();
      plan.close();
      assertThat(log()).isEqualTo("graph-exec-destroy\ngraph-destroy\n");
      assertThatThrownBy(plan::execute).isInstanceOf(IllegalStateException.class).hasMessageContaining("closed");
      assertThatThrownBy(() -> plan.lane(0)).isInstanceOf(IllegalStateException.class);
    }
  }

  static void otherContexts(CudaContext ctx) {
    DeviceBuffer fake = new DeviceBuffer(null, 0x7000_0000L, 4L * N, false);
    ImmutableTaskGraph g = new TaskGraph("fake")
        .task("scale", LaneKernels::scale, KERNEL_CONTEXT, fake, fake, 3f, N).grid(GRID).snapshot();
    assertThatThrownBy(() -> new ExecutionPlan(ctx, g)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("node 'scale' uses a buffer or kernel of another CUDA context");
  }

  /**
   * {@link Launcher}: each task launches at once on the launcher's stream (no graph, no events), the kernel named by its
   * method reference is loaded once however often it runs, and a mistyped value is refused before anything launches.
   */
  static void launcher(CudaContext ctx) {
    float[] x = ramp(2f);
    float[] c = new float[N];
    try (Buffers b = new Buffers(ctx); CudaStream s = ctx.createStream()) {
      b.x.copyFrom(x);
      Launcher kernels = new Launcher(ctx);
      clearLog();
      for (int i = 0; i < 2; i++) {
        kernels.on(Dim3.of(4), Dim3.of(256), s).task("scale", LaneKernels::scale, KERNEL_CONTEXT, b.x, b.y, 3f, N);
        kernels.on(Dim3.of(4), Dim3.of(256), s).task("add", LaneKernels::add, KERNEL_CONTEXT, b.y, b.x, b.c, N);
      }
      s.synchronize();
      b.c.copyTo(c);
      expectFourX(x, c);
      String sid = "s" + id(s.handle());
      assertThat(log().lines().filter(l -> l.startsWith("launch")).toList()).containsExactly(
          "launch scale g=4 b=256 " + sid, "launch add g=4 b=256 " + sid, "launch scale g=4 b=256 " + sid,
          "launch add g=4 b=256 " + sid);
      assertThat(log().lines().filter(l -> l.startsWith("module-load"))).hasSizeLessThanOrEqualTo(2);
      clearLog();
      assertThatThrownBy(() -> kernels.on(Dim3.of(4), Dim3.of(256), s).task("scale", LaneKernels::scale, KERNEL_CONTEXT,
          b.x, b.y, 3.0, N)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("task 'scale': argument 3 (s: float)");
      assertThat(log()).doesNotContain("launch");
    }
  }
}
