package dev.taco.kernels.cuda;

import static dev.taco.kernels.cuda.TaskGraph.KERNEL_CONTEXT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.sun.jna.Pointer;
import dev.taco.kernels.Fp8;
import dev.taco.kernels.KernelContext;
import dev.taco.kernels.compiler.KernelRequest;
import dev.taco.kernels.gpu.TacoGpuKernels;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * TaskGraph construction without a GPU: method-reference resolution (the kernel's class and method, the
 * specialisation from its {@code @Constant} parameters, the launch arguments, mistyped values refused naming the
 * parameter), lanes and the cross-lane waits they need ({@link LaneSchedule}), immutability of snapshots, and the
 * host-side checks of transfers, KernelArgs and buffer ranges. Fake buffers and kernels are never dereferenced.
 */
class TaskGraphTest {
  static final int ROWS = 8;
  static final int COLS = 1024;

  private static DeviceBuffer fake(long bytes) {
    return new DeviceBuffer(null, 0x7000_0000L, bytes, false);
  }

  private static CudaFunction kernel() {
    return new CudaFunction(null, 0x1234L, "k");
  }

  private record NamedStep(String name, boolean capturable) implements TaskGraph.Step {
    NamedStep(String name) {
      this(name, true);
    }

    @Override
    public void enqueue(CudaStream stream, boolean first) {}
  }

  // ------------------------------------------------------------------ method references

  @Test
  void methodReferenceNamesTheKernelAndItsSpecialisation() {
    DeviceBuffer xb = fake(2L * ROWS * COLS);
    DeviceBuffer xf = fake(4L * ROWS * COLS);
    DeviceBuffer body = fake(1 << 16);
    ImmutableTaskGraph g = new TaskGraph("g")
        .task("compress", TacoGpuKernels::compress, KERNEL_CONTEXT, xb, xf, body, ROWS, COLS, 64, true, Fp8.E4M3, true)
        .task("decompress", TacoGpuKernels::decompress, KERNEL_CONTEXT, body, xb, xf, ROWS, COLS, 64, true, Fp8.E4M3,
            false, true)
        .snapshot();
    assertThat(g.kernelRequest("compress")).isEqualTo(new KernelRequest(TacoGpuKernels.class.getName(), "compress",
        Map.of("groupSize", 64, "hadamard", true, "format", Fp8.E4M3, "bf16", true)));
    assertThat(g.launchArguments("compress")).containsExactly(xb, xf, body, ROWS, COLS);
    assertThat(g.kernelRequest("decompress").constants()).containsEntry("accumulate", true).containsEntry("bf16",
        false);
    assertThat(g.kernelRequests()).extracting(KernelRequest::methodName).containsExactly("compress", "decompress");
    assertThat(new TaskGraph("h").task("s", LaneKernels::scale, KERNEL_CONTEXT, xf, xf, 2f, 16).snapshot()
        .kernelRequest("s")).isEqualTo(KernelRequest.of(LaneKernels.class, "scale"));
  }

  @Test
  void mistypedValuesAreRefusedNamingTheTaskAndParameter() {
    DeviceBuffer b = fake(1 << 16);
    TaskGraph g = new TaskGraph("g");
    assertThatThrownBy(() -> g.task("c", TacoGpuKernels::compress, KERNEL_CONTEXT, b, b, b, (long) ROWS, COLS, 64, true,
        Fp8.E4M3, true)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(
            "task 'c': argument 4 (rows: int) of TacoGpuKernels.compress must be an Integer, got Long");
    assertThatThrownBy(() -> g.task("c", TacoGpuKernels::compress, KERNEL_CONTEXT, b, b, new byte[4], ROWS, COLS, 64,
        true, Fp8.E4M3, true)).hasMessageContaining("argument 3 (body: byte[])").hasMessageContaining("DeviceBuffer");
    assertThatThrownBy(() -> g.task("c", TacoGpuKernels::compress, KERNEL_CONTEXT, b, b, b, ROWS, COLS, 64, 1,
        Fp8.E4M3, true)).hasMessageContaining("argument 7 (hadamard: boolean)").hasMessageContaining("Boolean");
    assertThatThrownBy(() -> g.task("c", TacoGpuKernels::compress, b, b, b, b, ROWS, COLS, 64, true, Fp8.E4M3, true))
        .hasMessageContaining("argument 0 (ctx: KernelContext)").hasMessageContaining("KERNEL_CONTEXT");
    assertThatThrownBy(() -> g.task("c", TacoGpuKernels::compress, KERNEL_CONTEXT, b, b, b, ROWS, COLS, 64, true,
        Fp8.E4M3)).hasMessageContaining("has 10 parameters, got 9 values");
    assertThatThrownBy(() -> g.task("c", LaneKernels::scale, KERNEL_CONTEXT, b, b, 2.0, 16))
        .hasMessageContaining("argument 3 (s: float)").hasMessageContaining("must be a Float, got Double");
    assertThatThrownBy(() -> g.task("c", LaneKernels::scale, KERNEL_CONTEXT, b, null, 2f, 16))
        .hasMessageContaining("argument 2 (y: float[])").hasMessageContaining("is null");
    assertThatThrownBy(g::snapshot).hasMessageContaining("empty"); // refused tasks add nothing
  }

  @Test
  void onlyReferencesToUniqueStaticKernelsAreTasks() {
    TaskGraph g = new TaskGraph("g");
    TaskFunctions.Task1<Integer> lambda = x -> {};
    assertThatThrownBy(() -> g.task("l", lambda, 1)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not a lambda");
    TaskFunctions.Task1<Integer> anonymous = new TaskFunctions.Task1<>() {
      private static final long serialVersionUID = 1L;

      @Override
      public void apply(Integer a1) {}
    };
    assertThatThrownBy(() -> g.task("a", anonymous, 1)).hasMessageContaining("method reference Class::method");
    assertThatThrownBy(() -> g.<KernelContext, float[]>task("t", LaneKernels::twice, KERNEL_CONTEXT, fake(4)))
        .hasMessageContaining("overloaded");
    assertThatThrownBy(() -> KERNEL_CONTEXT.barrier()).isInstanceOf(UnsupportedOperationException.class)
        .hasMessageContaining("placeholder");
  }

  // ------------------------------------------------------------------ lanes

  private static String schedule(ImmutableTaskGraph g, boolean first) {
    return g.schedule(first).describe(g.nodes());
  }

  @Test
  void pipelinedChunksWaitOnlyAcrossLanes() {
    DeviceBuffer d = fake(64);
    ImmutableTaskGraph g = new TaskGraph("pipeline")
        .transferToDevice(DataTransferMode.EVERY_EXECUTION, new float[16], d)
        .step(new NamedStep("compress0"))
        .step(new NamedStep("wire0")).onLane(TaskGraph.COMMUNICATION_LANE).after("compress0")
        .step(new NamedStep("compress1")).after("toDevice0")
        .step(new NamedStep("wire1")).onLane(TaskGraph.COMMUNICATION_LANE).after("compress0", "compress1")
        .step(new NamedStep("decompress0")).after("wire0")
        .step(new NamedStep("decompress1")).after("wire0", "wire1", "decompress0")
        .transferToHost(DataTransferMode.EVERY_EXECUTION, d, new float[16])
        .snapshot();
    assertThat(g.lanes()).isEqualTo(2);
    assertThat(schedule(g, true)).isEqualTo("fork[1] toDevice0@0 compress0@0 wire0@1<-compress0 compress1@0 "
        + "wire1@1<-compress1 decompress0@0<-wire0 decompress1@0<-wire1 toHost0@0 join[]");
    assertThat(g.schedule(true).recorded()).containsExactly(g.indexOf("compress0"), g.indexOf("wire0"),
        g.indexOf("compress1"), g.indexOf("wire1"));
  }

  @Test
  void waitsImpliedByEarlierWaitsAreSkippedAndUncoveredLanesJoined() {
    ImmutableTaskGraph g = new TaskGraph("clock")
        .step(new NamedStep("a"))
        .step(new NamedStep("b")).onLane(1).after("a")
        .step(new NamedStep("c")).onLane(2).after("b")
        .step(new NamedStep("d")).after("c")
        .step(new NamedStep("e")).after("b", "a")
        .snapshot();
    assertThat(schedule(g, true)).isEqualTo("fork[1, 2] a@0 b@1<-a c@2<-b d@0<-c e@0 join[]");
    ImmutableTaskGraph open = new TaskGraph("open")
        .step(new NamedStep("a"))
        .step(new NamedStep("b")).onLane(1)
        .step(new NamedStep("c")).onLane(1)
        .step(new NamedStep("d")).onLane(3).after("a")
        .snapshot();
    assertThat(open.lanes()).isEqualTo(4);
    assertThat(schedule(open, false)).isEqualTo("fork[1, 3] a@0 b@1 c@1 d@3<-a join[c,d]");
    ImmutableTaskGraph one = new TaskGraph("one").step(new NamedStep("a")).step(new NamedStep("b")).after("a")
        .snapshot();
    assertThat(schedule(one, true)).isEqualTo("fork[] a@0 b@0 join[]");
    assertThat(one.schedule(true).recorded()).isEmpty();
  }

  @Test
  void firstExecutionTransfersDropOutOfLaterSchedules() {
    DeviceBuffer d = fake(64);
    ImmutableTaskGraph g = new TaskGraph("weights")
        .transferToDevice(DataTransferMode.FIRST_EXECUTION, new float[16], d).onLane(1)
        .step(new NamedStep("k")).after("toDevice0")
        .snapshot();
    assertThat(schedule(g, true)).isEqualTo("fork[1] toDevice0@1 k@0<-toDevice0 join[]");
    assertThat(schedule(g, false)).isEqualTo("fork[] k@0 join[]");
  }

  /** A kernel translated from Java indexes with x only: a grid with y or z above 1 would run each iteration y·z times. */
  @Test
  void aJavaKernelTakesOnlyOneDimensionalGrids() {
    DeviceBuffer xf = fake(4L * 16);
    TaskGraph g = new TaskGraph("g").task("s", LaneKernels::scale, KERNEL_CONTEXT, xf, xf, 2f, 16);
    for (WorkerGrid bad : new WorkerGrid[] {new WorkerGrid(Dim3.of(2, 3), Dim3.of(32), 0),
        new WorkerGrid(Dim3.of(1), new Dim3(32, 1, 2), 0)}) {
      assertThatThrownBy(() -> g.grid(bad)).isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("task 's'").hasMessageContaining("indexes with x only");
    }
    assertThat(g.grid(WorkerGrid.of(1, 32)).snapshot().nodeNames()).containsExactly("s");
    // a prebuilt kernel (CUDA C of its own) may use y and z
    new TaskGraph("p").prebuiltTask("k", kernel(), xf, 16).grid(new WorkerGrid(Dim3.of(2, 3), Dim3.of(32), 0));
  }

  @Test
  void lanesAndDependenciesAreChecked() {
    TaskGraph g = new TaskGraph("g").step(new NamedStep("a"));
    assertThatThrownBy(() -> g.onLane(TaskGraph.MAX_LANES)).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lane 8 out of range");
    assertThatThrownBy(() -> g.after("b")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("'a' cannot run after 'b'");
    assertThatThrownBy(() -> g.after("a")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> g.grid(WorkerGrid.of(1, 32))).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("not one");
    assertThatThrownBy(() -> new TaskGraph("e").onLane(1)).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("no node yet");
  }

  // ------------------------------------------------------------------ immutability and names

  @Test
  void snapshotsDoNotChangeWithTheBuilder() {
    DeviceBuffer d = fake(64);
    TaskGraph b = new TaskGraph("g").transferToDevice(DataTransferMode.FIRST_EXECUTION, new float[16], d)
        .prebuiltTask("k", kernel(), d, 16).grid(WorkerGrid.of(1, 16));
    ImmutableTaskGraph first = b.snapshot();
    b.step(new NamedStep("s")).onLane(1).after("k");
    ImmutableTaskGraph second = b.snapshot();
    assertThat(first.nodeNames()).containsExactly("toDevice0", "k");
    assertThat(first.lanes()).isEqualTo(1);
    assertThat(second.nodeNames()).containsExactly("toDevice0", "k", "s");
    assertThat(second.lanes()).isEqualTo(2);
    assertThatThrownBy(() -> first.nodeNames().add("x")).isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> first.launchArguments("k").add(1)).isInstanceOf(UnsupportedOperationException.class);
    assertThatThrownBy(() -> first.kernelRequest("k")).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no Java kernel task 'k'");
    assertThat(first.toString()).contains("toDevice0@0 k@0");
  }

  @Test
  void duplicateNamesAndEmptyGraphsAreRejected() {
    TaskGraph g = new TaskGraph("g").prebuiltTask("k", kernel());
    assertThatThrownBy(() -> g.prebuiltTask("k", kernel())).isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("duplicate");
    assertThatThrownBy(() -> g.step(new NamedStep("k"))).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> g.step(new NamedStep(" "))).hasMessageContaining("blank");
    assertThatThrownBy(() -> new TaskGraph("empty").snapshot()).isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("empty");
  }

  // ------------------------------------------------------------------ transfers and arguments

  @Test
  void mismatchedSizesAreRejected() {
    TaskGraph g = new TaskGraph("g");
    assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new float[17], fake(64)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mismatched sizes")
        .hasMessageContaining("17 elements");
    assertThatThrownBy(() -> g.transferToHost(DataTransferMode.EVERY_EXECUTION, fake(63), new short[32]))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("mismatched sizes");
    g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new byte[10], fake(64)); // the start of the buffer is fine
    assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new float[0], fake(64)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("empty");
  }

  @Test
  void unsupportedHostArraysAndPrebuiltArgumentsAreRejected() {
    TaskGraph g = new TaskGraph("g");
    assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, new char[4], fake(64)))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("unsupported host array type");
    assertThatThrownBy(() -> g.transferToDevice(DataTransferMode.EVERY_EXECUTION, "text", fake(64)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> g.prebuiltTask("k", kernel(), fake(4), new float[3]))
        .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("kernel argument 1");
    assertThatThrownBy(() -> g.prebuiltTask("k", kernel(), (Object) null)).hasMessageContaining("null");
    assertThatThrownBy(() -> WorkerGrid.of(1, 1, -1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void gridsAreRecordsAndSchedulersMapTaskNames() {
    assertThat(WorkerGrid.cover(1000, 256)).isEqualTo(new WorkerGrid(Dim3.of(4), Dim3.of(256), 0));
    assertThat(WorkerGrid.of(2, 64, 1024).toString()).isEqualTo("2x1x1 blocks of 64x1x1, 1024 B shared");
    GridScheduler s = new GridScheduler("a", WorkerGrid.of(1, 32)).setWorkerGrid("b", WorkerGrid.of(2, 32));
    assertThat(s.grids()).containsOnlyKeys("a", "b");
    assertThat(s.grids().get("b").blocks().x()).isEqualTo(2);
    assertThatThrownBy(() -> s.grids().clear()).isInstanceOf(UnsupportedOperationException.class);
  }

  @Test
  void dim3Validation() {
    assertThatThrownBy(() -> Dim3.of(0)).isInstanceOf(IllegalArgumentException.class);
    assertThat(Dim3.cover(1000, 256)).isEqualTo(new Dim3(4, 1, 1));
    assertThat(Dim3.cover(1024, 256)).isEqualTo(new Dim3(4, 1, 1));
    assertThat(new Dim3(2, 3, 4).volume()).isEqualTo(24);
    assertThatThrownBy(() -> Dim3.cover(1L << 40, 1)).isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void kernelArgsPackPointersToValues() {
    DeviceBuffer b = new DeviceBuffer(null, 0xABCD_0000_1000L, 64, false);
    KernelArgs args = new KernelArgs(b, 7, -3L, 1.5f, 2.25, (short) -2, (byte) 5, true);
    assertThat(args.count()).isEqualTo(8);
    Pointer p = args.pointer();
    assertThat(Pointer.nativeValue(p)).isEqualTo(args.address());
    assertThat(p.getPointer(0).getLong(0)).isEqualTo(0xABCD_0000_1000L);
    assertThat(p.getPointer(8).getInt(0)).isEqualTo(7);
    assertThat(p.getPointer(16).getLong(0)).isEqualTo(-3L);
    assertThat(p.getPointer(24).getFloat(0)).isEqualTo(1.5f);
    assertThat(p.getPointer(32).getDouble(0)).isEqualTo(2.25);
    assertThat(p.getPointer(40).getShort(0)).isEqualTo((short) -2);
    assertThat(p.getPointer(48).getByte(0)).isEqualTo((byte) 5);
    assertThat(p.getPointer(56).getByte(0)).isEqualTo((byte) 1);
    args.set(1, 42);
    assertThat(p.getPointer(8).getInt(0)).isEqualTo(42);
    assertThat(new KernelArgs().address()).isZero();
    assertThatThrownBy(() -> args.set(8, 1)).isInstanceOf(IndexOutOfBoundsException.class);
  }

  @Test
  void deviceBufferRangesAreChecked() {
    DeviceBuffer b = fake(100);
    DeviceBuffer s = b.slice(10, 20);
    assertThat(s.pointer()).isEqualTo(b.pointer() + 10);
    assertThat(s.bytes()).isEqualTo(20);
    assertThat(s.isOwner()).isFalse();
    assertThatThrownBy(() -> b.slice(90, 11)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> b.copyFromHost(new float[26], 0, 26, 0)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> b.copyToHost(new float[10], 5, 10, 0)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThatThrownBy(() -> b.copyFrom(fake(10), 11)).isInstanceOf(IndexOutOfBoundsException.class);
    assertThat(HostArrays.byteSize(new double[3])).isEqualTo(24);
    assertThat(HostArrays.byteSize(new short[3])).isEqualTo(6);
    assertThat(List.of(DataTransferMode.values())).hasSize(2);
  }
}
