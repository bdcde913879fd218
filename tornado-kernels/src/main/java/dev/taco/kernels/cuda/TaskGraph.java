package dev.taco.kernels.cuda;

import dev.taco.kernels.KernelContext;
import dev.taco.kernels.cuda.ImmutableTaskGraph.Custom;
import dev.taco.kernels.cuda.ImmutableTaskGraph.Kernel;
import dev.taco.kernels.cuda.ImmutableTaskGraph.Node;
import dev.taco.kernels.cuda.ImmutableTaskGraph.Op;
import dev.taco.kernels.cuda.ImmutableTaskGraph.ToDevice;
import dev.taco.kernels.cuda.ImmutableTaskGraph.ToHost;
import dev.taco.kernels.cuda.TaskFunctions.*;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

/**
 * A TornadoVM-style task graph (TornadoVM's {@code TaskGraph}): host→device transfers, kernel tasks given as method
 * references to Java kernels, custom steps (collectives) and device→host transfers, on one or more lanes. Built once,
 * frozen with {@link #snapshot()} into an {@link ImmutableTaskGraph}, run by an {@link ExecutionPlan} (TornadoVM's
 * {@code TornadoExecutionPlan}), which owns the grids ({@link GridScheduler}), the CUDA context, the streams and the
 * events.
 *
 * <pre>{@code
 * WorkerGrid rows = WorkerGrid.of(rowCount, cols / TacoGpuKernels.V);  // one block per row
 * ImmutableTaskGraph g = new TaskGraph("exchange")
 *     .transferToDevice(DataTransferMode.EVERY_EXECUTION, x, dx)            // node "toDevice0", lane 0
 *     .task("compress", TacoGpuKernels::compress, KERNEL_CONTEXT, dx, dx, body, rowCount, cols,
 *           64, true, Fp8.E4M3, false).grid(rows)                         // @Constant: G, Hadamard, format, bf16
 *     .step(exchange).onLane(COMMUNICATION_LANE).after("compress")       // a Step "exchange": body → peer,
 *     .task("decompress", TacoGpuKernels::decompress, KERNEL_CONTEXT, received, dy, dy, rowCount, cols,
 *           64, true, Fp8.E4M3, false, false).grid(rows).after("exchange")  // the peer's body → received
 *     .transferToHost(DataTransferMode.EVERY_EXECUTION, dy, y)
 *     .snapshot();
 * try (ExecutionPlan plan = new ExecutionPlan(ctx, g).withCudaGraph()) {
 *   plan.execute();                      // captures, then replays one cuGraphLaunch per execution
 * }
 * }</pre>
 *
 * <h2>Kernel tasks</h2>
 * {@link #task(String, Task1, Object...) task(name, Class::kernel, values...)} takes a method
 * reference to a static Java kernel ({@link TaskFunctions}, one interface per arity up to 20; the overloads are {@link
 * KernelTasks}, which {@link Launcher} shares for immediate launches) and one value per Java parameter: {@link
 * #KERNEL_CONTEXT} for the {@link KernelContext} of a SIMT kernel (the GPU supplies the real one), the compile-time
 * value of each {@code @Constant} parameter (it specialises the kernel: a {@link
 * dev.taco.kernels.compiler.KernelRequest}), a {@link DeviceBuffer} for each array parameter and the boxed value of
 * exactly the parameter's type for the others; a mistyped value is refused at once, naming the task, the parameter's
 * index and name. The kernel is compiled behind the scenes at the plan's first execution ({@link CudaContext#kernel}:
 * CUDA C from {@link KernelSources}, NVRTC through {@link PtxCache}, one module per kernel cached by the context).
 * {@link #prebuiltTask} takes a {@link CudaFunction} of hand-written CUDA C instead (TornadoVM's {@code prebuiltTask}).
 *
 * <h2>Lanes and dependencies</h2>
 * Every node runs on a lane, one CUDA stream of the plan: lane {@link #COMPUTE_LANE} (0) unless {@link #onLane} says
 * otherwise, e.g. {@link #COMMUNICATION_LANE}. Nodes of one lane run in insertion order; {@link #after} names earlier
 * nodes a node must run after, which on another lane costs an event recorded after the producer and a
 * {@code cuStreamWaitEvent} before the consumer, only where the order is not already implied (see
 * {@link LaneSchedule}). That is how a compressed all-reduce pipelines chunks: compress chunk i+1 on lane 0 while
 * chunk i is on the wire on lane 1. {@link #onLane}, {@link #after} and {@link #grid} apply to the node added last.
 *
 * <h2>Steps</h2>
 * {@link #step} adds a {@link Step}, the extension point for collectives: it is handed its lane's stream and must
 * only enqueue work there; whether it may be captured into a CUDA graph it says itself ({@link Step#capturable()}).
 *
 * <p>Checked at once, without a GPU: host array types and sizes against buffer sizes, kernel argument types, unique
 * names, that {@code after} names earlier nodes. Not thread-safe.
 *
 * <p>Reference: TornadoVM {@code TaskGraph}, {@code ImmutableTaskGraph}, {@code TornadoExecutionPlan},
 * {@code GridScheduler}, {@code DataTransferMode}, {@code TornadoFunctions}; CUDA Driver API
 * {@code cuStreamWaitEvent}, {@code cuEventRecord}.
 */
public final class TaskGraph implements KernelTasks<TaskGraph> {
  /** The lane of compute kernels (lane 0: executions begin and end on it). */
  public static final int COMPUTE_LANE = 0;
  /** The lane of collectives, so that communication overlaps compute. */
  public static final int COMMUNICATION_LANE = 1;
  /** Lanes are 0 to {@code MAX_LANES - 1}. */
  public static final int MAX_LANES = 8;

  /**
   * The value to give for a SIMT kernel's {@link KernelContext} parameter (as TornadoVM's {@code new KernelContext()}):
   * a placeholder the graph drops; on the GPU every thread gets its own ids. Calling it throws.
   */
  public static final KernelContext KERNEL_CONTEXT = new KernelContext(0, 0, 1, 1) {
    @Override
    public void barrier() {
      throw placeholder();
    }

    @Override
    public float[] allocateFloatLocalArray(int n) {
      throw placeholder();
    }

    @Override
    public int[] allocateIntLocalArray(int n) {
      throw placeholder();
    }

    @Override
    public float shflXor(float v, int laneMask) {
      throw placeholder();
    }

    @Override
    public int shflXor(int v, int laneMask) {
      throw placeholder();
    }

    @Override
    public void mmaBf16(float[] acc, int accOff, int a0, int a1, int a2, int a3, int b0, int b1) {
      throw placeholder();
    }

    @Override
    public void ldmatrixX4(int[] frag, int fragOff, int[] shared, int row) {
      throw placeholder();
    }

    @Override
    public void ldmatrixX4Trans(int[] frag, int fragOff, int[] shared, int row) {
      throw placeholder();
    }

    @Override
    public void cpAsync16(int[] shared, int dst, short[] global, int src) {
      throw placeholder();
    }

    @Override
    public void cpAsync16(int[] shared, int dst, int[] global, int src) {
      throw placeholder();
    }

    @Override
    public void cpAsync16(float[] shared, int dst, float[] global, int src) {
      throw placeholder();
    }

    @Override
    public void cpAsyncCommit() {
      throw placeholder();
    }

    @Override
    public void cpAsyncWait(int pendingGroups) {
      throw placeholder();
    }

    private UnsupportedOperationException placeholder() {
      return new UnsupportedOperationException("TaskGraph.KERNEL_CONTEXT is a placeholder for a task's KernelContext "
          + "parameter; run the kernel on the JVM with SimtEmulator");
    }
  };

  /**
   * A custom step enqueued on its lane's stream, in order with the other nodes: the extension point for collectives
   * (NCCL) and any other stream work.
   */
  public interface Step {
    /** @return a name, unique in the graph, used by {@link TaskGraph#after}, in logs and errors */
    String name();

    /**
     * @return whether the step's work can be captured into a CUDA graph and replayed: true for work that is only
     *     stream-ordered device work (an NCCL collective, copies, kernels), false for a step that coordinates host
     *     threads or must run host code at every execution
     */
    boolean capturable();

    /**
     * Enqueues the step's work on {@code stream}; must not block on the host. Under CUDA-graph capture it is called
     * once, during the capture, and what it enqueued is replayed at every execution.
     *
     * @param stream its lane's stream
     * @param first  whether this is the plan's first execution (true during a capture)
     */
    void enqueue(CudaStream stream, boolean first);

    /**
     * A step that enqueues {@code work} on its lane's stream, the same work at every execution.
     *
     * @param name unique in the graph
     * @param capturable as {@link #capturable()}
     */
    static Step of(String name, boolean capturable, java.util.function.Consumer<CudaStream> work) {
      Objects.requireNonNull(work, "work");
      return new Step() {
        @Override
        public String name() {
          return name;
        }

        @Override
        public boolean capturable() {
          return capturable;
        }

        @Override
        public void enqueue(CudaStream stream, boolean first) {
          work.accept(stream);
        }
      };
    }
  }

  private final String name;
  private final List<Node> nodes = new ArrayList<>();
  private final Set<String> names = new HashSet<>();
  private int toDevice;
  private int toHost;

  /**
   * @param name the graph's name, for logs
   */
  public TaskGraph(String name) {
    this.name = Objects.requireNonNull(name, "name");
  }

  /** @return the graph's name */
  public String name() {
    return name;
  }

  private static void checkFits(Object host, DeviceBuffer buf, String what) {
    long hb = HostArrays.byteSize(host);
    if (hb > buf.bytes()) {
      throw new IllegalArgumentException("mismatched sizes in " + what + ": host array of " + HostArrays.length(host)
          + " elements (" + hb + " bytes) does not fit device buffer of " + buf.bytes() + " bytes");
    }
    if (hb == 0) {
      throw new IllegalArgumentException("empty host array in " + what);
    }
  }

  /**
   * Adds a host→device copy of the whole array to the start of {@code dst}, named {@code toDevice<k>} (k counts
   * these transfers from 0), staged through a pinned buffer.
   *
   * @param mode when it runs
   * @param host a {@code float[]}, {@code short[]}, {@code byte[]}, {@code int[]}, {@code long[]} or {@code double[]}
   * @param dst  the destination (at least as large as the array)
   * @return this graph
   * @throws IllegalArgumentException for an unsupported array or mismatched sizes
   */
  public TaskGraph transferToDevice(DataTransferMode mode, Object host, DeviceBuffer dst) {
    Objects.requireNonNull(mode, "mode");
    Objects.requireNonNull(dst, "dst");
    checkFits(host, dst, "transferToDevice");
    return add("toDevice" + toDevice++, new ToDevice(mode, host, dst));
  }

  /**
   * Adds a device→host copy from the start of {@code src} into the whole array, named {@code toHost<k>}; the array
   * holds the data when {@link ExecutionPlan#execute()} returns.
   *
   * @param mode when it runs
   * @param src  the source buffer (at least as large as the array)
   * @param host the destination array
   * @return this graph
   * @throws IllegalArgumentException for an unsupported array or mismatched sizes
   */
  public TaskGraph transferToHost(DataTransferMode mode, DeviceBuffer src, Object host) {
    Objects.requireNonNull(mode, "mode");
    Objects.requireNonNull(src, "src");
    checkFits(host, src, "transferToHost");
    return add("toHost" + toHost++, new ToHost(mode, src, host));
  }

  /**
   * Adds a kernel task (class doc, "Kernel tasks"), the node every {@code task} overload adds; give its grid with
   * {@link #grid} or the plan's {@link GridScheduler}.
   *
   * @throws IllegalArgumentException as {@link KernelTasks#kernelTask}, or for a duplicate name
   * @throws IllegalStateException if the kernel's class was compiled without {@code javac -parameters}
   */
  @Override
  public TaskGraph kernelTask(String taskName, Serializable kernel, Object[] values) {
    Objects.requireNonNull(kernel, "kernel");
    checkName(taskName);
    KernelMethod.Binding b = KernelMethod.of(taskName, kernel).bind(taskName, values);
    return add(taskName, new Kernel(b.request(), null, b.launchArgs(), null));
  }

  /**
   * Adds a task of a prebuilt kernel (hand-written CUDA C loaded as a {@link CudaFunction}; TornadoVM's
   * {@code prebuiltTask}). Give its grid with {@link #grid} or the plan's {@link GridScheduler}.
   *
   * @param taskName a name unique in the graph
   * @param function the kernel, of the plan's context
   * @param args     its arguments in parameter order ({@link KernelArgs} types)
   * @return this graph
   * @throws IllegalArgumentException for a duplicate name or an unsupported argument
   */
  public TaskGraph prebuiltTask(String taskName, CudaFunction function, Object... args) {
    Objects.requireNonNull(function, "function");
    checkName(taskName);
    for (int i = 0; i < args.length; i++) {
      KernelArgs.check(i, args[i]);
    }
    return add(taskName, new Kernel(null, function, Arrays.asList(args), null));
  }

  /**
   * Adds a custom step (class doc, "Steps").
   *
   * @param step the step, named by {@link Step#name()}
   * @return this graph
   * @throws IllegalArgumentException for a duplicate name
   */
  public TaskGraph step(Step step) {
    Objects.requireNonNull(step, "step");
    return add(step.name(), new Custom(step));
  }

  /**
   * Puts the node added last on a lane.
   *
   * @param lane 0 ({@link #COMPUTE_LANE}) to {@link #MAX_LANES} − 1
   * @return this graph
   * @throws IllegalArgumentException for a lane out of range
   * @throws IllegalStateException    if no node has been added
   */
  public TaskGraph onLane(int lane) {
    if (lane < 0 || lane >= MAX_LANES) {
      throw new IllegalArgumentException("lane " + lane + " out of range 0.." + (MAX_LANES - 1));
    }
    Node n = last();
    nodes.set(nodes.size() - 1, new Node(n.name(), lane, n.after(), n.op()));
    return this;
  }

  /**
   * Makes the node added last run after the named nodes (class doc, "Lanes and dependencies").
   *
   * @param nodeNames names of nodes added before it (tasks, steps, {@code toDevice<k>}, {@code toHost<k>})
   * @return this graph
   * @throws IllegalArgumentException for a name of no earlier node
   * @throws IllegalStateException    if no node has been added
   */
  public TaskGraph after(String... nodeNames) {
    Node n = last();
    List<String> after = new ArrayList<>(n.after());
    for (String a : nodeNames) {
      if (!names.contains(a) || a.equals(n.name())) {
        throw new IllegalArgumentException("'" + n.name() + "' cannot run after '" + a + "': no such node was added "
            + "before it in graph '" + name + "'");
      }
      after.add(a);
    }
    nodes.set(nodes.size() - 1, new Node(n.name(), n.lane(), after, n.op()));
    return this;
  }

  /**
   * Gives the kernel task added last its default grid (a plan's {@link GridScheduler} may override it).
   *
   * @param grid the launch shape
   * @return this graph
   * @throws IllegalStateException if the node added last is not a kernel task
   * @throws IllegalArgumentException if the kernel is translated from Java and the grid has y or z above 1
   */
  public TaskGraph grid(WorkerGrid grid) {
    Objects.requireNonNull(grid, "grid");
    Node n = last();
    if (!(n.op() instanceof Kernel k)) {
      throw new IllegalStateException("grid(...) follows a kernel task; '" + n.name() + "' is not one");
    }
    k.checkGrid(n.name(), grid);
    nodes.set(nodes.size() - 1, new Node(n.name(), n.lane(), n.after(),
        new Kernel(k.request(), k.prebuilt(), k.args(), grid)));
    return this;
  }

  /**
   * Freezes the graph as it is now; the builder may be changed further and snapshot again, which does not change
   * this snapshot.
   *
   * @return the immutable graph
   * @throws IllegalStateException if no node has been added
   */
  public ImmutableTaskGraph snapshot() {
    if (nodes.isEmpty()) {
      throw new IllegalStateException("task graph '" + name + "' is empty");
    }
    return new ImmutableTaskGraph(name, nodes);
  }

  private TaskGraph add(String nodeName, Op op) {
    checkName(nodeName);
    names.add(nodeName);
    nodes.add(new Node(nodeName, COMPUTE_LANE, List.of(), op));
    return this;
  }

  private void checkName(String n) {
    if (n == null || n.isBlank()) {
      throw new IllegalArgumentException("task name must not be blank");
    }
    if (names.contains(n)) {
      throw new IllegalArgumentException("duplicate task name '" + n + "' in graph '" + name + "'");
    }
  }

  private Node last() {
    if (nodes.isEmpty()) {
      throw new IllegalStateException("task graph '" + name + "' has no node yet");
    }
    return nodes.get(nodes.size() - 1);
  }
}
